package integration

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/controller"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/mcpkit"
	"github.com/cantus-dev/cantus-operator/internal/workload/local"

	"github.com/go-logr/logr"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/workload"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// On the local runtime, a gateway re-exporting a stdio import reaches its bridge with the
// bridge's token, read from the bridge's Secret like any import header; a caller of
// 127.0.0.1 without it is refused by the bridge (R8).
func TestLocalGatewayCallsAStdioImportWithTheBridgeToken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowStdio(t, k8sClient, ns, []string{"ghcr.io/modelcontextprotocol/"}, []string{"node"})

	mgr := newTestManager(t)
	adapters := local.New(mgr.GetAPIReader())
	adapters.MemoryDir = t.TempDir()
	bridges := workload.NewLocalBridges(peers.AdapterBinary(t), logr.Discard())
	for _, runnable := range []manager.Runnable{adapters, bridges} {
		g.Expect(mgr.Add(runnable)).To(Succeed())
	}
	g.Expect((&controller.SkillServerReconciler{Client: mgr.GetClient(), Runtime: adapters, Recorder: mgr.GetEventRecorder("cantus-operator")}).SetupWithManager(mgr)).To(Succeed())
	g.Expect((&controller.RemoteToolImportReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("cantus-operator"), Bridges: bridges}).SetupWithManager(mgr)).To(Succeed())
	kubekit.RunManager(t, mgr)

	everything := filepath.Join(peers.Dir(t), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "everything"},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStdio,
			Stdio:     &cantusv1alpha1.StdioSource{Image: "ghcr.io/modelcontextprotocol/server-everything:2026.8.31", Command: []string{"node", everything}, Args: []string{"stdio"}},
			Timeout:   cantusv1alpha1.DurationFrom(20 * time.Second),
		},
	}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	got := readyGateway(t, ctx, ns, "gateway", cantusv1alpha1.SkillImport{Name: "everything", Include: []string{"echo"}})

	res, err := callTool(ctx, got.Status.URL, "streamable-http", "echo", map[string]any{"message": "through the gateway"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mcpkit.ResultText(res)).To(Equal("Echo: through the gateway"))

	fresh := &cantusv1alpha1.RemoteToolImport{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(imp), fresh)).To(Succeed())
	_, err = mcpclient.Probe(ctx, mcpclient.Options{URL: fresh.Status.BridgeURL, Timeout: 5 * time.Second})
	g.Expect(err).To(HaveOccurred(), "a caller without the bridge's token was served")
}
