// Command bench measures tools/call of a template skill over streamable HTTP in two
// comparisons, each side by side in one process on 127.0.0.1 listeners:
//
//   - adapter: the adapter (internal/adapter) against a bare mcp-go server that renders
//     the same text with the same text/template;
//   - gateway: the skill re-exported through a gateway (a second adapter whose tool has
//     a Remote backend, as a SkillServer with spec.imports renders it) against a direct
//     call to the same remote (an adapter serving the skill; with -remote-delay, an
//     adapter whose tool is an HTTP backend that takes that long, as real tools do).
//
// At every concurrency level both sides of a comparison get the same number of mcp-go
// clients, one per worker, each initialized before anything is timed. After a warm-up
// of each, the measured time of a side (-duration) is cut into slices that alternate
// between the two sides, ABBA then BAAB and so on (-rounds such groups), so that
// drift on a small shared machine (other processes, frequency, GC) falls on both
// alike. A side's figures combine its slices: calls/s, p50 and p99 latency, process
// CPU and heap allocations per call, then the ratios against the targets: adapter/bare
// throughput ≥ 0.9× and p99 ≤ 1.2×; gateway/direct p50 ≤ 1.5× and throughput ≥ 0.6×.
// The targets are printed, never asserted: the command exits 0 whatever the figures,
// and fails only when a server cannot be set up or does not answer the expected text.
//
//	go run ./hack/bench [-only adapter|gateway|all] [-duration 3s] [-rounds 6]
//	                    [-warmup 500ms] [-concurrency 1,16,64] [-json] [-auth]
//	                    [-remote-delay 1ms] [-hop]
//	                    [-cpuprofile cpu.out] [-memprofile allocs.out]
//
// Each server's connections are served under the pprof label server=adapter,
// server=bare, server=remote or server=gateway (the gateway's connections to the
// remote included, as they are opened from its handlers), and the clients (their
// connection goroutines included) under side=client, so a -cpuprofile splits with
// `go tool pprof -tagfocus server=adapter`; what carries no label is the runtime's own
// work, mostly GC.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"text/template"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapter"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// The skill under test: greet_reader of config/samples/cantus_v1alpha1_skillserver.yaml.
const (
	toolName     = "greet_reader"
	toolDesc     = "Greet a reader by name."
	toolSchema   = `{"type":"object","title":"GreetReaderArgs","additionalProperties":false,"properties":{"name":{"type":"string"}},"required":["name"]}`
	toolTemplate = "Hello, {{ .name }}! Welcome to the library."
	argName      = "Ada"
	wantText     = "Hello, Ada! Welcome to the library."
)

// The skill as the gateway re-exports it.
const (
	// gatewayToolName is its name on the gateway (an import prefix).
	gatewayToolName = "remote_greet_reader"
	// gatewayImport names the RemoteToolImport it comes from ("namespace/name").
	gatewayImport = "bench/remote"
)

// targets bound the ratios candidate/baseline of a comparison; a zero bound is no
// target (the ratio is printed all the same).
type targets struct {
	minThroughput float64
	maxP50        float64
	maxP99        float64
}

var (
	// adapter/bare.
	adapterTargets = targets{minThroughput: 0.9, maxP99: 1.2}
	// gateway/direct, from issue 4 ("Tests and figures").
	gatewayTargets = targets{minThroughput: 0.6, maxP50: 1.5}
)

const (
	protocolVersion = mcp.ProtocolVersion20250618
	benchToken      = "bench-token"
	// callTimeout bounds every network step: connecting, initializing, each call.
	callTimeout = 10 * time.Second
	// maxSettle is the most of each slice left unmeasured while its workers start.
	maxSettle = 25 * time.Millisecond
)

// Names of servers (pprof labels) and of the sides of the comparisons.
const (
	nameAdapter = "adapter" // server and side
	nameBare    = "bare"    // server and side
	nameRemote  = "remote"  // server: the remote the gateway re-exports from
	nameBackend = "backend" // server: the remote tool's HTTP backend (-remote-delay)
	nameGateway = "gateway" // server and side: the remote's tool through the gateway
	nameDirect  = "direct"  // side: the remote's tool called directly
	nameHop     = "hop"     // server and side: a bare reverse proxy in front of the remote (-hop)
)

// Values of -only.
const (
	onlyAll     = "all"
	onlyAdapter = "adapter"
	onlyGateway = "gateway"
)

type options struct {
	only        string
	duration    time.Duration
	rounds      int
	warmup      time.Duration
	concurrency []int
	jsonOut     bool
	auth        bool
	cpuprofile  string
	memprofile  string
	remoteDelay time.Duration
	hop         bool
}

// slice is the measured part of one slice; settle is the unmeasured start of each.
func (o options) slice() time.Duration { return o.duration / time.Duration(2*o.rounds) }

func (o options) settle() time.Duration { return min(maxSettle, o.slice()/5) }

