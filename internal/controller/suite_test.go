package controller

import (
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
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
	return kubekit.NewManager(t, restConfig, CacheOptions(), ClientOptions())
}

// startManager runs the SkillServer controller with the given runtime until the test ends.
func startManager(t *testing.T, rt workload.Runtime) {
	t.Helper()
	startManagerVerifying(t, rt, &MCPVerifier{})
}

// startManagerVerifying runs the SkillServer controller with a given verifier of the pods
// (nil: none); configure may set more of the reconciler.
func startManagerVerifying(t *testing.T, rt workload.Runtime, verifier ToolLister, configure ...func(*SkillServerReconciler)) {
	t.Helper()
	mgr := newTestManager(t)
	if kube, ok := rt.(*workload.Kubernetes); ok {
		kube.Client, kube.APIReader = ChildClient(mgr), mgr.GetAPIReader()
	}
	r := &SkillServerReconciler{Client: mgr.GetClient(), Runtime: rt, Recorder: mgr.GetEventRecorder("cantus-operator"), Verifier: verifier}
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
