// Command scalebench measures the operator at scale on an embedded control plane
// (kube-apiserver + etcd, no nodes): the manager binary runs as it would in a pod, with
// the kubernetes runtime, against many SkillServers and RemoteToolImports, and the
// program prints what it took and what the manager wrote.
//
//	go run ./hack/scalebench -servers 1000 -imports 1000 -idle 1m
//
// First a yardstick (yardstick.go): 16 parallel writers apply, with the operator's own
// code, what the operator writes for as many servers as the bench will create, to the
// same empty API server; that gives the write rate it accepts on these cores. Their
// objects are deleted again. Then the SkillServers are created, the manager is started,
// and its write rate until every child is applied and every status written is printed
// beside the yardstick's, as a ratio.
//
// Writes are the manager's own count of API requests (rest_client_requests_total by
// method) read from its metrics endpoint. Without nodes no adapter pod runs, so
// SkillServers stay at "pods not available" and are not verified; what is measured is
// the control plane's share: applying the children, and keeping quiet afterwards.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/gomemlimit"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

const namespaces = 10

// fullSizeUnits is how many servers' worth of writes the second yardstick makes, once
// every server has settled: enough for a steady rate (at 400 the rate moved by a quarter
// between runs), few enough to take seconds at any size. The first yardstick writes as
// many units as there are servers, so that both climb from the same empty API server to
// the same size.
const fullSizeUnits = 1000

type options struct {
	servers, imports int
	idle             time.Duration
	manager          string
	cpuprofile       string
	apiserverProfile string
	heapprofile      string
	refresh          string
	memoryLimit      string
	managerArgs      string
	restart          bool
	// content is what the first servers serve from ConfigMaps (contentSpec); etcdQuota
	// is etcd's --quota-backend-bytes, raised for it.
	content   contentSpec
	etcdQuota string
}

