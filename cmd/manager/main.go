// Command manager runs the cantus operator: the controllers of the cantus.dev kinds,
// health probes, metrics and leader election.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/catalog"
	"github.com/cantus-dev/cantus-operator/internal/controller"
	"github.com/cantus-dev/cantus-operator/internal/gomemlimit"
	"github.com/cantus-dev/cantus-operator/internal/saissuer"
	"github.com/cantus-dev/cantus-operator/internal/tracing"
	"github.com/cantus-dev/cantus-operator/internal/workload"
	"github.com/cantus-dev/cantus-operator/internal/workload/local"
)

// defaultAdapterImage is the image the kubernetes runtime runs; it holds both binaries.
const defaultAdapterImage = "ghcr.io/cantus-dev/cantus-operator:dev"

type options struct {
	runtime        string
	adapterImage   string
	clusterDomain  string
	metricsAddr    string
	secureMetrics  bool
	probeAddr      string
	leaderElection bool
	maxHandshakes  int
	localMemoryDir string
	catalogAddr    string
	adapterBinary  string
	catalogCertDir string
	catalogAPIQPS  float64
	catalogAud     string
	verifyServers  bool
	registryDomain string
	serverWorkers  int
	apiQPS         float64
	apiBurst       int
	pprofAddr      string
	// allowLocalInCluster lets --runtime=local run inside a cluster (single-tenant).
	allowLocalInCluster bool
	// apiAudiences are the API server's audiences (its --api-audiences) besides the
	// issuer URL: no SkillServer may accept tokens for them.
	apiAudiences []string
	// watchNamespaces, when set, are the only namespaces the manager watches and writes
	// in (namespaced Roles, config/rbac/namespaced); empty is the whole cluster.
	watchNamespaces []string
	adapterTracing  bool
	// admissionParams, when set, is the ConfigMap of the admission policy's parameters
	// (config/admission/params.yaml): what the policy would refuse is refused first.
	admissionParams *types.NamespacedName
	connect         connectOptions
}

// issuerRefresh is how often the operator reads the cluster's service-account issuer
// keys; a rotated key reaches the adapters within about this long.
const issuerRefresh = time.Minute

// revocationsRefresh bounds how often deletions of pods and service accounts re-render
// the servers that accept service-account tokens: a deleted pod's token is refused
// within about this long (plus the kubelet's ConfigMap sync in the kubernetes runtime).
const revocationsRefresh = 10 * time.Second

// followServiceAccountIssuer reads the cluster's service-account issuer keys for the
// servers that accept service-account tokens and watches the deletions that revoke
// tokens, and says when either changed.
func followServiceAccountIssuer(mgr ctrl.Manager, namespaces []string) (*saissuer.Watcher, *saissuer.Revocations, <-chan event.GenericEvent, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("discovery client for the service-account issuer: %w", err)
	}
	changed := make(chan event.GenericEvent, 1)
	notify := func() {
		select {
		case changed <- event.GenericEvent{Object: &cantusv1alpha1.SkillServer{}}:
		default: // a change is already pending; its reconciles read the newest state
		}
	}
	watcher := &saissuer.Watcher{Client: disco.RESTClient(), Every: issuerRefresh, OnChange: notify}
	revocations := &saissuer.Revocations{Config: mgr.GetConfig(), MaxTokenLifetime: saissuer.DefaultMaxTokenLifetime,
		Every: revocationsRefresh, OnChange: notify, Namespaces: namespaces}
	// Kept in the operator's own namespace, where no tenant writes; outside a cluster
	// (no POD_NAMESPACE) a restart forgets them.
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		store := &saissuer.ConfigMapStore{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Namespace: ns,
			FieldOwner: workload.FieldOwner, Labels: map[string]string{workload.LabelManagedBy: workload.FieldOwner}}
		revocations.Recall, revocations.Save = store.Recall, store.Save
	}
	for _, r := range []manager.Runnable{watcher, revocations} {
		if err := mgr.Add(r); err != nil {
			return nil, nil, nil, fmt.Errorf("add the service-account issuer watchers: %w", err)
		}
	}
	return watcher, revocations, changed, nil
}

// parseNamespaces splits --watch-namespaces: names separated by commas, blanks ignored,
// each a valid namespace name.
func parseNamespaces(value string) ([]string, error) {
	var out []string
	for _, ns := range strings.Split(value, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" || slices.Contains(out, ns) {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("--watch-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		out = append(out, ns)
	}
	return out, nil
}

