package controller

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// renderedIssuers are the issuers of the adapter config in a server's ConfigMap.
func renderedIssuers(ctx context.Context, ns, name string) func() ([]adapterconfig.Issuer, error) {
	return func() ([]adapterconfig.Issuer, error) {
		cm := &corev1.ConfigMap{}
		if err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: name + "-adapter"}, cm); err != nil {
			return nil, err
		}
		var cfg adapterconfig.Config
		if err := json.Unmarshal([]byte(cm.Data[adapterconfig.ConfigFileName]), &cfg); err != nil || cfg.Auth == nil {
			return nil, err
		}
		return cfg.Auth.Issuers, nil
	}
}

// warningReasons are the reasons of the Warning events about an object.
func warningReasons(ctx context.Context, ns, name string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		_ = k8sClient.List(ctx, list, crclient.InNamespace(ns))
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Type == corev1.EventTypeWarning {
				reasons = append(reasons, e.Reason)
			}
		}
		return reasons
	}
}

// OIDC groups are prefixed "oidc:" (issue 23 #5). A server whose rules name groups
// from before the prefix keeps matching them unprefixed while only an Audit policy
// covers its namespace, with a GroupsPrefixed warning and event; under Enforce the
// prefix applies and the warning says those rules match no OIDC token; moved rules
// clear it. The API server refuses a prefix that names Kubernetes groups.
func TestOIDCGroupsPrefixUpgradePath(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	startManagerVerifying(t, workload.NewKubernetes(nil, "img", "cluster.local"), nil)

	policy := &cantusv1alpha1.ToolSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: "groups-" + ns}, Spec: cantusv1alpha1.ToolSourcePolicySpec{
		Mode:              cantusv1alpha1.PolicyAudit,
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Hosts:             []string{"example.com"},
	}}
	g.Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), policy) })

	ss := newSkillServer(ns, "staff", templateSkill("roster", "r"))
	ss.Spec.Auth = &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: "https://login.example.com", Audiences: []string{"cantus"}}}
	ss.Spec.Authorization = &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
		{Tools: []string{"*"}, Groups: []string{"admins", "oidc:ops"}},
	}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	g.Eventually(getSkillServer(ctx, ns, "staff"), 20*time.Second).Should(haveCondition(cantusv1alpha1.ConditionGroupsPrefixed, metav1.ConditionFalse, cantusv1alpha1.ReasonUnprefixedGroupsAudited))
	g.Eventually(renderedIssuers(ctx, ns, "staff")).Should(ConsistOf(HaveField("GroupsPrefix", "")))
	g.Eventually(warningReasons(ctx, ns, "staff")).Should(ContainElement(cantusv1alpha1.ReasonUnprefixedGroupsAudited))
	got, _ := getSkillServer(ctx, ns, "staff")()
	g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", cantusv1alpha1.ConditionGroupsPrefixed),
		HaveField("Message", And(ContainSubstring("admins"), ContainSubstring(policy.Name), ContainSubstring(`"oidc:admins"`))))))

	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(policy), policy)).To(Succeed())
	policy.Spec.Mode = cantusv1alpha1.PolicyEnforce
	g.Expect(k8sClient.Update(ctx, policy)).To(Succeed())
	g.Eventually(getSkillServer(ctx, ns, "staff"), 20*time.Second).Should(haveCondition(cantusv1alpha1.ConditionGroupsPrefixed, metav1.ConditionFalse, cantusv1alpha1.ReasonUnprefixedGroups))
	g.Eventually(renderedIssuers(ctx, ns, "staff")).Should(ConsistOf(HaveField("GroupsPrefix", "oidc:")))
	g.Eventually(warningReasons(ctx, ns, "staff")).Should(ContainElement(cantusv1alpha1.ReasonUnprefixedGroups))

	got, _ = getSkillServer(ctx, ns, "staff")()
	got.Spec.Authorization.Rules[0].Groups = []string{"oidc:admins", "oidc:ops"}
	g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
	g.Eventually(getSkillServer(ctx, ns, "staff"), 20*time.Second).Should(haveCondition(cantusv1alpha1.ConditionGroupsPrefixed, metav1.ConditionTrue, cantusv1alpha1.ReasonGroupsPrefixed))

	bad := newSkillServer(ns, "bad", templateSkill("roster", "r"))
	bad.Spec.Auth = &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: "https://login.example.com", Audiences: []string{"cantus"}, GroupsPrefix: ptr.To("system:")}}
	err := k8sClient.Create(ctx, bad)
	g.Expect(err).To(MatchError(ContainSubstring("groupsPrefix must not begin with system:")))
}