func main() {
	var o options
	flag.IntVar(&o.servers, "servers", 1000, "SkillServers to create")
	flag.IntVar(&o.imports, "imports", 1000, "RemoteToolImports to create, refreshed every -refresh against an unchanged remote")
	flag.StringVar(&o.memoryLimit, "memory-limit", "", "run the manager as in a container with this memory limit (e.g. 400Mi): Go's soft limit at 90% of it, as the manager sets itself")
	flag.StringVar(&o.refresh, "refresh", "5m", "the imports' spec.refreshInterval (5m is the operator's default)")
	flag.StringVar(&o.heapprofile, "heapprofile", "", "write a heap profile of the manager after the idle time to this file")
	flag.DurationVar(&o.idle, "idle", time.Minute, "how long to count writes once everything settled")
	flag.StringVar(&o.manager, "manager", "bin/manager", "the manager binary")
	flag.StringVar(&o.managerArgs, "manager-args", "", "more flags for the manager, space-separated (e.g. --skillserver-workers=32)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the manager while it brings the SkillServers up to this file")
	flag.StringVar(&o.apiserverProfile, "apiserver-cpuprofile", "", "write CPU profiles of kube-apiserver to this path with .yardstick and .operator appended: 4 s of the yardstick, 15 s of the manager bringing the SkillServers up")
	flag.DurationVar(&pollEvery, "poll", pollEvery, "how often to look at what the bench waits for (its own watch cache, or the manager's metrics)")
	flag.BoolVar(&o.restart, "restart", false, "after the idle time, start a new manager on the settled objects and print how long it takes to reconcile each once, and what it writes")
	flag.Var(&o.content, "content", "content the first servers serve as agent skills from ConfigMaps of about 1 MiB each: comma-separated COUNTxMIB, e.g. 100x1,4x64 (100 servers with 1 MiB, then 4 with 64 MiB, the most one server may serve)")
	flag.StringVar(&o.etcdQuota, "etcd-quota", "", "etcd's --quota-backend-bytes (e.g. 8Gi) for runs with much content; empty is etcd's default of 2 GiB")
	flag.Parse()
	// The bench's own watch cache logs its reconnects; they are not what is measured.
	ctrllog.SetLogger(logr.Discard())
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx := context.Background()
	if o.content.servers() > o.servers {
		return fmt.Errorf("-content names %d servers, more than -servers %d", o.content.servers(), o.servers)
	}
	etcdFlags := map[string]string{}
	if o.etcdQuota != "" {
		quota, err := resource.ParseQuantity(o.etcdQuota)
		if err != nil {
			return fmt.Errorf("-etcd-quota: %w", err)
		}
		etcdFlags["quota-backend-bytes"] = strconv.FormatInt(quota.Value(), 10)
	}
	// Every SkillServer has a Service; envtest's default service range holds 250.
	env, _, err := testenv.StartWithFlags(map[string]string{"service-cluster-ip-range": "10.96.0.0/16"}, etcdFlags)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	admin, err := env.ControlPlane.AddUser(envtest.User{Name: "scalebench", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add a user: %w", err)
	}
	// The benchmark's own client must not be what limits the rate of creates.
	cfg := admin.Config()
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	watched, err := watchWaitedFor(ctx, cfg)
	if err != nil {
		return err
	}
	remote, err := startRemote()
	if err != nil {
		return err
	}
	if err := setUp(ctx, c); err != nil {
		return err
	}
	fmt.Printf("scalebench: %d SkillServers and %d RemoteToolImports in %d namespaces; manager %s\n", o.servers, o.imports, namespaces, o.manager)

	if err := installYardstickKind(ctx, c); err != nil {
		return err
	}
	if err := prepareUnits(ctx, c, "yardstick", o.servers); err != nil {
		return err
	}
	waitForAQuietAPIServer()
	cpuBefore := sampleCPU(0)
	profileAPIServerMeanwhile(ctx, cfg, o.apiserverProfile, "yardstick", 4)
	yardstick, err := parallelWriteRate(ctx, c, "yardstick", o.servers)
	if err != nil {
		return fmt.Errorf("the yardstick: %w", err)
	}
	yardstickCPU := sampleCPU(0).since(cpuBefore)
	fmt.Printf("API server: %.0f writes/s from %d parallel writers applying a ConfigMap, a Deployment, a Service and a NetworkPolicy and patching a SkillServer status (%d writes)\n",
		yardstick, yardstickWriters, o.servers*writesPerUnit)
	fmt.Printf("  CPU: %s; %.1f ms of API server and etcd per write\n", yardstickCPU,
		perWrite(yardstickCPU, float64(o.servers*writesPerUnit)))
	if err := removeUnits(ctx, c, "yardstick"); err != nil {
		return err
	}

	// The servers exist before the manager starts, so that what is measured is the
	// operator's pace, not the pace of one client creating them.
	start := time.Now()
	for i := range o.servers {
		ss := skillServer(i)
		if err := createContent(ctx, c, ss, o.content.mibOf(i)); err != nil {
			return err
		}
		if err := c.Create(ctx, ss); err != nil {
			return fmt.Errorf("create SkillServer %d: %w", i, err)
		}
	}
	created := time.Since(start)
	fmt.Printf("SkillServers: %d created in %s by one client (%.0f creates/s)\n", o.servers, created.Round(time.Millisecond), float64(o.servers)/created.Seconds())
	if mib := o.content.total(); mib > 0 {
		fmt.Printf("content: %s: %d MiB in %d ConfigMaps of about 1 MiB, labelled %s=true, before the manager starts\n", o.content.String(), mib, mib, cantusv1alpha1.ContentLabel)
	}

	waitForAQuietAPIServer()
	start = time.Now()
	mgr, err := startManager(o.manager, strings.Fields(o.managerArgs), o.memoryLimit, admin)
	if err != nil {
		return err
	}
	defer mgr.stop()
	cpuBefore = sampleCPU(mgr.cmd.Process.Pid)
	profileAPIServerMeanwhile(ctx, cfg, o.apiserverProfile, "operator", 15)
	if o.cpuprofile != "" {
		go func() {
			if err := mgr.profileCPU(o.cpuprofile, 15); err != nil {
				fmt.Fprintln(os.Stderr, "scalebench:", err)
			}
		}()
	}
	firstWrite, err := waitForTheFirstWrite(ctx, mgr)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, func() (bool, error) { return serversApplied(ctx, watched, o.servers) }); err != nil {
		return fmt.Errorf("waiting for the children of every SkillServer: %w", err)
	}
	applied, writing := time.Since(start), time.Since(firstWrite)
	writes, err := mgr.writes()
	if err != nil {
		return err
	}
	reads, err := mgr.requests("GET")
	if err != nil {
		return err
	}
	// Timed from the first write to the last, as the yardstick's writers are: the
	// manager's start (its caches filled by listing every object) is not writing.
	operatorRate := writes / writing.Seconds()
	fmt.Printf("operator: every child applied and every status written %s after it started, %s after its first write (%.0f servers/s): %.0f writes (%.0f/s from the first) and %.0f GETs\n",
		applied.Round(time.Millisecond), writing.Round(time.Millisecond), float64(o.servers)/applied.Seconds(), writes, operatorRate, reads)
	fmt.Printf("ratio: %.2f x of the API server's parallel write rate (%.0f/s against %.0f/s)\n", operatorRate/yardstick, operatorRate, yardstick)
	operatorCPU := sampleCPU(mgr.cmd.Process.Pid).since(cpuBefore)
	fmt.Printf("  CPU: %s; %.1f ms of API server and etcd per write (reads and watches included); the cores were %.0f%% busy with these\n",
		operatorCPU, perWrite(operatorCPU, writes), 100*operatorCPU.total().Seconds()/(2*applied.Seconds()))
	if err := printWhereTheTimeWent(mgr, "skillserver"); err != nil {
		return err
	}
	if err := compareAtThisSize(ctx, c, operatorRate); err != nil {
		return err
	}

	start = time.Now()
	for i := range o.imports {
		if err := c.Create(ctx, remoteToolImport(i, remote, o.refresh)); err != nil {
			return fmt.Errorf("create RemoteToolImport %d: %w", i, err)
		}
	}
	if err := waitFor(ctx, func() (bool, error) { return importsReady(ctx, watched, o.imports) }); err != nil {
		return fmt.Errorf("waiting for every import to be Ready: %w", err)
	}
	fmt.Printf("RemoteToolImports: all Ready %s after the first create\n", time.Since(start).Round(time.Millisecond))

	before, err := mgr.writes()
	if err != nil {
		return err
	}
	probesBefore := remote.requests()
	time.Sleep(o.idle)
	after, err := mgr.writes()
	if err != nil {
		return err
	}
	perMinute := func(n float64) float64 { return n * float64(time.Minute) / float64(o.idle) }
	fmt.Printf("idle %s: %.0f API writes by the manager (%.1f per minute) while it sent %.0f requests a minute to the unchanged remote\n",
		o.idle, after-before, perMinute(after-before), perMinute(float64(remote.requests()-probesBefore)))
	rss, peak, err := mgr.memory()
	if err != nil {
		return err
	}
	fmt.Printf("manager memory: RSS %d MiB, peak %d MiB\n", rss>>10, peak>>10)
	if err := printHeap(mgr); err != nil {
		return err
	}
	if mib := o.content.total(); mib > 0 {
		fmt.Printf("  with %d MiB of content (and as much again in the operator's shards): RSS %.2f MiB per MiB of content; compare a run without -content for what the content adds\n",
			mib, float64(rss>>10)/float64(mib))
	}
	if o.heapprofile != "" {
		if err := mgr.profile("heap", o.heapprofile); err != nil {
			return err
		}
	}
	if !o.restart {
		return nil
	}
	mgr.stop()
	return restart(ctx, o, admin)
}

