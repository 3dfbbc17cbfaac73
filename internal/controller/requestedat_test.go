package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
)

// An import refreshes on its interval; the annotation probes it now.
func TestRequestedAtProbesAnImportAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startImportManager(t, 0)
	remote := testkit.NewCountingServer(t, adapterHandler(t, "", "search_book"))
	imp := kubekit.NewImport(ns, "asked", remote.URL+"/mcp")
	imp.Spec.RefreshInterval = cantusv1alpha1.DurationFrom(time.Hour)
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	get := func() (*cantusv1alpha1.RemoteToolImport, error) {
		got := &cantusv1alpha1.RemoteToolImport{}
		return got, k8sClient.Get(ctx, crclient.ObjectKeyFromObject(imp), got)
	}
	g.Eventually(func() (int32, error) {
		got, err := get()
		return got.Status.ToolCount, err
	}).Should(Equal(int32(1)))
	probed := remote.Requests.Load()

	got, err := get()
	g.Expect(err).NotTo(HaveOccurred())
	kubekit.RequestReconcile(t, ctx, k8sClient, got, "2025-01-02T03:04:05Z")
	g.Eventually(func() (string, error) {
		got, err := get()
		return got.Status.LastHandledReconcileAt, err
	}).Should(Equal("2025-01-02T03:04:05Z"))
	g.Expect(remote.Requests.Load()).To(BeNumerically(">", probed), "the request probed the remote again")
}
