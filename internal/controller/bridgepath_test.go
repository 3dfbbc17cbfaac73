package controller

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// fixedBridge says the stdio bridge serves at url: in a cluster, whatever pod answers on
// the bridge's Service in the tenant's namespace.
type fixedBridge struct{ url string }

func (f fixedBridge) Ensure(context.Context, *cantusv1alpha1.RemoteToolImport, workload.BridgeAccess) (string, bool, error) {
	return f.url, true, nil
}
func (fixedBridge) Forget(context.Context, types.NamespacedName) error { return nil }

// A pod answering as the stdio bridge cannot send the manager to another address: the
// redirect is refused and the target gets no request.
func TestStdioBridgePathFollowsNoRedirect(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowStdio(t, k8sClient, ns, []string{"ghcr.io/acme"}, []string{"srv"})
	internal := testkit.NewCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("internal secret"))
	}))
	impostor := testkit.NewCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, internal.URL+"/latest/meta-data", http.StatusTemporaryRedirect)
	}))

	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme"},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStdio,
			Stdio:     &cantusv1alpha1.StdioSource{Image: "ghcr.io/acme/srv:1", Command: []string{"srv"}},
			Timeout:   cantusv1alpha1.DurationFrom(cantusv1alpha1.MinImportTimeout),
		},
	}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	r := &RemoteToolImportReconciler{Client: k8sClient, Prober: mcpclient.Probe, Bridges: fixedBridge{url: impostor.URL + "/mcp"}}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: crclient.ObjectKeyFromObject(imp)})
	g.Expect(err).NotTo(HaveOccurred())

	got := &cantusv1alpha1.RemoteToolImport{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(imp), got)).To(Succeed())
	g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, cantusv1alpha1.ConditionHandshakeSucceeded)).To(And(
		HaveField("Status", metav1.ConditionFalse), HaveField("Reason", mcpclient.ReasonRedirectRefused)))
	g.Expect(impostor.Requests.Load()).To(BeNumerically(">", 0))
	g.Expect(internal.Requests.Load()).To(BeZero(), "the redirect target was fetched")
	for _, c := range got.Status.Conditions {
		g.Expect(c.Message).NotTo(ContainSubstring("internal secret"))
	}
}