// waitForTheFirstWrite returns when the manager made its first API write, by its metrics.
func waitForTheFirstWrite(ctx context.Context, mgr *managerProcess) (time.Time, error) {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		writes, err := mgr.writes()
		return err == nil && writes > 0, nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("waiting for the manager's first write: %w", err)
	}
	return time.Now(), nil
}

// restart starts a new manager on the settled objects, as after an upgrade, and prints
// how long it took to look at every one (one finished reconcile each, by its own
// controller_runtime_reconcile_total) and how many API writes it made: none is wanted.
func restart(ctx context.Context, o options, admin *envtest.AuthenticatedUser) error {
	start := time.Now()
	mgr, err := startManager(o.manager, strings.Fields(o.managerArgs), o.memoryLimit, admin)
	if err != nil {
		return err
	}
	defer mgr.stop()
	err = waitFor(ctx, func() (bool, error) {
		servers, err := mgr.reconciles("skillserver")
		if err != nil {
			return false, err
		}
		imports, err := mgr.reconciles("remotetoolimport")
		return servers >= float64(o.servers) && imports >= float64(o.imports), err
	})
	if err != nil {
		return fmt.Errorf("waiting for the restarted manager to reconcile every object: %w", err)
	}
	lookedAt := time.Since(start)
	time.Sleep(10 * time.Second) // writes a reconcile decided on land after it finished
	writes, err := mgr.writes()
	if err != nil {
		return err
	}
	rss, peak, err := mgr.memory()
	if err != nil {
		return err
	}
	reads, err := mgr.requests("GET")
	if err != nil {
		return err
	}
	fmt.Printf("restart: a new manager reconciled every SkillServer and import within %s of its start, then made %.0f API writes in all (10 s later) and %.0f GETs; RSS %d MiB, peak %d MiB\n",
		lookedAt.Round(time.Millisecond), writes, reads, rss>>10, peak>>10)
	if err := printHeap(mgr); err != nil {
		return err
	}
	return nil
}

