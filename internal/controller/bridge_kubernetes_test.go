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

// A stdio import under the kubernetes runtime, against the real API server: the import
// reconciler applies the bridge Deployment and Service, owned by the import, and reports
// BridgeNotReady until the Deployment is available.
func TestStdioImportRunsABridgeDeployment(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowStdio(t, k8sClient, ns, []string{"ghcr.io/acme/"}, []string{"mcp-server"})

	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme"},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStdio,
			Stdio:     &cantusv1alpha1.StdioSource{Image: "ghcr.io/acme/tools:1.0", Command: []string{"mcp-server"}, Args: []string{"--stdio"}},
			Timeout:   cantusv1alpha1.DurationFrom(time.Second),
		},
	}
	r := importReconciler()
	r.Bridges = workload.NewKubernetes(k8sClient, "ghcr.io/cantus-dev/cantus-operator:test", "cluster.local").Bridges()
	got := kubekit.ReconcileImport(t, k8sClient, r, imp)
	ready := kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady)
	g.Expect(ready.Reason).To(Equal(cantusv1alpha1.ReasonBridgeNotReady), ready.Message)

	dep := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "acme-bridge"}, dep)).To(Succeed())
	g.Expect(metav1.IsControlledBy(dep, got)).To(BeTrue())
	pod := dep.Spec.Template.Spec
	g.Expect(pod.InitContainers).To(HaveLen(1))
	g.Expect(pod.InitContainers[0].Image).To(Equal("ghcr.io/cantus-dev/cantus-operator:test"))
	g.Expect(pod.Containers[0].Image).To(Equal("ghcr.io/acme/tools:1.0"))
	g.Expect(pod.Containers[0].Command).To(ContainElements("mcp-server", "--stdio"))
	g.Expect(pod.Containers[0].Command).NotTo(ContainElement(ContainSubstring("sh -c")), "the command runs as a list, never through a shell")
	g.Expect(*pod.Containers[0].SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
	svc := &corev1.Service{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "acme-bridge"}, svc)).To(Succeed())
	g.Expect(metav1.IsControlledBy(svc, got)).To(BeTrue())
	// The API server gave the Service its cluster IP, which the bridge URL names: the
	// handshake and a gateway's pods need no cluster DNS.
	g.Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
	g.Expect(got.Status.BridgeURL).To(Equal("http://" + svc.Spec.ClusterIP + ":8765/mcp"))

	// Past this point the operator would handshake through the Service's cluster IP,
	// which nothing routes here; test/cluster runs a real bridge pod.
}
