package controller

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// Imports of @modelcontextprotocol/server-everything, a server nobody here wrote: its
// tools land in status with the schemas the official TypeScript SDK client lists.
func TestImportOfServerEverything(t *testing.T) {
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	for _, tc := range []struct {
		transport cantusv1alpha1.ImportTransport
		path      string
	}{
		{cantusv1alpha1.ImportTransportStreamableHTTP, "/mcp"},
		{cantusv1alpha1.ImportTransportSSE, "/sse"},
	} {
		t.Run(string(tc.transport), func(t *testing.T) {
			g := NewWithT(t)
			base := peers.StartServerEverything(t, ctx, string(tc.transport))
			imp := kubekit.NewImport(ns, "everything-"+string(tc.transport), base+tc.path)
			imp.Spec.Transport = tc.transport
			imp.Spec.Timeout = cantusv1alpha1.DurationFrom(20 * time.Second)
			got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), imp)
			ready := kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
			g.Expect(got.Status.ServerInfo.Name).NotTo(BeEmpty())

			// Declaring what the operator's probe declares, the client sees the same tools.
			listed := peers.TSClient(t, ctx, peers.TSClientOptions{URL: base + tc.path, Transport: string(tc.transport), Declare: mcpclient.RelayableCapabilities()})
			g.Expect(got.Status.Tools).To(HaveLen(len(listed.Tools)))
			want := map[string]json.RawMessage{}
			for _, tool := range listed.Tools {
				want[tool.Name] = tool.InputSchema
			}
			for _, tool := range got.Status.Tools {
				g.Expect(want).To(HaveKey(tool.Name))
				g.Expect(tool.InputSchema.Raw).To(MatchJSON(want[tool.Name]), "schema of %s passes through unchanged", tool.Name)
			}
		})
	}
}

// A stdio import: the operator runs server-everything behind the local bridge and
// handshakes through it.
func TestStdioImportThroughTheLocalBridge(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowStdio(t, k8sClient, ns, []string{"ghcr.io/modelcontextprotocol/"}, []string{"node"})

	bridges := workload.NewLocalBridges(peers.AdapterBinary(t), logr.Discard())
	bridgeCtx, stop := context.WithCancel(ctx)
	go func() { _ = bridges.Start(bridgeCtx) }()
	t.Cleanup(stop)

	everything := filepath.Join(peers.Dir(t), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "everything-stdio"},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStdio,
			Stdio:     &cantusv1alpha1.StdioSource{Image: "ghcr.io/modelcontextprotocol/server-everything:2026.8.31", Command: []string{"node", everything}, Args: []string{"stdio"}},
			Timeout:   cantusv1alpha1.DurationFrom(20 * time.Second),
		},
	}
	r := importReconciler()
	r.Bridges = bridges
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	var got *cantusv1alpha1.RemoteToolImport
	g.Eventually(func() metav1.ConditionStatus {
		got = kubekit.ReconcileImport(t, k8sClient, r, imp)
		return kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Status
	}, 30*time.Second, time.Second).Should(Equal(metav1.ConditionTrue))
	g.Expect(got.Status.BridgeURL).To(MatchRegexp(`^http://127\.0\.0\.1:\d+/mcp$`))
	g.Expect(got.Status.ToolCount).To(BeNumerically(">", 5))
	g.Expect(got.Status.Tools).To(ContainElement(HaveField("Name", "echo")))
}
