package integration

import (
	"context"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/controller"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload/local"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// A verified server is not verified again until asked: the annotation alone (the
// generation does not move) verifies its pods once more and records the request handled.
func TestRequestedAtVerifiesASkillServerAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	verifier := &countingLister{ToolLister: &controller.MCPVerifier{}}
	startManagerVerifying(t, local.New(nil), verifier)
	ss := kubekit.NewSkillServer(ns, "asked", kubekit.TemplateSkill("search_book", "found: {{ .title }}"))
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "asked")).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionVerified, metav1.ConditionTrue, cantusv1alpha1.ReasonToolsServed))
	verifiedOnce := verifier.calls.Load()
	g.Expect(verifiedOnce).To(BeNumerically(">", 0))

	got, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "asked")()
	g.Expect(err).NotTo(HaveOccurred())
	generation := got.Generation
	kubekit.RequestReconcile(t, ctx, k8sClient, got, "1700000000")
	g.Eventually(func() (string, error) {
		ss, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "asked")()
		return ss.Status.LastHandledReconcileAt, err
	}).Should(Equal("1700000000"))
	g.Expect(verifier.calls.Load()).To(BeNumerically(">", verifiedOnce), "the request verified the pods again")
	got, _ = kubekit.GetSkillServer(ctx, k8sClient, ns, "asked")()
	g.Expect(got.Generation).To(Equal(generation), "an annotation does not move the generation")
	g.Expect(got).To(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
}