func setUp(ctx context.Context, c client.Client) error {
	for i := range namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%d", i)}}); err != nil {
			return fmt.Errorf("create namespace: %w", err)
		}
	}
	policy := &cantusv1alpha1.ToolSourcePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "loopback"},
		Spec:       cantusv1alpha1.ToolSourcePolicySpec{NamespaceSelector: &metav1.LabelSelector{}, Hosts: []string{"127.0.0.1"}},
	}
	if err := c.Create(ctx, policy); err != nil {
		return fmt.Errorf("create the policy: %w", err)
	}
	return nil
}

// agents are the pods the bench's servers admit.
var agents = networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/part-of": "agents"}}}

func skillServer(i int) *cantusv1alpha1.SkillServer {
	return &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("scale-%d", i%namespaces), Name: fmt.Sprintf("server-%d", i)},
		Spec: cantusv1alpha1.SkillServerSpec{
			Skills: []cantusv1alpha1.Skill{{
				Name: "search_book", Description: "Search the catalog.",
				Template: &cantusv1alpha1.TemplateBackend{Text: "found: {{ .title }}"},
			}},
			// So that the operator applies a NetworkPolicy, as the yardstick's units do.
			AllowFrom: []networkingv1.NetworkPolicyPeer{agents},
		},
	}
}

func remoteToolImport(i int, remote *remoteServer, refresh string) *cantusv1alpha1.RemoteToolImport {
	return &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("scale-%d", i%namespaces), Name: fmt.Sprintf("import-%d", i)},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			URL:             remote.url,
			RefreshInterval: ptrTo(cantusv1alpha1.Duration(refresh)),
		},
	}
}

