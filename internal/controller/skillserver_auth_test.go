package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/saissuer"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
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

// OIDC groups are prefixed "oidc:" (issue 23 #5). A server whose rules name groups
// from before the prefix keeps matching them unprefixed while only an Audit policy
// covers its namespace, with a GroupsPrefixed warning and event; under Enforce the
// prefix applies and the warning says those rules match no OIDC token; moved rules
// clear it. The API server refuses a prefix that names Kubernetes groups.
func TestOIDCGroupsPrefixUpgradePath(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	startManagerVerifying(t, workload.NewKubernetes(nil, "img", "cluster.local"), nil)

	policy := &cantusv1alpha1.ToolSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: "groups-" + ns}, Spec: cantusv1alpha1.ToolSourcePolicySpec{
		Mode:              cantusv1alpha1.PolicyAudit,
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Hosts:             []string{"example.com"},
	}}
	g.Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), policy) })

	ss := kubekit.NewSkillServer(ns, "staff", kubekit.TemplateSkill("roster", "r"))
	ss.Spec.Auth = &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: "https://login.example.com", Audiences: []string{"cantus"}}}
	ss.Spec.Authorization = &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
		{Tools: []string{"*"}, Groups: []string{"admins", "oidc:ops"}},
	}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "staff"), 20*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionGroupsPrefixed, metav1.ConditionFalse, cantusv1alpha1.ReasonUnprefixedGroupsAudited))
	g.Eventually(renderedIssuers(ctx, ns, "staff")).Should(ConsistOf(HaveField("GroupsPrefix", "")))
	g.Eventually(kubekit.WarningReasons(ctx, k8sClient, ns, "staff")).Should(ContainElement(cantusv1alpha1.ReasonUnprefixedGroupsAudited))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "staff")()
	g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", cantusv1alpha1.ConditionGroupsPrefixed),
		HaveField("Message", And(ContainSubstring("admins"), ContainSubstring(policy.Name), ContainSubstring(`"oidc:admins"`))))))

	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(policy), policy)).To(Succeed())
	policy.Spec.Mode = cantusv1alpha1.PolicyEnforce
	g.Expect(k8sClient.Update(ctx, policy)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "staff"), 20*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionGroupsPrefixed, metav1.ConditionFalse, cantusv1alpha1.ReasonUnprefixedGroups))
	g.Eventually(renderedIssuers(ctx, ns, "staff")).Should(ConsistOf(HaveField("GroupsPrefix", "oidc:")))
	g.Eventually(kubekit.WarningReasons(ctx, k8sClient, ns, "staff")).Should(ContainElement(cantusv1alpha1.ReasonUnprefixedGroups))

	g.Expect(kubekit.Update(ctx, k8sClient, got, func(got *cantusv1alpha1.SkillServer) {
		got.Spec.Authorization.Rules[0].Groups = []string{"oidc:admins", "oidc:ops"}
	})).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "staff"), 20*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionGroupsPrefixed, metav1.ConditionTrue, cantusv1alpha1.ReasonGroupsPrefixed))

	bad := kubekit.NewSkillServer(ns, "bad", kubekit.TemplateSkill("roster", "r"))
	bad.Spec.Auth = &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: "https://login.example.com", Audiences: []string{"cantus"}, GroupsPrefix: ptr.To("system:")}}
	err := k8sClient.Create(ctx, bad)
	g.Expect(err).To(MatchError(ContainSubstring("groupsPrefix must not begin with system:")))
	// Prefixes that cannot spell system: with any group are accepted, "" among them.
	for i, prefix := range []string{"", "sso:", "System", "systems"} {
		fine := kubekit.NewSkillServer(ns, fmt.Sprintf("fine-%d", i), kubekit.TemplateSkill("roster", "r"))
		fine.Spec.Auth = &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: "https://login.example.com", Audiences: []string{"cantus"}, GroupsPrefix: ptr.To(prefix)}}
		g.Expect(k8sClient.Create(ctx, fine)).To(Succeed(), "prefix %q", prefix)
	}
}

// renderedAudiences are the service-account issuer's audiences in a server's config.
func renderedAudiences(ctx context.Context, ns, name string) func() ([]string, error) {
	return func() ([]string, error) {
		issuers, err := renderedIssuers(ctx, ns, name)()
		for _, i := range issuers {
			if i.Kind == adapterconfig.IssuerServiceAccount {
				return i.Audiences, err
			}
		}
		return nil, err
	}
}