func (o options) comparisons() int {
	n := 1
	if o.only == onlyAll {
		n = 2
	}
	if o.hop && o.wants(onlyGateway) {
		n++
	}
	return n
}

func (o options) wants(name string) bool { return o.only == onlyAll || o.only == name }

// expected is how long the measurements take, connections aside.
func (o options) expected() time.Duration {
	perSide := o.warmup + time.Duration(2*o.rounds)*(o.settle()+o.slice())
	return time.Duration(2*o.comparisons()*len(o.concurrency)) * perSide
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags() (options, error) {
	var o options
	var conc string
	flag.StringVar(&o.only, "only", onlyAll, "which comparison to run: adapter (adapter/bare), gateway (gateway/direct) or all")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "measured time of each side of a comparison at each concurrency level")
	flag.IntVar(&o.rounds, "rounds", 6, "alternation groups per level (ABBA or BAAB); each side's -duration is cut into 2×rounds slices")
	flag.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured calls to each side before each level")
	flag.StringVar(&conc, "concurrency", "1,16,64", "comma-separated numbers of concurrent clients")
	flag.BoolVar(&o.jsonOut, "json", false, "print the results as JSON instead of tables")
	flag.BoolVar(&o.auth, "auth", false, "serve the adapter, the remote and the gateway with a bearer token (off by default, as an adapter without bearerTokenFile); every client sends it, the gateway from a header file")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the measurements to this file")
	flag.BoolVar(&o.hop, "hop", false, "with the gateway comparison, also measure a bare HTTP reverse proxy (net/http/httputil, no MCP work) in front of the remote against the direct call: the cost of the extra HTTP hop alone over the gateway's transport, the floor of a gateway served by net/http")
	flag.DurationVar(&o.remoteDelay, "remote-delay", 0, "gateway comparison only: the remote's tool is an HTTP backend that answers after this delay (e.g. 1ms) instead of a template, as most real tools take time")
	flag.StringVar(&o.memprofile, "memprofile", "", "write an allocation profile to this file at the end (pprof -sample_index=alloc_objects)")
	flag.Parse()
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if o.only != onlyAll && o.only != onlyAdapter && o.only != onlyGateway {
		return o, fmt.Errorf("-only %q: use %s, %s or %s", o.only, onlyAdapter, onlyGateway, onlyAll)
	}
	if o.rounds < 1 || o.rounds > 100 {
		return o, fmt.Errorf("-rounds %d must be in 1..100", o.rounds)
	}
	if o.slice() < 10*time.Millisecond {
		return o, fmt.Errorf("-duration %s is too short for %d rounds: slices would be under 10ms", o.duration, o.rounds)
	}
	if o.warmup < 0 {
		return o, fmt.Errorf("-warmup %s must not be negative", o.warmup)
	}
	for _, f := range strings.Split(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return o, fmt.Errorf("-concurrency %q: each level must be an integer in 1..1024", conc)
		}
		o.concurrency = append(o.concurrency, n)
	}
	return o, nil
}

