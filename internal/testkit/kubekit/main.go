package kubekit

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// Main runs a test binary's tests on one envtest control plane (test/testenv), whose
// config and a client of it setUp gets before the first test, and stops it after the
// last. Under -short (make test-unit, no API server) it runs none.
func Main(m *testing.M, setUp func(cfg *rest.Config, c client.WithWatch)) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	// Reconciles take longer than gomega's default second on a busy 2-core machine;
	// a test that waits on the API server waits long enough not to flake.
	gomega.SetDefaultEventuallyTimeout(15 * time.Second)
	testenv.ExitUnderShort()
	env, cfg, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	setUp(cfg, c)
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

// NewManager returns a manager on the control plane of cfg under the operator's own
// cache and client options (the caller passes the controller's CacheOptions and
// ClientOptions, so every test runs under them). It serves no metrics or probes, and
// several may run one after another in one process, so controller names may repeat.
func NewManager(t testing.TB, cfg *rest.Config, cacheOptions cache.Options, clientOptions client.Options) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cacheOptions,
		Client:                 clientOptions,
	})
	if err != nil {
		t.Fatalf("create manager: %v", err)
	}
	return mgr
}
