package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
)

// requestReconcile annotates obj as `kubectl annotate --overwrite ... cantus.dev/requestedAt=...` does.
func requestReconcile(g Gomega, ctx context.Context, obj crclient.Object, value string) {
	patch := crclient.MergeFrom(obj.DeepCopyObject().(crclient.Object))
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[cantusv1alpha1.ReconcileRequestAnnotation] = value
	obj.SetAnnotations(annotations)
	g.Expect(k8sClient.Patch(ctx, obj, patch)).To(Succeed())
}

// An import refreshes on its interval; the annotation probes it now.
func TestRequestedAtProbesAnImportAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	allowLoopback(t, ns)
	startImportManager(t, 0)
	remote := newCountingServer(t, adapterHandler(t, "", "search_book"))
	imp := newImport(ns, "asked", remote.URL+"/mcp")
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
	probed := remote.requests.Load()

	got, err := get()
	g.Expect(err).NotTo(HaveOccurred())
	requestReconcile(g, ctx, got, "2025-01-02T03:04:05Z")
	g.Eventually(func() (string, error) {
		got, err := get()
		return got.Status.LastHandledReconcileAt, err
	}).Should(Equal("2025-01-02T03:04:05Z"))
	g.Expect(remote.requests.Load()).To(BeNumerically(">", probed), "the request probed the remote again")
}