// comparison is two sides measured against each other: a is the candidate, b the
// baseline, and the ratios are a/b.
type comparison struct {
	name    string // onlyAdapter or onlyGateway
	title   string // what is compared, for the report
	a, b    target
	targets targets
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}

	// Everything is bounded: the expected time plus a generous allowance for setup.
	budget := o.expected() + 60*time.Second
	watchdog := time.AfterFunc(budget, func() {
		fmt.Fprintf(os.Stderr, "bench: did not finish within %s, giving up\n", budget)
		os.Exit(2)
	})
	defer watchdog.Stop()

	env := describeEnv()
	fmt.Fprintf(os.Stderr, "%s\nmeasuring %d comparison(s), %s per side at %d levels in slices of %s; about %s\n",
		env.line(), o.comparisons(), o.duration, len(o.concurrency), o.slice().Round(time.Millisecond), o.expected().Round(time.Second))

	token := ""
	if o.auth {
		token = benchToken
	}
	maxConc := slices.Max(o.concurrency)
	httpClient := &http.Client{Transport: &http.Transport{
		Proxy:               nil, // loopback only
		DialContext:         (&net.Dialer{Timeout: callTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4 * max(64, maxConc),
		MaxIdleConnsPerHost: 2 * max(64, maxConc),
		IdleConnTimeout:     90 * time.Second,
	}}
	defer httpClient.CloseIdleConnections()
	var headers map[string]string
	if token != "" {
		headers = map[string]string{"Authorization": "Bearer " + token}
	}
	newTarget := func(name, url, tool string) target {
		return target{name: name, url: url, tool: tool, headers: headers, http: httpClient}
	}

	var comparisons []comparison
	if o.wants(onlyAdapter) {
		adapterURL, stopAdapter, err := startTemplateAdapter(nameAdapter, token)
		if err != nil {
			return err
		}
		defer stopAdapter()
		bareURL, stopBare, err := startBare()
		if err != nil {
			return err
		}
		defer stopBare()
		comparisons = append(comparisons, comparison{
			name:    onlyAdapter,
			title:   fmt.Sprintf("adapter/bare: tools/call %s on the adapter and on a bare mcp-go server", toolName),
			a:       newTarget(nameAdapter, adapterURL, toolName),
			b:       newTarget(nameBare, bareURL, toolName),
			targets: adapterTargets,
		})
	}
	if o.wants(onlyGateway) {
		remoteURL, stopRemote, err := startRemote(o.remoteDelay, token)
		if err != nil {
			return err
		}
		defer stopRemote()
		headerFile := ""
		if token != "" {
			// The gateway sends the remote's token from a file, as a Secret mounted for
			// a RemoteToolImport's headers.
			if headerFile, err = writeHeaderFile("Bearer " + token); err != nil {
				return err
			}
			defer os.Remove(headerFile)
		}
		gatewayURL, stopGateway, err := startGateway(remoteURL, headerFile, token)
		if err != nil {
			return err
		}
		defer stopGateway()
		comparisons = append(comparisons, comparison{
			name: onlyGateway,
			title: fmt.Sprintf("gateway/direct: tools/call %s on the gateway, re-exported from the remote's %s, against %s called on the remote directly%s",
				gatewayToolName, toolName, toolName, remoteKind(o.remoteDelay)),
			a:       newTarget(nameGateway, gatewayURL, gatewayToolName),
			b:       newTarget(nameDirect, remoteURL, toolName),
			targets: gatewayTargets,
		})
		if o.hop {
			proxyURL, stopProxy, err := startHop(remoteURL)
			if err != nil {
				return err
			}
			defer stopProxy()
			comparisons = append(comparisons, comparison{
				name:    nameHop,
				title:   fmt.Sprintf("hop/direct: tools/call %s through a bare HTTP reverse proxy (no MCP work) against the direct call: the extra HTTP hop alone; the gateway's targets for reference", toolName),
				a:       newTarget(nameHop, proxyURL, toolName),
				b:       newTarget(nameDirect, remoteURL, toolName),
				targets: gatewayTargets,
			})
		}
	}

	// From here on, the goroutines this one starts, and those they start (the
	// transport's connection loops among them), are the clients' side.
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("side", "client")))

	// Every side must answer the expected text before anything is timed; the first
	// call through the gateway also opens its pooled session to the remote.
	for _, c := range comparisons {
		for _, t := range []target{c.a, c.b} {
			if err := t.check(); err != nil {
				return err
			}
		}
	}

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return fmt.Errorf("create cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("start cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	rep := report{
		Env:             env,
		DurationPerSide: o.duration.String(),
		Rounds:          o.rounds,
		Slice:           o.slice().Round(time.Millisecond).String(),
		Warmup:          o.warmup.String(),
		Auth:            o.auth,
	}
	for _, c := range comparisons {
		fmt.Fprintf(os.Stderr, "%s:\n", c.name)
		cr := comparisonResult{
			Name:                  c.name,
			Title:                 c.title,
			Candidate:             c.a.name,
			Baseline:              c.b.name,
			TargetThroughputRatio: c.targets.minThroughput,
			TargetP50Ratio:        c.targets.maxP50,
			TargetP99Ratio:        c.targets.maxP99,
		}
		for _, conc := range o.concurrency {
			a, b, ratios, err := measureLevel(o, conc, c)
			if err != nil {
				return fmt.Errorf("%s at %d clients: %w", c.name, conc, err)
			}
			cr.Results = append(cr.Results, a, b)
			cr.Ratios = append(cr.Ratios, ratios)
		}
		rep.Comparisons = append(rep.Comparisons, cr)
	}
	rep.Env.LoadAvgEnd = loadAvg()
	if o.memprofile != "" {
		if err := writeAllocsProfile(o.memprofile); err != nil {
			return err
		}
	}

	if o.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.print(os.Stdout)
	return nil
}

