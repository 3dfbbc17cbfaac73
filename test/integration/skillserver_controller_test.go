package integration

import (
	"context"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/mcpkit"
	"github.com/cantus-dev/cantus-operator/internal/workload/local"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

func TestLocalRuntimeServesToolsAtStatusURL(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	startManager(t, local.New(nil))

	ss := kubekit.NewSkillServer(ns, "local", kubekit.TemplateSkill("search_book", "found: {{ .title }}"))
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "local"), 20*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "local")()
	g.Expect(got.Status.URL).To(MatchRegexp(`^http://127\.0\.0\.1:\d+/mcp$`))

	res, err := callTool(ctx, got.Status.URL, "streamable-http", "search_book", map[string]any{"title": "Dune"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.IsError).To(BeFalse())
	g.Expect(mcpkit.ResultText(res)).To(Equal("found: Dune"))

	// A spec change is served on the same URL.
	g.Expect(kubekit.Update(ctx, k8sClient, got, func(got *cantusv1alpha1.SkillServer) {
		got.Spec.Skills[0].Template.Text = "catalog hit: {{ .title }}"
	})).To(Succeed())
	g.Eventually(func() (string, error) {
		res, err := callTool(ctx, got.Status.URL, "streamable-http", "search_book", map[string]any{"title": "Dune"})
		if err != nil {
			return "", err
		}
		return mcpkit.ResultText(res), nil
	}, 20*time.Second).Should(Equal("catalog hit: Dune"))

	// Deleted: the local server stops.
	g.Expect(k8sClient.Delete(ctx, got)).To(Succeed())
	g.Eventually(func() error {
		_, err := callTool(ctx, got.Status.URL, "streamable-http", "search_book", map[string]any{"title": "Dune"})
		return err
	}, 20*time.Second).Should(HaveOccurred())
}
