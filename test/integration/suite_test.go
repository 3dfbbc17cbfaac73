// Package integration holds the end-to-end tests of the operator with its data plane in
// the loop: the controllers on envtest and the adapters they start running in this
// process (internal/workload/local), gateways re-exporting remotes, callers calling
// through them. They live apart from internal/controller so that the controller's own
// tests link nothing of the data plane (internal/adapter).
package integration

import (
	"context"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/controller"
	"github.com/cantus-dev/cantus-operator/internal/testkit/mcpkit"

	"github.com/mark3labs/mcp-go/mcp"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
	"github.com/cantus-dev/cantus-operator/internal/workload/local"
)

var (
	restConfig *rest.Config
	k8sClient  crclient.WithWatch
)

func TestMain(m *testing.M) {
	kubekit.Main(m, func(cfg *rest.Config, c crclient.WithWatch) { restConfig, k8sClient = cfg, c })
}

// newTestManager returns a manager on the test control plane under the manager's own
// cache and client settings.
func newTestManager(t *testing.T) ctrl.Manager {
	t.Helper()
	return kubekit.NewManager(t, restConfig, controller.CacheOptions(), controller.ClientOptions())
}

// startManager runs the SkillServer controller with the given runtime until the test ends.
func startManager(t *testing.T, rt workload.Runtime) {
	t.Helper()
	startManagerVerifying(t, rt, &controller.MCPVerifier{})
}

// startManagerVerifying runs the SkillServer controller with a given verifier of the pods
// (nil: none); configure may set more of the reconciler.
func startManagerVerifying(t *testing.T, rt workload.Runtime, verifier controller.ToolLister, configure ...func(*controller.SkillServerReconciler)) {
	t.Helper()
	mgr := newTestManager(t)
	if adapters, ok := rt.(*local.Runtime); ok {
		adapters.Reader = mgr.GetAPIReader()
		if err := mgr.Add(adapters); err != nil {
			t.Fatalf("add local runtime: %v", err)
		}
	}
	if kube, ok := rt.(*workload.Kubernetes); ok {
		kube.Client, kube.APIReader = controller.ChildClient(mgr), mgr.GetAPIReader()
	}
	r := &controller.SkillServerReconciler{Client: mgr.GetClient(), Runtime: rt, Recorder: mgr.GetEventRecorder("cantus-operator"), Verifier: verifier}
	if err := r.UseContentCache(mgr); err != nil {
		t.Fatalf("content cache: %v", err)
	}
	for _, c := range configure {
		c(r)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("set up controller: %v", err)
	}
	kubekit.RunManager(t, mgr)
}

// callTool calls one tool with mcp-go's client, pinned to a protocol version that
// initializes the classic way (the unpinned client probes server/discover first).
func callTool(ctx context.Context, url, transportName, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	return mcpkit.CallTool(ctx, url, transportName, tool, args, nil)
}