// measureLevel connects conc clients to each side of c, warms both up, then runs the
// alternating slices and combines them.
func measureLevel(o options, conc int, c comparison) (serverResult, serverResult, ratioResult, error) {
	var none serverResult
	pa, err := c.a.openPool(conc)
	if err != nil {
		return none, none, ratioResult{}, err
	}
	defer pa.close()
	pb, err := c.b.openPool(conc)
	if err != nil {
		return none, none, ratioResult{}, err
	}
	defer pb.close()

	nameA, nameB := c.a.name, c.b.name
	pools := map[string]*pool{nameA: pa, nameB: pb}
	for _, p := range []*pool{pa, pb} {
		if o.warmup > 0 {
			if _, err := p.slice(0, o.warmup); err != nil {
				return none, none, ratioResult{}, fmt.Errorf("%s warm-up: %w", p.t.name, err)
			}
		}
	}
	got := map[string][]sliceResult{}
	var roundRatios []float64
	for r := range o.rounds {
		order := []string{nameA, nameB, nameB, nameA}
		if r%2 == 1 {
			order = []string{nameB, nameA, nameA, nameB}
		}
		roundCalls := map[string]int{}
		for _, name := range order {
			runtime.GC() // each slice starts from a collected heap, whoever ran before
			res, err := pools[name].slice(o.settle(), o.slice())
			if err != nil {
				return none, none, ratioResult{}, fmt.Errorf("%s: %w", name, err)
			}
			got[name] = append(got[name], res)
			roundCalls[name] += res.calls
		}
		roundRatios = append(roundRatios, float64(roundCalls[nameA])/float64(roundCalls[nameB]))
	}
	a := combine(nameA, conc, got[nameA])
	b := combine(nameB, conc, got[nameB])
	ratios := ratiosOf(a, b, roundRatios, c.targets)
	fmt.Fprintf(os.Stderr, "  %3d clients: %s %6.0f calls/s p50 %.3fms p99 %.3fms | %s %6.0f calls/s p50 %.3fms p99 %.3fms | throughput %.2f× p50 %.2f× p99 %.2f×\n",
		conc, nameA, a.CallsPerSec, a.P50Ms, a.P99Ms, nameB, b.CallsPerSec, b.P50Ms, b.P99Ms,
		ratios.ThroughputRatio, ratios.P50Ratio, ratios.P99Ratio)
	return a, b, ratios, nil
}

// ---- servers ----

// serveLabelled serves h on a fresh 127.0.0.1 listener. The serving goroutine carries
// the pprof label server=name, which every connection goroutine inherits, so profiles
// split by server at no per-request cost.
func serveLabelled(name string, h http.Handler) (baseURL string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen for %s: %w", name, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: callTimeout,
		IdleTimeout:       2 * time.Minute,
	}
	done := make(chan struct{})
	go pprof.Do(context.Background(), pprof.Labels("server", name), func(context.Context) {
		defer close(done)
		_ = srv.Serve(ln)
	})
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// startTemplateAdapter serves the skill with the adapter as the controller renders it
// by default: streamable HTTP, stateless. label is the pprof label of its connections:
// nameAdapter, or nameRemote for the remote the gateway re-exports from.
func startTemplateAdapter(label, token string) (string, func(), error) {
	return startAdapter(label, token, adapter.Tool{
		Name:        toolName,
		Description: toolDesc,
		InputSchema: json.RawMessage(toolSchema),
		Template:    &adapter.TemplateBackend{Text: toolTemplate},
	})
}

// startAdapter serves tool with the adapter as the controller renders it by default.
func startAdapter(label, token string, tool adapter.Tool) (string, func(), error) {
	cfg := &adapter.Config{
		Server:    adapter.ServerInfo{Name: "cantus-bench-" + label, Version: "0.0.0"},
		Transport: adapter.TransportStreamableHTTP,
		Stateless: true,
		Tools:     []adapter.Tool{tool},
	}
	var opts []adapter.Option
	if token != "" {
		opts = append(opts, adapter.WithBearerToken(token))
	}
	srv, err := adapter.NewServer(cfg, opts...)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", label, err)
	}
	base, stop, err := serveLabelled(label, srv.Handler())
	if err != nil {
		return "", nil, err
	}
	return base + adapter.PathMCP, stop, nil
}

// startRemote serves the remote the gateway re-exports from: the template skill, or with
// delay an HTTP-backed tool of the same name whose backend answers after delay.
func startRemote(delay time.Duration, token string) (string, func(), error) {
	if delay <= 0 {
		return startTemplateAdapter(nameRemote, token)
	}
	backendURL, stopBackend, err := serveLabelled(nameBackend, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, wantText)
	}))
	if err != nil {
		return "", nil, err
	}
	url, stop, err := startAdapter(nameRemote, token, adapter.Tool{
		Name:        toolName,
		Description: toolDesc,
		InputSchema: json.RawMessage(toolSchema),
		HTTP:        &adapter.HTTPBackend{URL: backendURL, Timeout: adapter.Duration{Duration: callTimeout}, MaxResponseBytes: 1 << 20},
	})
	if err != nil {
		stopBackend()
		return "", nil, err
	}
	return url, func() { stop(); stopBackend() }, nil
}

func remoteKind(delay time.Duration) string {
	if delay <= 0 {
		return " (a template: no work of its own)"
	}
	return fmt.Sprintf(" (an HTTP backend that takes %s)", delay)
}