// A server may not accept tokens for the API server's audience or another server's
// default audience (issue 23 #4). Under an Audit-only policy they are accepted for now
// with an AudiencesAllowed warning and event; under Enforce they are left out of the
// config and the server is Stalled with reason ForbiddenAudience. Before, both were
// rendered and the server was Ready.
func TestForbiddenAudiencesAreRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	issuer := &saissuer.Watcher{Client: discovery.NewDiscoveryClientForConfigOrDie(restConfig).RESTClient(), Every: time.Hour}
	keys, err := issuer.Current(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys.URL).NotTo(BeEmpty())
	startManagerVerifying(t, workload.NewKubernetes(nil, "img", "cluster.local"), nil, func(r *SkillServerReconciler) {
		r.Issuer = issuer
		r.APIAudiences = []string{"https://vault.example.com"}
	})

	policy := &cantusv1alpha1.ToolSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: "audiences-" + ns}, Spec: cantusv1alpha1.ToolSourcePolicySpec{
		Mode:              cantusv1alpha1.PolicyAudit,
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Hosts:             []string{"example.com"},
	}}
	g.Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), policy) })

	other := "payroll." + ns + ".skillserver.cantus.dev"
	audiences := []string{keys.URL, other, "https://vault.example.com", "room." + ns + ".skillserver.cantus.dev", "library-agents"}
	ss := kubekit.NewSkillServer(ns, "room", kubekit.TemplateSkill("search_book", "found"))
	ss.Spec.Auth = &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{Audiences: audiences}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "room"), 20*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionAudiencesAllowed, metav1.ConditionFalse, cantusv1alpha1.ReasonForbiddenAudienceAudited))
	g.Eventually(renderedAudiences(ctx, ns, "room")).Should(Equal(audiences))
	g.Eventually(kubekit.WarningReasons(ctx, k8sClient, ns, "room")).Should(ContainElement(cantusv1alpha1.ReasonForbiddenAudienceAudited))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "room")()
	g.Expect(got).NotTo(kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonForbiddenAudience))

	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(policy), policy)).To(Succeed())
	policy.Spec.Mode = cantusv1alpha1.PolicyEnforce
	g.Expect(k8sClient.Update(ctx, policy)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "room"), 20*time.Second).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonForbiddenAudience),
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonForbiddenAudience)))
	g.Eventually(renderedAudiences(ctx, ns, "room")).Should(Equal([]string{"room." + ns + ".skillserver.cantus.dev", "library-agents"}))
	g.Eventually(kubekit.WarningReasons(ctx, k8sClient, ns, "room")).Should(ContainElement(cantusv1alpha1.ReasonForbiddenAudience))
	got, _ = kubekit.GetSkillServer(ctx, k8sClient, ns, "room")()
	for _, c := range got.Status.Conditions {
		if c.Type == cantusv1alpha1.ConditionReady {
			g.Expect(c.Message).To(And(ContainSubstring(keys.URL), ContainSubstring(other)))
		}
	}

	// The audiences fixed, the server is no longer Stalled for them.
	g.Expect(kubekit.Update(ctx, k8sClient, got, func(got *cantusv1alpha1.SkillServer) {
		got.Spec.Auth.ServiceAccountTokens.Audiences = []string{"library-agents"}
	})).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "room"), 20*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionAudiencesAllowed, metav1.ConditionTrue, cantusv1alpha1.ReasonAudiencesAllowed))
	got, _ = kubekit.GetSkillServer(ctx, k8sClient, ns, "room")()
	g.Expect(got).NotTo(kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonForbiddenAudience))
}

// spec.auth.oidc re-opened what TestForbiddenAudiencesAreRefused closes (review R10):
// an OIDC issuer at the cluster's own service-account issuer URL is refused outright
// (Stalled, InvalidSpec, pointing at spec.auth.serviceAccountTokens), and OIDC audiences
// that are the API server's or another server's are left out (Stalled,
// ForbiddenAudience). Before, both servers became Ready.
func TestOIDCAtTheClusterIssuerOrWithForbiddenAudiencesIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	issuer := &saissuer.Watcher{Client: discovery.NewDiscoveryClientForConfigOrDie(restConfig).RESTClient(), Every: time.Hour}
	keys, err := issuer.Current(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	startManagerVerifying(t, workload.NewKubernetes(nil, "img", "cluster.local"), nil, func(r *SkillServerReconciler) {
		r.Issuer = issuer
		r.APIAudiences = []string{"cantus.dev/catalog"}
	})

	cluster := kubekit.NewSkillServer(ns, "mirror", kubekit.TemplateSkill("search_book", "found"))
	cluster.Spec.Auth = &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: keys.URL, Audiences: []string{"mirror-agents"}}}
	g.Expect(k8sClient.Create(ctx, cluster)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "mirror"), 20*time.Second).Should(
		kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonInvalidSpec))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "mirror")()
	g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", cantusv1alpha1.ConditionStalled),
		HaveField("Message", And(ContainSubstring(keys.URL), ContainSubstring("spec.auth.serviceAccountTokens"))))))

	other := "payroll." + ns + ".skillserver.cantus.dev"
	ss := kubekit.NewSkillServer(ns, "room", kubekit.TemplateSkill("search_book", "found"))
	ss.Spec.Auth = &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: "https://login.example.com",
		Audiences: []string{"https://kubernetes.default.svc", "cantus.dev/catalog", other, "room-agents"}}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "room"), 20*time.Second).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonForbiddenAudience),
		kubekit.HaveCondition(cantusv1alpha1.ConditionAudiencesAllowed, metav1.ConditionFalse, cantusv1alpha1.ReasonForbiddenAudience)))
	g.Eventually(renderedIssuers(ctx, ns, "room")).Should(ConsistOf(HaveField("Audiences", []string{"room-agents"})))
	got, _ = kubekit.GetSkillServer(ctx, k8sClient, ns, "room")()
	g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", cantusv1alpha1.ConditionAudiencesAllowed),
		HaveField("Message", And(ContainSubstring("spec.auth.oidc.audiences"), ContainSubstring(other))))))
}