// restConfig is the API client configuration of the controllers, with their budget.
func restConfig(opts options) *rest.Config {
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(opts.apiQPS), opts.apiBurst
	if cfg.Burst == 0 && cfg.QPS > 0 {
		cfg.Burst = int(2 * cfg.QPS)
	}
	return cfg
}

func main() {
	opts := options{}
	flag.StringVar(&opts.runtime, "runtime", "kubernetes", "where adapters run: kubernetes (Deployments) or local (in this process on 127.0.0.1)")
	flag.StringVar(&opts.adapterImage, "adapter-image", envOr("CANTUS_ADAPTER_IMAGE", defaultAdapterImage), "adapter image for the kubernetes runtime")
	flag.StringVar(&opts.clusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain used in Service URLs")
	flag.StringVar(&opts.metricsAddr, "metrics-bind-address", ":8443", "metrics address; 0 disables the endpoint")
	flag.BoolVar(&opts.secureMetrics, "metrics-secure", true, "serve metrics over HTTPS, authenticated and authorized by the API server")
	flag.StringVar(&opts.probeAddr, "health-probe-bind-address", ":8081", "health probe address")
	flag.BoolVar(&opts.leaderElection, "leader-elect", false, "elect a leader so that only one manager reconciles")
	flag.StringVar(&opts.localMemoryDir, "local-memory-dir", filepath.Join(os.TempDir(), "cantus-memory"), "local runtime: the folder that holds the memory tools' files")
	flag.StringVar(&opts.adapterBinary, "adapter-binary", siblingAdapter(), "local runtime: the adapter binary that bridges stdio imports")
	flag.StringVar(&opts.catalogAddr, "catalog-bind-address", ":8444", "HTTPS address of the discovery catalog; 0 disables it")
	flag.StringVar(&opts.catalogCertDir, "catalog-cert-dir", "", "folder with tls.crt and tls.key for the catalog; a self-signed certificate when empty")
	flag.StringVar(&opts.catalogAud, "catalog-audience", catalog.DefaultAudience, "the audience a service-account token must be issued for to be accepted by the catalog (kubectl create token --audience)")
	flag.Float64Var(&opts.catalogAPIQPS, "catalog-api-qps", 20, "API requests per second the catalog's access reviews may make, apart from the controllers' budget")
	flag.IntVar(&opts.maxHandshakes, "max-concurrent-handshakes", 32, "RemoteToolImport handshakes run at once; a hanging remote holds one for at most its timeout")
	flag.StringVar(&opts.registryDomain, "registry-domain", "", "DNS domain that, reversed, begins the server names of the catalog's MCP Registry API (cluster.local: SkillServer team-a/books is local.cluster.team-a/books); --cluster-domain when empty")
	flag.IntVar(&opts.serverWorkers, "skillserver-workers", 16, "SkillServers reconciled at once; each mostly waits for the API server, which takes many writers in parallel")
	flag.Float64Var(&opts.apiQPS, "kube-api-qps", -1, "API requests per second the controllers may make; -1 leaves the pace to the API server's priority and fairness (controller-runtime's default)")
	flag.IntVar(&opts.apiBurst, "kube-api-burst", 0, "API requests the controllers may make in a burst above --kube-api-qps; 0 is twice the QPS")
	flag.StringVar(&opts.pprofAddr, "pprof-bind-address", "0", "address of Go's pprof endpoints, for profiling at scale; 0 disables them")
	flag.BoolVar(&opts.adapterTracing, "adapter-tracing", true, "kubernetes runtime: when the manager's OTEL_* environment turns tracing on, give adapter pods the same exporter, endpoint and sampler (never OTEL_EXPORTER_OTLP_HEADERS)")
	flag.BoolVar(&opts.verifyServers, "verify-servers", true, "a SkillServer is Ready only once the operator has listed its tools through its Service with MCP; turn off only when the operator cannot reach cluster IPs (run outside the cluster)")
	flag.BoolVar(&opts.allowLocalInCluster, "allow-local-runtime-in-cluster", false, "let --runtime=local run inside a cluster; its adapters and stdio commands then run with this manager's token and files, so every tenant acts with the operator's power: single-tenant clusters only")
	flag.Func("api-audiences", "comma-separated audiences of the API server (its --api-audiences) or of other services taking service-account tokens, besides the issuer URL and https://kubernetes.default.svc[.cluster.local]; no SkillServer may accept tokens for them", func(v string) error {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				opts.apiAudiences = append(opts.apiAudiences, a)
			}
		}
		return nil
	})
	flag.Func("admission-params", "namespace/name of the ConfigMap that holds the parameters of the admission policy bounding this operator (config/admission/params.yaml); a SkillServer or stdio import whose pods that policy would refuse is refused before anything is written; empty: no policy is checked", func(v string) error {
		ns, name, ok := strings.Cut(v, "/")
		if !ok || ns == "" || name == "" {
			return fmt.Errorf("want namespace/name, got %q", v)
		}
		opts.admissionParams = &types.NamespacedName{Namespace: ns, Name: name}
		return nil
	})
	bindConnectFlags(&opts.connect)
	watchNamespaces := flag.String("watch-namespaces", "", "comma-separated namespaces the operator watches and writes in, on the namespaced Roles of config/rbac/namespaced; empty: the whole cluster (the ClusterRole)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	var err error
	if opts.watchNamespaces, err = parseNamespaces(*watchNamespaces); err != nil {
		ctrl.Log.Error(err, "bad flag")
		os.Exit(2)
	}

	if err := run(opts); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func run(opts options) error {
	if err := checkLocalRuntime(opts.runtime, opts.allowLocalInCluster); err != nil {
		return err
	}
	if limit, err := gomemlimit.FromContainer(); err != nil {
		ctrl.Log.Error(err, "no soft memory limit from the container's; the heap may grow to twice what is live")
	} else if limit != math.MaxInt64 {
		ctrl.Log.Info("soft memory limit from the container's", "goMemLimitBytes", limit)
	}
	// Tracing is the operator's to configure (OTEL_* variables of its own process),
	// never a SkillServer's: a tenant must not choose where spans go.
	endTracing, err := tracing.Setup(context.Background(), "cantus-operator")
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer func() {
		if err := endTracing(context.Background()); err != nil {
			ctrl.Log.Error(err, "flushing the last spans failed")
		}
	}()
	ctrl.Log.Info("tracing", "enabled", tracing.Enabled())
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cantusv1alpha1.AddToScheme(scheme))

	// The API server's latency as the manager sees it: at scale, what tells a pace the
	// API server sets from one the manager's own queue sets.
	ctrlmetrics.RegisterRESTClientMetrics(ctrlmetrics.MetricRequestLatency)
	metricsOpts := metricsserver.Options{BindAddress: opts.metricsAddr, SecureServing: opts.secureMetrics}
	if opts.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	cacheOpts := controller.CacheOptions()
	cacheOpts.DefaultNamespaces = controller.CacheNamespaces(opts.watchNamespaces)
	mgr, err := ctrl.NewManager(restConfig(opts), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOpts,
		HealthProbeBindAddress: opts.probeAddr,
		PprofBindAddress:       opts.pprofAddr,
		LeaderElection:         opts.leaderElection,
		LeaderElectionID:       "cantus-operator.cantus.dev",
		Cache:                  cacheOpts,
		Client:                 controller.ClientOptions(),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	rt, bridges, err := newRuntimes(mgr, opts)
	if err != nil {
		return err
	}
	issuer, revocations, issuerChanged, err := followServiceAccountIssuer(mgr, opts.watchNamespaces)
	if err != nil {
		return err
	}
	servers := &controller.SkillServerReconciler{
		Client:        mgr.GetClient(),
		Runtime:       rt,
		Recorder:      mgr.GetEventRecorder("cantus-operator"),
		Issuer:        issuer,
		Revocations:   revocations,
		IssuerChanged: issuerChanged,
		Workers:       opts.serverWorkers,
		// The catalog's audience too: a catalog token handed to a tenant's server would
		// let its owner read the catalog as the agent.
		// And the connect audience: only gateways' own tokens for the operator have it.
		APIAudiences: append(opts.apiAudiences, opts.catalogAud, adapterconfig.ConnectAudience),
	}
	var admission *controller.AdmissionParams
	if opts.admissionParams != nil && opts.runtime == "kubernetes" {
		admission = &controller.AdmissionParams{Reader: mgr.GetAPIReader(), Key: *opts.admissionParams}
		servers.AdmissionParams = admission
	}
	if opts.verifyServers {
		servers.Verifier = &controller.MCPVerifier{Timeout: controller.DefaultVerifyTimeout}
	}
	if err := servers.UseContentCache(mgr, opts.watchNamespaces...); err != nil {
		return err
	}
	if err := servers.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up SkillServer controller: %w", err)
	}

	imports := &controller.RemoteToolImportReconciler{
		Client:                  mgr.GetClient(),
		Recorder:                mgr.GetEventRecorder("cantus-operator"),
		Bridges:                 bridges,
		MaxConcurrentHandshakes: opts.maxHandshakes,
		AdmissionParams:         admission,
	}
	if err := imports.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up RemoteToolImport controller: %w", err)
	}

	if opts.catalogAddr != "0" {
		// The access reviews have their own client and rate, so that catalog traffic
		// cannot use up the controllers' API budget.
		reviewConfig := rest.CopyConfig(mgr.GetConfig())
		reviewConfig.QPS, reviewConfig.Burst = float32(opts.catalogAPIQPS), int(2*opts.catalogAPIQPS)
		reviewClient, err := client.New(reviewConfig, client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return fmt.Errorf("catalog review client: %w", err)
		}
		callers := &catalog.Authorizer{Client: reviewClient, Audience: opts.catalogAud, Issuer: issuer}
		cat := &catalog.Catalog{Reader: mgr.GetClient(), RegistryDomain: cmp.Or(opts.registryDomain, opts.clusterDomain)}
		handler := catalog.NewHandler(cat, callers, ctrl.Log.WithName("catalog"))
		listener := &catalog.Runnable{Addr: opts.catalogAddr, CertDir: opts.catalogCertDir, Log: ctrl.Log.WithName("catalog"), Hosts: catalogHosts(opts)}
		if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
			// Every replica serves the same self-signed certificate, which gateways trust.
			listener.SelfSigned = &catalog.SelfSignedSecret{Client: reviewClient, Namespace: ns, Name: "cantus-catalog-self-signed"}
		}
		if err := listener.Prepare(context.Background()); err != nil {
			return err
		}
		if listener.Handler, err = setUpConnect(mgr, opts, reviewClient, cat, handler, listener, servers, imports, callers); err != nil {
			return err
		}
		if err := mgr.Add(listener); err != nil {
			return fmt.Errorf("add catalog: %w", err)
		}
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	ctrl.Log.Info("starting manager", "runtime", opts.runtime, "watchNamespaces", opts.watchNamespaces)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// newRuntimes returns where adapters and stdio bridges run: as Deployments (bridges
// running the user's image), or in and beside this manager (local runtime).
func newRuntimes(mgr ctrl.Manager, opts options) (workload.Runtime, controller.Bridges, error) {
	switch opts.runtime {
	case "kubernetes":
		kube := workload.NewKubernetes(controller.ChildClient(mgr), opts.adapterImage, opts.clusterDomain)
		kube.APIReader = mgr.GetAPIReader()
		if opts.adapterTracing {
			kube.TracingEnv = tracing.AdapterEnv(os.Getenv)
		}
		if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
			kube.Operator = workload.OperatorPeer(ns)
		}
		return kube, kube.Bridges(), nil
	case "local":
		adapters := local.New(mgr.GetAPIReader())
		adapters.MemoryDir = opts.localMemoryDir
		// Gateways' tokens for the operator's connect endpoint, as the kubelet would
		// project them.
		adapters.MintToken = local.MintToken(mgr.GetClient())
		if err := mgr.Add(adapters); err != nil {
			return nil, nil, fmt.Errorf("add local runtime: %w", err)
		}
		bridges := workload.NewLocalBridges(opts.adapterBinary, ctrl.Log.WithName("bridge"))
		if err := mgr.Add(bridges); err != nil {
			return nil, nil, fmt.Errorf("add local stdio bridges: %w", err)
		}
		return adapters, bridges, nil
	default:
		return nil, nil, errors.New("--runtime must be kubernetes or local")
	}
}

// siblingAdapter is the adapter binary next to this one, as `make build` lays them out.
func siblingAdapter() string {
	self, err := os.Executable()
	if err != nil {
		return "adapter"
	}
	return filepath.Join(filepath.Dir(self), "adapter")
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