// startHop serves a reverse proxy to the remote at remoteURL, over the transport the
// gateway's MCP client uses (mcpclient.Transport), so that the two differ only in the
// gateway's MCP work.
func startHop(remoteURL string) (string, func(), error) {
	target, err := url.Parse(remoteURL)
	if err != nil {
		return "", nil, fmt.Errorf("hop: %w", err)
	}
	transport, err := mcpclient.NewTransport(mcpclient.TransportConfig{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second})
	if err != nil {
		return "", nil, fmt.Errorf("hop: %w", err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = target.Path
		},
		Transport:  transport,
		BufferPool: &copyBuffers{},
	}
	base, stop, err := serveLabelled(nameHop, proxy)
	if err != nil {
		return "", nil, err
	}
	return base + adapter.PathMCP, stop, nil
}

// copyBuffers keeps the reverse proxy's copy buffers for reuse, which it would
// otherwise allocate per request (32 KiB each).
type copyBuffers struct{ pool sync.Pool }

func (b *copyBuffers) Get() []byte {
	if buf, ok := b.pool.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *copyBuffers) Put(buf []byte) { b.pool.Put(&buf) }

// startGateway serves the skill of the remote at remoteURL re-exported, as the
// controller renders a SkillServer whose spec.imports names a RemoteToolImport: a tool
// with a Remote backend (streamable HTTP, the remote's schema, a prefixed name), on an
// adapter that keeps one pooled client session to the remote. headerFile, when set,
// holds the Authorization header the gateway sends to the remote; token, when set, is
// the bearer token the gateway itself requires.
func startGateway(remoteURL, headerFile, token string) (string, func(), error) {
	remote := &adapter.RemoteBackend{
		Import:     gatewayImport,
		URL:        remoteURL,
		Transport:  adapter.TransportStreamableHTTP,
		RemoteName: toolName,
		Timeout:    adapter.Duration{Duration: callTimeout},
	}
	if headerFile != "" {
		remote.HeaderFiles = map[string]string{"Authorization": headerFile}
	}
	cfg := &adapter.Config{
		Server:    adapter.ServerInfo{Name: "cantus-bench-" + nameGateway, Version: "0.0.0"},
		Transport: adapter.TransportStreamableHTTP,
		Stateless: true,
		Tools: []adapter.Tool{{
			Name:        gatewayToolName,
			Description: toolDesc,
			InputSchema: json.RawMessage(toolSchema),
			Remote:      remote,
		}},
	}
	var opts []adapter.Option
	if token != "" {
		opts = append(opts, adapter.WithBearerToken(token))
	}
	srv, err := adapter.NewServer(cfg, opts...)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", nameGateway, err)
	}
	base, stop, err := serveLabelled(nameGateway, srv.Handler())
	if err != nil {
		_ = srv.Close()
		return "", nil, err
	}
	return base + adapter.PathMCP, func() {
		stop()
		_ = srv.Close() // ends the pooled session to the remote
	}, nil
}

// writeHeaderFile writes value to a new private temporary file and returns its path.
func writeHeaderFile(value string) (string, error) {
	f, err := os.CreateTemp("", "cantus-bench-authorization-*")
	if err != nil {
		return "", fmt.Errorf("header file: %w", err)
	}
	if _, err := f.WriteString(value); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("header file: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("header file: %w", err)
	}
	return f.Name(), nil
}

// startBare serves the same tool with mcp-go alone: one AddTool whose handler renders
// the same text with the same text/template (parsed once, missingkey=error as the
// adapter does), over the arguments mcp-go already decoded.
func startBare() (string, func(), error) {
	tmpl, err := template.New(toolName).Option("missingkey=error").Parse(toolTemplate)
	if err != nil {
		return "", nil, fmt.Errorf("bare: parse template: %w", err)
	}
	m := server.NewMCPServer("bare-bench", "0.0.0", server.WithToolCapabilities(false))
	m.AddTool(mcp.NewToolWithRawSchema(toolName, toolDesc, json.RawMessage(toolSchema)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var sb strings.Builder
			if err := tmpl.Execute(&sb, req.GetArguments()); err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(sb.String()), nil
		})
	streamable := server.NewStreamableHTTPServer(m,
		server.WithEndpointPath(adapter.PathMCP),
		server.WithStateLess(true),
	)
	mux := http.NewServeMux()
	mux.Handle(adapter.PathMCP, streamable)
	base, stop, err := serveLabelled(nameBare, mux)
	if err != nil {
		return "", nil, err
	}
	return base + adapter.PathMCP, stop, nil
}

// ---- clients ----

// target is one side of a comparison: an endpoint and the tool called there.
type target struct {
	name    string
	url     string
	tool    string
	headers map[string]string
	http    *http.Client
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// connect returns an initialized client pinned to 2025-06-18 (unpinned, mcp-go's
// client would first probe with server/discover).
func (t target) connect() (*client.Client, error) {
	tr, err := transport.NewStreamableHTTP(t.url,
		transport.WithHTTPBasicClient(t.http),
		transport.WithHTTPHeaders(t.headers),
		transport.WithHTTPLogger(quietLog),
	)
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, client.WithProtocolVersion(protocolVersion))
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("start client: %w", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = protocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: "cantus-bench", Version: "0.0.0"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if res.ProtocolVersion != protocolVersion {
		_ = c.Close()
		return nil, fmt.Errorf("server negotiated protocol %q, want %q", res.ProtocolVersion, protocolVersion)
	}
	return c, nil
}

func callRequest(tool string) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = map[string]any{"name": argName}
	return req
}