// serversApplied: every SkillServer has its Deployment and a status for its generation.
// watchWaitedFor starts an informer cache of what the bench waits for: the SkillServers,
// their imports and the operator's Deployments. A watch costs the API server one event per
// change; listing 10,000 of each every second cost it most of a core, which the operator
// being measured shares.
func watchWaitedFor(ctx context.Context, cfg *rest.Config) (client.Reader, error) {
	operatorOwned := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": "cantus-operator"})
	watched, err := cache.New(cfg, cache.Options{
		Scheme:                       testenv.Scheme(),
		ByObject:                     map[client.Object]cache.ByObject{&appsv1.Deployment{}: {Label: operatorOwned}},
		DefaultTransform:             cache.TransformStripManagedFields(),
		DefaultUnsafeDisableDeepCopy: ptrTo(true),
	})
	if err != nil {
		return nil, fmt.Errorf("a cache of what the bench waits for: %w", err)
	}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &cantusv1alpha1.SkillServer{}, &cantusv1alpha1.RemoteToolImport{}} {
		if _, err := watched.GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("watch %T: %w", obj, err)
		}
	}
	go func() { _ = watched.Start(ctx) }()
	if !watched.WaitForCacheSync(ctx) {
		return nil, errors.New("the bench's cache did not sync")
	}
	return watched, nil
}

func serversApplied(ctx context.Context, c client.Reader, want int) (bool, error) {
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps); err != nil {
		return false, err
	}
	if len(deps.Items) < want {
		return false, nil
	}
	var servers cantusv1alpha1.SkillServerList
	if err := c.List(ctx, &servers); err != nil {
		return false, err
	}
	for _, s := range servers.Items {
		if s.Status.ObservedGeneration != s.Generation || apimeta.FindStatusCondition(s.Status.Conditions, cantusv1alpha1.ConditionReady) == nil {
			return false, nil
		}
	}
	return len(servers.Items) == want, nil
}

func importsReady(ctx context.Context, c client.Reader, want int) (bool, error) {
	var imports cantusv1alpha1.RemoteToolImportList
	if err := c.List(ctx, &imports); err != nil {
		return false, err
	}
	ready := 0
	for _, imp := range imports.Items {
		if apimeta.IsStatusConditionTrue(imp.Status.Conditions, cantusv1alpha1.ConditionReady) {
			ready++
		}
	}
	return ready == want, nil
}

func waitFor(ctx context.Context, done func() (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, pollEvery, time.Hour, true, func(context.Context) (bool, error) { return done() })
}

// pollEvery is how often the bench looks at what it waits for: in its own cache for
// the servers and imports, at the manager's metrics after a restart.
var pollEvery = 250 * time.Millisecond

// remoteServer is the unchanged MCP server every import probes.
type remoteServer struct {
	url   string
	count *counter
}

type counter struct{ n chan struct{} }

func (r *remoteServer) requests() int { return len(r.count.n) }

func startRemote() (*remoteServer, error) {
	s := server.NewMCPServer("remote-books", "1.0.0")
	s.AddTool(mcp.NewTool("search_book", mcp.WithString("title")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("found"), nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	count := &counter{n: make(chan struct{}, 1<<24)}
	mcpHandler := server.NewStreamableHTTPServer(s, server.WithStateLess(true))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case count.n <- struct{}{}:
		default:
		}
		mcpHandler.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &remoteServer{url: "http://" + ln.Addr().String() + "/mcp", count: count}, nil
}

// managerProcess is the manager binary running against the control plane.
type managerProcess struct {
	cmd     *exec.Cmd
	metrics string
	pprof   string
}

// profileCPU writes a CPU profile of the manager over the next seconds to path.
func (m *managerProcess) profileCPU(path string, seconds int) error {
	return m.profile(fmt.Sprintf("profile?seconds=%d", seconds), path)
}

// profile writes the manager's pprof profile of that name (and query) to path.
func (m *managerProcess) profile(name, path string) error {
	resp, err := http.Get(m.pprof + name)
	if err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// profileAPIServerMeanwhile writes a CPU profile of kube-apiserver over the next seconds
// to path.phase, in the background; nothing when path is empty.
func profileAPIServerMeanwhile(ctx context.Context, cfg *rest.Config, path, phase string, seconds int) {
	if path == "" {
		return
	}
	go func() {
		if err := profileAPIServer(ctx, cfg, path+"."+phase, seconds); err != nil {
			fmt.Fprintln(os.Stderr, "scalebench:", err)
		}
	}()
}

func profileAPIServer(ctx context.Context, cfg *rest.Config, path string, seconds int) error {
	clients, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	profile, err := clients.RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(seconds)).Timeout(time.Duration(seconds+30) * time.Second).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("profile kube-apiserver: %w", err)
	}
	return os.WriteFile(path, profile, 0o600)
}

