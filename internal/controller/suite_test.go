package controller

import (
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

var (
	restConfig *rest.Config
	k8sClient  crclient.WithWatch
)

func TestMain(m *testing.M) {
	kubekit.Main(m, func(cfg *rest.Config, c crclient.WithWatch) { restConfig, k8sClient = cfg, c })
}

// newTestManager returns a manager on the test control plane; several run one after
// another in one process, so controller names may repeat.
func newTestManager(t *testing.T) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		// The manager's own cache and client settings, so every test runs under them.
		Cache:  CacheOptions(),
		Client: ClientOptions(),
	})
	if err != nil {
		t.Fatalf("create manager: %v", err)
	}
	return mgr
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
