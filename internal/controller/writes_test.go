package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
)

// A probe that finds the remote unchanged writes nothing: the stored object keeps its
// resourceVersion. A change of the remote's tools is written.
func TestUnchangedProbeWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	remote := &swappableHandler{}
	first := adapterHandler(t, "", "search_book")
	remote.h.Store(&first)
	srv := testkit.NewCountingServer(t, remote)

	// Each reconcile happens a refresh interval later, as in a running operator.
	clock := time.Now()
	r := importReconciler()
	r.Now = func() time.Time { clock = clock.Add(5 * time.Minute); return clock }
	imp := kubekit.ReconcileImport(t, k8sClient, r, kubekit.NewImport(ns, "steady", srv.URL+"/mcp"))
	g.Expect(imp.Status.ToolCount).To(Equal(int32(1)))
	version := imp.ResourceVersion

	for range 3 {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: crclient.ObjectKeyFromObject(imp)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	got := &cantusv1alpha1.RemoteToolImport{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(imp), got)).To(Succeed())
	g.Expect(got.ResourceVersion).To(Equal(version), "three probes of an unchanged remote wrote the status")
	g.Expect(srv.Requests.Load()).To(BeNumerically(">=", 4*2), "every reconcile did probe the remote")

	second := adapterHandler(t, "", "search_book", "borrow")
	remote.h.Store(&second)
	got = kubekit.ReconcileImport(t, k8sClient, r, got)
	g.Expect(got.ResourceVersion).NotTo(Equal(version))
	g.Expect(got.Status.ToolCount).To(Equal(int32(2)))
}