// callOnce makes one call and checks that it answered the expected text.
func callOnce(c *client.Client, req mcp.CallToolRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return err
	}
	if len(res.Content) != 1 {
		return fmt.Errorf("result has %d content items, want 1", len(res.Content))
	}
	text, ok := mcp.AsTextContent(res.Content[0])
	if !ok {
		return fmt.Errorf("result content is %T, want text", res.Content[0])
	}
	if res.IsError || text.Text != wantText {
		return fmt.Errorf("result %q (isError %t), want %q", text.Text, res.IsError, wantText)
	}
	return nil
}

func (t target) check() error {
	c, err := t.connect()
	if err != nil {
		return fmt.Errorf("%s at %s: %w", t.name, t.url, err)
	}
	defer c.Close()
	if err := callOnce(c, callRequest(t.tool)); err != nil {
		return fmt.Errorf("%s: tools/call %s: %w", t.name, t.tool, err)
	}
	return nil
}

// pool is the initialized clients of one server at one concurrency level.
type pool struct {
	t       target
	clients []*client.Client
}

func (t target) openPool(conc int) (*pool, error) {
	p := &pool{t: t}
	for range conc {
		c, err := t.connect()
		if err != nil {
			p.close()
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
		p.clients = append(p.clients, c)
	}
	return p, nil
}

func (p *pool) close() {
	for _, c := range p.clients {
		_ = c.Close()
	}
}

// sliceResult is one measured slice of one server.
type sliceResult struct {
	calls     int           // successful calls completed inside the window
	errors    int           // failed calls completed inside the window
	window    time.Duration // measured time
	cpu       time.Duration // process CPU (user+system) during the window, clients included
	allocB    uint64        // heap bytes allocated during the window, clients included
	allocN    uint64        // heap objects allocated during the window, clients included
	latencies []time.Duration
}

// slice has every client loop tools/call for settle+window, and keeps the calls that
// complete inside the window [start+settle, start+settle+window].
func (p *pool) slice(settle, window time.Duration) (sliceResult, error) {
	type workerResult struct {
		calls, errors int
		lat           []time.Duration
		firstErr      error
	}
	results := make([]workerResult, len(p.clients))
	from := time.Now().Add(settle)
	until := from.Add(window)
	var wg sync.WaitGroup
	for i, c := range p.clients {
		wg.Go(func() {
			req := callRequest(p.t.tool)
			w := &results[i]
			for {
				s := time.Now()
				if !s.Before(until) {
					return
				}
				err := callOnce(c, req)
				e := time.Now()
				if e.Before(from) || e.After(until) {
					continue
				}
				if err != nil {
					w.errors++
					if w.firstErr == nil {
						w.firstErr = err
					}
					continue
				}
				w.calls++
				w.lat = append(w.lat, e.Sub(s))
			}
		})
	}
	time.Sleep(time.Until(from))
	cpu0 := processCPU()
	b0, n0 := heapAllocs()
	time.Sleep(time.Until(until))
	cpu1 := processCPU()
	b1, n1 := heapAllocs()
	wg.Wait()

	res := sliceResult{window: window, cpu: cpu1 - cpu0, allocB: b1 - b0, allocN: n1 - n0}
	var firstErr error
	for _, w := range results {
		res.calls += w.calls
		res.errors += w.errors
		res.latencies = append(res.latencies, w.lat...)
		if firstErr == nil {
			firstErr = w.firstErr
		}
	}
	if res.calls == 0 {
		if firstErr == nil {
			firstErr = errors.New("no call completed inside the measured window")
		}
		return res, firstErr
	}
	if firstErr != nil {
		fmt.Fprintf(os.Stderr, "  %s: %d failed calls, first: %v\n", p.t.name, res.errors, firstErr)
	}
	return res, nil
}

func writeAllocsProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create allocation profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("write allocation profile: %w", err)
	}
	return f.Close()
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapAllocs returns the bytes and objects allocated on the heap so far.
func heapAllocs() (bytes, objects uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		bytes = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		objects = s[1].Value.Uint64()
	}
	return bytes, objects
}

// percentile is the nearest-rank percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ---- report ----

type envInfo struct {
	GoVersion    string `json:"go_version"`
	OS           string `json:"os"`
	Arch         string `json:"arch"`
	GOMAXPROCS   int    `json:"gomaxprocs"`
	NumCPU       int    `json:"num_cpu"`
	CPUModel     string `json:"cpu_model"`
	MCPGo        string `json:"mcp_go"`
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
}

