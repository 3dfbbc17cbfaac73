package integration

import (
	"context"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
)

// A remote re-exported by a gateway that adds a tool says so with list_changed: the
// import is probed again at once (not at its refreshInterval, 24h here) and the
// gateway serves the new tool, although the import's definitions are not pinned.
func TestGatewayServesARemotesNewToolWithoutWaitingForTheRefresh(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)

	remote := server.NewMCPServer("growing-remote", "1.0.0", server.WithToolCapabilities(true))
	addTool := func(name string) {
		remote.AddTool(mcp.NewTool(name, mcp.WithDescription("A tool.")),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(name + " ok"), nil
			})
	}
	addTool("first_tool")
	srv := testkit.NewCountingServer(t, server.NewStreamableHTTPServer(remote))
	startGatewayManager(t)

	// The gateway first: the import's handshake finds it importing, and watches.
	gw := kubekit.NewSkillServer(ns, "gateway")
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "growing"}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	imp := kubekit.NewImport(ns, "growing", srv.URL+"/mcp")
	imp.Spec.RefreshInterval = cantusv1alpha1.DurationFrom(24 * time.Hour)
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway"), 60*time.Second).Should(
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))

	// The streams must be open before the change, or there is no one to tell: the
	// operator's watch of the import, and the gateway's own (which passes the
	// notification on to its callers).
	srv.WaitStreamsOpen(t, 2)
	changedAt := time.Now()
	addTool("second_tool")
	g.Eventually(func() []string {
		got, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway")()
		if err != nil {
			return nil
		}
		var names []string
		for _, tool := range got.Status.Tools {
			names = append(names, tool.Name)
		}
		return names
	}, 30*time.Second).Should(ContainElement("second_tool"))
	t.Logf("figures: the gateway served the new tool %s after the remote announced it", time.Since(changedAt).Round(time.Millisecond))
}
