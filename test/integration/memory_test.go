package integration

import (
	"context"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/mcpkit"
	"github.com/cantus-dev/cantus-operator/internal/workload/local"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

func TestLocalRuntimeServesTheMemoryTool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	adapters := local.New(nil)
	adapters.MemoryDir = t.TempDir()
	startManager(t, adapters)

	ss := kubekit.NewSkillServer(ns, "notes")
	ss.Spec.Memory = &cantusv1alpha1.MemorySpec{}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "notes")).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "notes")()

	res, err := callTool(ctx, got.Status.URL, "streamable-http", "memory", map[string]any{
		"command": "create", "path": "/memories/reading.md", "file_text": "Dune, chapter 3\n"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.IsError).To(BeFalse(), mcpkit.ResultText(res))
	res, err = callTool(ctx, got.Status.URL, "streamable-http", "memory", map[string]any{"command": "view", "path": "/memories/reading.md"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mcpkit.ResultText(res)).To(ContainSubstring("Dune, chapter 3"))
	res, err = callTool(ctx, got.Status.URL, "streamable-http", "memory", map[string]any{"command": "delete", "path": "/memories/reading.md"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.IsError).To(BeTrue(), "delete needs confirm: true")
	g.Expect(mcpkit.ResultText(res)).To(HavePrefix("memory_refused: "))
}