func startManager(binary string, extraArgs []string, memoryLimit string, admin *envtest.AuthenticatedUser) (*managerProcess, error) {
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "scalebench")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", port)
	pprofPort, err := freePort()
	if err != nil {
		return nil, err
	}
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", pprofPort)
	cmd := exec.Command(binary, "--runtime=kubernetes", "--verify-servers=false",
		"--metrics-bind-address="+metrics, "--metrics-secure=false", "--pprof-bind-address="+pprofAddr,
		"--health-probe-bind-address=0", "--catalog-bind-address=0")
	cmd.Args = append(cmd.Args, extraArgs...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+path)
	if memoryLimit != "" {
		// What the manager sets itself in a pod with this memory limit
		// (internal/gomemlimit): the bench runs it outside a container.
		limit, err := resource.ParseQuantity(memoryLimit)
		if err != nil {
			return nil, fmt.Errorf("-memory-limit: %w", err)
		}
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMEMLIMIT=%d", int64(float64(limit.Value())*gomemlimit.Ratio)))
	}
	log, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	fmt.Printf("manager log: %s\n", log.Name())
	m := &managerProcess{cmd: cmd, metrics: "http://" + metrics + "/metrics", pprof: "http://" + pprofAddr + "/debug/pprof/"}
	return m, wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := m.writes()
		return err == nil, nil
	})
}

func (m *managerProcess) stop() {
	_ = m.cmd.Process.Signal(os.Interrupt)
	_ = m.cmd.Wait()
}

// writes sums the manager's API requests that write: POST, PUT, PATCH and DELETE.
func (m *managerProcess) writes() (float64, error) {
	return m.requests("POST", "PUT", "PATCH", "DELETE")
}

// requests sums the manager's API requests of those methods.
func (m *managerProcess) requests(methods ...string) (float64, error) {
	return m.sum("rest_client_requests_total", func(labels string) bool {
		return slices.ContainsFunc(methods, func(m string) bool { return strings.Contains(labels, `method="`+m+`"`) })
	})
}

// compareAtThisSize measures the yardstick again, now that the API server holds every
// server's children: what a write costs it grows with what it stores (a new Service's
// cluster IP is found by looking at every allocated one), so the yardstick taken on an
// empty API server overstates what it accepts at 10,000 servers. The operator's rate
// spans the climb from empty to full; both ratios are printed.
func compareAtThisSize(ctx context.Context, c client.WithWatch, operatorRate float64) error {
	if err := prepareUnits(ctx, c, "yardstick-full", fullSizeUnits); err != nil {
		return err
	}
	waitForAQuietAPIServer()
	rate, err := parallelWriteRate(ctx, c, "yardstick-full", fullSizeUnits)
	if err != nil {
		return fmt.Errorf("the yardstick at this size: %w", err)
	}
	fmt.Printf("API server at this size: %.0f writes/s from %d parallel writers (the manager idle, every server settled); ratio: %.2f x of that rate\n",
		rate, yardstickWriters, operatorRate/rate)
	return nil
}

