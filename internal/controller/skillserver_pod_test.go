package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// podAllowed is the PodAllowed condition's reason and message.
func podAllowed(ss *cantusv1alpha1.SkillServer) string {
	for _, c := range ss.Status.Conditions {
		if c.Type == cantusv1alpha1.ConditionPodAllowed {
			return string(c.Status) + " " + c.Reason + ": " + c.Message
		}
	}
	return ""
}

// A SkillServer's spec.pod.image and spec.pod.serviceAccountName need the
// ToolSourcePolicy that selects its namespace (issue 23, finding 3: anyone who could
// create a SkillServer ran any image under any service account of the namespace).
// Without a policy, or with an Enforce policy that lists neither, nothing is applied and
// the server is Stalled with the policy's kind of message; a policy in Audit mode lets
// it run with PodAllowed=True/AllowedByAudit and a Warning event; an Enforce policy that
// lists both allows it.
func TestPodOverridesNeedTheToolSourcePolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	startManager(t, workload.NewKubernetes(nil, "img", "cluster.local"))
	image := "registry.example.com/tenant-" + ns + "/adapter:1"
	ss := kubekit.NewSkillServer(ns, "custom", kubekit.TemplateSkill("echo", "ok"))
	ss.Spec.Pod = &cantusv1alpha1.PodOverrides{Image: image, ServiceAccountName: "cloud-admin"}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	deployment := func() error {
		return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "custom"}, &appsv1.Deployment{})
	}

	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "custom")).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonPodNotAllowlisted),
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonPodNotAllowlisted),
		WithTransform(podAllowed, ContainSubstring(`False NotAllowlisted: spec.pod is not allowed: no ToolSourcePolicy selects namespace "`+ns+`"`))))
	g.Consistently(deployment, 2*time.Second).ShouldNot(Succeed(), "a refused pod override was applied")

	policy := &cantusv1alpha1.ToolSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: "pods-" + ns}, Spec: cantusv1alpha1.ToolSourcePolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Images:            []string{"registry.example.com/ops"},
		ServiceAccounts:   []string{"runner"},
	}}
	g.Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), policy) })
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "custom")).Should(WithTransform(podAllowed, And(
		ContainSubstring(`add an image prefix of "`+image+`" to spec.images`),
		ContainSubstring(`add "cloud-admin" to spec.serviceAccounts`))))
	g.Expect(deployment()).NotTo(Succeed())

	// Audit: served, said in the condition and a Warning event.
	policy.Spec.Mode = cantusv1alpha1.PolicyAudit
	g.Expect(k8sClient.Update(ctx, policy)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "custom")).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionPodAllowed, metav1.ConditionTrue, cantusv1alpha1.ReasonPodAllowedByAudit),
		WithTransform(podAllowed, ContainSubstring("Enforce would refuse it")),
		WithTransform(kubekit.StalledMessage, BeEmpty())))
	g.Eventually(deployment).Should(Succeed())
	g.Eventually(kubekit.WarningReasons(ctx, k8sClient, ns, "custom"), 10*time.Second).Should(ContainElement(cantusv1alpha1.ReasonPodAllowedByAudit))

	// Enforce with both listed: allowed, and the pods run them.
	policy.Spec.Mode = cantusv1alpha1.PolicyEnforce
	policy.Spec.Images = []string{"registry.example.com/tenant-" + ns}
	policy.Spec.ServiceAccounts = []string{"cloud-admin"}
	g.Expect(k8sClient.Update(ctx, policy)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "custom")).Should(
		kubekit.HaveCondition(cantusv1alpha1.ConditionPodAllowed, metav1.ConditionTrue, cantusv1alpha1.ReasonPodAllowed))
	dep := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "custom"}, dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.ServiceAccountName).To(Equal("cloud-admin"))
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
}

// The API server refuses a policy entry that is not a service account name.
func TestPolicyServiceAccountsAreNames(t *testing.T) {
	g := NewWithT(t)
	bad := &cantusv1alpha1.ToolSourcePolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-sa-"},
		Spec: cantusv1alpha1.ToolSourcePolicySpec{ServiceAccounts: []string{"ns/runner"}}}
	err := k8sClient.Create(context.Background(), bad)
	g.Expect(err).To(MatchError(ContainSubstring("each serviceAccounts entry is a service account name")))
}

// A SkillServer whose service account the ToolSourcePolicy allows but the operator's
// admission parameters do not is refused before anything is applied, with a message
// naming the parameter (issue 39, R11): applied, its Deployment would be denied by the
// API server on every reconcile, a rollout that never ends. A server without
// spec.pod runs under "default", which the parameters must allow too.
func TestServiceAccountNotInTheAdmissionParametersIsRefusedBeforeApplying(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	params := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cantus-operator-admission"},
		Data: map[string]string{"serviceAccounts": "other/cloud-admin, " + ns + "/runner"}}
	g.Expect(k8sClient.Create(ctx, params)).To(Succeed())
	policy := &cantusv1alpha1.ToolSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: "admission-" + ns}, Spec: cantusv1alpha1.ToolSourcePolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		ServiceAccounts:   []string{"cloud-admin", "runner"},
	}}
	g.Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), policy) })
	startManagerVerifying(t, workload.NewKubernetes(nil, "img", "cluster.local"), nil, func(r *SkillServerReconciler) {
		r.AdmissionParams = &AdmissionParams{Reader: k8sClient, Key: crclient.ObjectKeyFromObject(params), MaxAge: time.Nanosecond}
	})
	deployment := func(name string) func() error {
		return func() error {
			return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: name}, &appsv1.Deployment{})
		}
	}

	cloud := kubekit.NewSkillServer(ns, "cloud", kubekit.TemplateSkill("echo", "ok"))
	cloud.Spec.Pod = &cantusv1alpha1.PodOverrides{ServiceAccountName: "cloud-admin"}
	plain := kubekit.NewSkillServer(ns, "plain", kubekit.TemplateSkill("echo", "ok"))
	runner := kubekit.NewSkillServer(ns, "runner", kubekit.TemplateSkill("echo", "ok"))
	runner.Spec.Pod = &cantusv1alpha1.PodOverrides{ServiceAccountName: "runner"}
	for _, ss := range []*cantusv1alpha1.SkillServer{cloud, plain, runner} {
		g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	}
	paramsName := ns + "/cantus-operator-admission"
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "cloud")).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonPodNotAdmitted),
		WithTransform(podAllowed, ContainSubstring("service account "+ns+"/cloud-admin is not in serviceAccounts of the operator's admission policy parameters "+paramsName))))
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "plain")).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonPodNotAdmitted),
		WithTransform(podAllowed, ContainSubstring("service account "+ns+"/default is not in serviceAccounts"))))
	g.Eventually(deployment("runner")).Should(Succeed(), "an account the parameters list is applied")
	g.Consistently(deployment("cloud"), 2*time.Second).ShouldNot(Succeed(), "a server the admission policy would refuse was applied")
	g.Expect(deployment("plain")()).NotTo(Succeed())

	// The admin lists the accounts: the servers are applied (here on their next
	// reconcile, which an edit of the server's spec starts).
	params.Data["serviceAccounts"] = "*/default,*/cloud-admin"
	g.Expect(k8sClient.Update(ctx, params)).To(Succeed())
	for _, name := range []string{"cloud", "plain"} {
		ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		g.Expect(kubekit.Update(ctx, k8sClient, ss, func(ss *cantusv1alpha1.SkillServer) { ss.Spec.Skills[0].Description = "edited" })).To(Succeed())
		g.Eventually(deployment(name)).Should(Succeed())
	}
}