func describeEnv() envInfo {
	e := envInfo{
		GoVersion:    runtime.Version(),
		OS:           runtime.GOOS,
		Arch:         runtime.GOARCH,
		GOMAXPROCS:   runtime.GOMAXPROCS(0),
		NumCPU:       runtime.NumCPU(),
		CPUModel:     cpuModel(),
		MCPGo:        "unknown",
		LoadAvgStart: loadAvg(),
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/mark3labs/mcp-go" {
				e.MCPGo = d.Version
			}
		}
	}
	return e
}

func (e envInfo) line() string {
	return fmt.Sprintf("%s %s/%s, GOMAXPROCS=%d, NumCPU=%d, CPU: %s, mcp-go %s",
		e.GoVersion, e.OS, e.Arch, e.GOMAXPROCS, e.NumCPU, e.CPUModel, e.MCPGo)
}

// cpuModel reads the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return "unknown"
}

// loadAvg returns the 1, 5 and 15 minute load averages: other work on the machine
// shows in the figures, and this says how much there was.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// serverResult is one server at one concurrency level, its slices combined.
type serverResult struct {
	Server        string  `json:"server"`
	Concurrency   int     `json:"concurrency"`
	Calls         int     `json:"calls"`
	Errors        int     `json:"errors"`
	Seconds       float64 `json:"seconds"`
	CallsPerSec   float64 `json:"calls_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	CPUPerCallUs  float64 `json:"cpu_per_call_us"`
	AllocsPerCall float64 `json:"allocs_per_call"`
	BytesPerCall  float64 `json:"bytes_per_call"`
	// SliceMinPerSec and SliceMaxPerSec bound the slices' calls/s: their spread is the
	// machine's noise.
	SliceMinPerSec float64 `json:"slice_min_calls_per_sec"`
	SliceMaxPerSec float64 `json:"slice_max_calls_per_sec"`
}

// ratioResult is candidate/baseline at one level. A pass flag is absent (nil) when its
// comparison has no target for that ratio.
type ratioResult struct {
	Concurrency        int     `json:"concurrency"`
	ThroughputRatio    float64 `json:"throughput_ratio"`
	ThroughputPass     bool    `json:"throughput_pass"`
	RoundThroughputMin float64 `json:"round_throughput_ratio_min"`
	RoundThroughputMax float64 `json:"round_throughput_ratio_max"`
	P50Ratio           float64 `json:"p50_ratio"`
	P50Pass            *bool   `json:"p50_pass,omitempty"`
	P99Ratio           float64 `json:"p99_ratio"`
	P99Pass            *bool   `json:"p99_pass,omitempty"`
	CPUPerCallRatio    float64 `json:"cpu_per_call_ratio"`
	AllocsPerCallDiff  float64 `json:"allocs_per_call_diff"`
	BytesPerCallDiff   float64 `json:"bytes_per_call_diff"`
}

// comparisonResult is one comparison at every level. A zero target is no target.
type comparisonResult struct {
	Name                  string         `json:"name"`
	Title                 string         `json:"title"`
	Candidate             string         `json:"candidate"`
	Baseline              string         `json:"baseline"`
	TargetThroughputRatio float64        `json:"target_throughput_ratio"`
	TargetP50Ratio        float64        `json:"target_p50_ratio,omitempty"`
	TargetP99Ratio        float64        `json:"target_p99_ratio,omitempty"`
	Results               []serverResult `json:"results"`
	Ratios                []ratioResult  `json:"ratios"`
}

type report struct {
	Env             envInfo            `json:"env"`
	DurationPerSide string             `json:"duration_per_side"`
	Rounds          int                `json:"rounds"`
	Slice           string             `json:"slice"`
	Warmup          string             `json:"warmup"`
	Auth            bool               `json:"auth"`
	Comparisons     []comparisonResult `json:"comparisons"`
}

func combine(name string, conc int, parts []sliceResult) serverResult {
	r := serverResult{Server: name, Concurrency: conc, SliceMinPerSec: math.Inf(1)}
	var window, cpu time.Duration
	var allocB, allocN uint64
	var lat []time.Duration
	for _, p := range parts {
		r.Calls += p.calls
		r.Errors += p.errors
		window += p.window
		cpu += p.cpu
		allocB += p.allocB
		allocN += p.allocN
		lat = append(lat, p.latencies...)
		perSec := float64(p.calls) / p.window.Seconds()
		r.SliceMinPerSec = math.Min(r.SliceMinPerSec, perSec)
		r.SliceMaxPerSec = math.Max(r.SliceMaxPerSec, perSec)
	}
	slices.Sort(lat)
	r.Seconds = window.Seconds()
	r.CallsPerSec = float64(r.Calls) / window.Seconds()
	r.P50Ms = ms(percentile(lat, 0.50))
	r.P99Ms = ms(percentile(lat, 0.99))
	if n := r.Calls + r.Errors; n > 0 {
		r.CPUPerCallUs = float64(cpu.Microseconds()) / float64(n)
		r.AllocsPerCall = float64(allocN) / float64(n)
		r.BytesPerCall = float64(allocB) / float64(n)
	}
	return r
}

func ratiosOf(a, b serverResult, rounds []float64, t targets) ratioResult {
	r := ratioResult{
		Concurrency:        a.Concurrency,
		ThroughputRatio:    a.CallsPerSec / b.CallsPerSec,
		RoundThroughputMin: slices.Min(rounds),
		RoundThroughputMax: slices.Max(rounds),
		P50Ratio:           a.P50Ms / b.P50Ms,
		P99Ratio:           a.P99Ms / b.P99Ms,
		CPUPerCallRatio:    a.CPUPerCallUs / b.CPUPerCallUs,
		AllocsPerCallDiff:  a.AllocsPerCall - b.AllocsPerCall,
		BytesPerCallDiff:   a.BytesPerCall - b.BytesPerCall,
	}
	// Judged as printed, to two decimals, so that "0.90×" never reads MISS.
	r.ThroughputPass = round2(r.ThroughputRatio) >= t.minThroughput
	atMost := func(ratio, bound float64) *bool {
		if bound == 0 {
			return nil
		}
		pass := round2(ratio) <= bound
		return &pass
	}
	r.P50Pass = atMost(r.P50Ratio, t.maxP50)
	r.P99Pass = atMost(r.P99Ratio, t.maxP99)
	return r
}

func (r *report) print(out io.Writer) {
	auth := "off"
	if r.Auth {
		auth = "on (every adapter checks a bearer token)"
	}
	fmt.Fprintln(out, r.Env.line())
	fmt.Fprintf(out, "load average %s at start, %s at end\n", r.Env.LoadAvgStart, r.Env.LoadAvgEnd)
	fmt.Fprintf(out, "tools/call over streamable HTTP (stateless, protocol %s) on 127.0.0.1, auth %s\n",
		protocolVersion, auth)
	fmt.Fprintf(out, "per side and level: %s warm-up, then %s measured in %d slices of %s, alternating ABBA / BAAB\n",
		r.Warmup, r.DurationPerSide, 2*r.Rounds, r.Slice)
	for _, c := range r.Comparisons {
		c.print(out)
	}
	fmt.Fprintln(out, "\ntargets are printed, not asserted. cpu/call, allocs/call and B/call count the whole process,")
	fmt.Fprintln(out, "clients included (through the gateway, the remote's work too); the ratio tables give their")
	fmt.Fprintln(out, "ratio or difference.")
}

func (c *comparisonResult) print(out io.Writer) {
	fmt.Fprintf(out, "\n%s\n\n", c.Title)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\tserver\tcalls/s\tslices calls/s\tp50\tp99\tcpu/call\tallocs/call\tB/call\terrors\t")
	for _, s := range c.Results {
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f–%.0f\t%.3fms\t%.3fms\t%.0fµs\t%.0f\t%.0f\t%d\t\n",
			s.Concurrency, s.Server, s.CallsPerSec, s.SliceMinPerSec, s.SliceMaxPerSec, s.P50Ms, s.P99Ms,
			s.CPUPerCallUs, s.AllocsPerCall, s.BytesPerCall, s.Errors)
	}
	_ = tw.Flush()

	// A ratio with a target is followed by its mark; one without stands alone.
	vs := c.Candidate + "/" + c.Baseline
	header := fmt.Sprintf("clients\tthroughput %s\t≥%.1f×\tper round\tp50 %s\t", vs, c.TargetThroughputRatio, vs)
	if c.TargetP50Ratio != 0 {
		header += fmt.Sprintf("≤%.1f×\t", c.TargetP50Ratio)
	}
	header += "p99 " + vs + "\t"
	if c.TargetP99Ratio != 0 {
		header += fmt.Sprintf("≤%.1f×\t", c.TargetP99Ratio)
	}
	header += "cpu/call\tallocs/call\tB/call\t"
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, header)
	for _, x := range c.Ratios {
		row := fmt.Sprintf("%d\t%.2f×\t%s\t%.2f–%.2f×\t%.2f×\t", x.Concurrency, x.ThroughputRatio, mark(x.ThroughputPass),
			x.RoundThroughputMin, x.RoundThroughputMax, x.P50Ratio)
		if x.P50Pass != nil {
			row += mark(*x.P50Pass) + "\t"
		}
		row += fmt.Sprintf("%.2f×\t", x.P99Ratio)
		if x.P99Pass != nil {
			row += mark(*x.P99Pass) + "\t"
		}
		row += fmt.Sprintf("%.2f×\t%+.0f\t%+.0f\t", x.CPUPerCallRatio, x.AllocsPerCallDiff, x.BytesPerCallDiff)
		fmt.Fprintln(tw, row)
	}
	_ = tw.Flush()
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func mark(pass bool) string {
	if pass {
		return "PASS"
	}
	return "MISS"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