// printWhereTheTimeWent prints the controller's reconciles, how long one took and how
// long a request waited in the queue on average, and the mean API request latency: what
// tells a pace set by the API server from one set by the operator's own queue.
func printWhereTheTimeWent(m *managerProcess, controller string) error {
	ofController := func(labels string) bool { return strings.Contains(labels, `controller="`+controller+`"`) }
	ofQueue := func(labels string) bool { return strings.Contains(labels, `name="`+controller+`"`) }
	everyRequest := func(string) bool { return true }
	ofResult := func(result string) func(string) bool {
		return func(labels string) bool {
			return ofController(labels) && strings.Contains(labels, `result="`+result+`"`)
		}
	}
	var v [9]float64
	for i, q := range []struct {
		metric string
		match  func(string) bool
	}{
		{"controller_runtime_reconcile_total", ofController},
		{"controller_runtime_reconcile_time_seconds_sum", ofController},
		{"workqueue_queue_duration_seconds_sum", ofQueue},
		{"workqueue_queue_duration_seconds_count", ofQueue},
		{"workqueue_retries_total", ofQueue},
		{"controller_runtime_reconcile_total", ofResult("requeue_after")},
		{"controller_runtime_reconcile_total", ofResult("error")},
		{"rest_client_request_duration_seconds_sum", everyRequest},
		{"rest_client_request_duration_seconds_count", everyRequest},
	} {
		var err error
		if v[i], err = m.sum(q.metric, q.match); err != nil {
			return err
		}
	}
	mean := func(sum, count float64) time.Duration {
		if count == 0 {
			return 0
		}
		return time.Duration(sum / count * float64(time.Second)).Round(100 * time.Microsecond)
	}
	fmt.Printf("%s: %.0f reconciles (%s each; %.0f asked to come back later, %.0f failed), %s waiting in the queue on average, %.0f retries; API requests %s each\n",
		controller, v[0], mean(v[1], v[0]), v[5], v[6], mean(v[2], v[3]), v[4], mean(v[7], v[8]))
	return nil
}

// reconciles counts the reconciles the controller finished, whatever their result.
func (m *managerProcess) reconciles(controller string) (float64, error) {
	return m.sum("controller_runtime_reconcile_total", func(labels string) bool {
		return strings.Contains(labels, `controller="`+controller+`"`)
	})
}

// sum adds up the samples of the metric whose labels match.
func (m *managerProcess) sum(metric string, match func(labels string) bool) (float64, error) {
	resp, err := http.Get(m.metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	total := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") || !match(line[len(metric):strings.LastIndex(line, " ")]) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		total += v
	}
	return total, sc.Err()
}

// printHeap prints the Go heap the manager's objects occupy right after a garbage
// collection, and the heap it holds from the OS: what RSS holds beyond the first is
// freed memory the runtime has not given back yet (it does so slowly, in the
// background).
func printHeap(m *managerProcess) error {
	// Asking for a heap profile with gc=1 collects first; the profile is not needed.
	resp, err := http.Get(m.pprof + "heap?gc=1")
	if err != nil {
		return fmt.Errorf("collect the manager's garbage: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var v [2]float64
	for i, metric := range []string{"go_memstats_heap_alloc_bytes", "go_memstats_heap_inuse_bytes"} {
		var err error
		if v[i], err = m.sum(metric, func(string) bool { return true }); err != nil {
			return err
		}
	}
	fmt.Printf("  Go heap after a collection: %.0f MiB of objects, %.0f MiB in use\n", v[0]/(1<<20), v[1]/(1<<20))
	return nil
}

// memory reads the manager's resident and peak resident set sizes in KiB.
func (m *managerProcess) memory() (rss, peak int, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			rss, _ = strconv.Atoi(fields[1])
		case "VmHWM:":
			peak, _ = strconv.Atoi(fields[1])
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS in /proc status")
	}
	return rss, peak, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func ptrTo[T any](v T) *T { return &v }
