// Command bench measures tools/call of a template skill over streamable HTTP in two
// comparisons, each side by side in one process on 127.0.0.1 listeners:
//
//   - adapter: the adapter (internal/adapter) against a bare mcp-go server that renders
//     the same text with the same text/template;
//   - resources: resources/read of a 64 KiB Agent Skill file on the adapter against a
//     bare mcp-go server serving the same bytes;
//   - gateway: the skill re-exported through a gateway (a second adapter whose tool has
//     a Remote backend, as a SkillServer with spec.imports renders it) against a direct
//     call to the same remote (an adapter serving the skill; with -remote-delay, an
//     adapter whose tool is an HTTP backend that takes that long, as real tools do);
//   - reads: resources/read of a 64 KiB text resource and prompts/get of a template
//     prompt, each re-exported through a gateway (imported content) against the same
//     request made on the remote directly.
//
// At every concurrency level both sides of a comparison get the same number of mcp-go
// clients, one per worker, each initialized before anything is timed. After a warm-up
// of each, the measured time of a side (-duration) is cut into slices that alternate
// between the two sides, ABBA then BAAB and so on (-rounds such groups), so that
// drift on a small shared machine (other processes, frequency, GC) falls on both
// alike. A side's figures combine its slices: calls/s, p50 and p99 latency, process
// CPU and heap allocations per call, then the ratios against the targets: adapter/bare
// throughput ≥ 0.9× and p99 ≤ 1.2×; gateway/direct (calls and reads) p50 ≤ 1.5× and
// throughput ≥ 0.6×.
// The targets are printed, never asserted: the command exits 0 whatever the figures,
// and fails only when a server cannot be set up or does not answer the expected text.
//
//	go run ./hack/bench [-only adapter|gateway|resources|reads|all] [-duration 3s] [-rounds 6]
//	                    [-warmup 500ms] [-concurrency 1,16,64] [-json] [-auth]
//	                    [-remote-delay 1ms] [-hop] [-limits 512,512] [-tracing]
//	                    [-cpuprofile cpu.out] [-memprofile allocs.out]
//
// Each server's connections are served under the pprof label server=adapter,
// server=bare, server=remote or server=gateway (the gateway's connections to the
// remote included, as they are opened from its handlers), and the clients (their
// connection goroutines included) under side=client, so a -cpuprofile splits with
// `go tool pprof -tagfocus server=adapter`; what carries no label is the runtime's own
// work, mostly GC.
//
// Each comparison has its file (adapter.go, resources.go, gateway.go, hop.go, reads.go);
// servers.go, clients.go and report.go are what they share.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/tracing"
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

// targets bound the ratios candidate/baseline of a comparison; a zero bound is no
// target (the ratio is printed all the same).
type targets struct {
	minThroughput float64
	maxP50        float64
	maxP99        float64
}

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
	onlyAll       = "all"
	onlyAdapter   = "adapter"
	onlyGateway   = "gateway"
	onlyResources = "resources"
	onlyReads     = "reads"
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
	tracing     bool
}

// callLimits, set by -limits, are the call limits of every adapter the bench serves
// (spec.limits as the controller renders it); nil keeps the adapter's defaults.
var callLimits *adapterconfig.Limits

// slice is the measured part of one slice; settle is the unmeasured start of each.
func (o options) slice() time.Duration { return o.duration / time.Duration(2*o.rounds) }

func (o options) settle() time.Duration { return min(maxSettle, o.slice()/5) }

func (o options) comparisons() int {
	n := 0
	for _, name := range []string{onlyAdapter, onlyResources, onlyGateway} {
		if o.wants(name) {
			n++
		}
	}
	if o.wants(onlyReads) {
		n += 2 // resources/read and prompts/get
	}
	if o.hop && o.wants(onlyGateway) {
		n++
	}
	if o.hop && o.wants(onlyReads) {
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
	flag.StringVar(&o.only, "only", onlyAll, "which comparison to run: adapter (adapter/bare), gateway (gateway/direct), resources (resources/read adapter/bare), reads (resources/read and prompts/get gateway/direct) or all")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "measured time of each side of a comparison at each concurrency level")
	flag.IntVar(&o.rounds, "rounds", 6, "alternation groups per level (ABBA or BAAB); each side's -duration is cut into 2×rounds slices")
	flag.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured calls to each side before each level")
	flag.StringVar(&conc, "concurrency", "1,16,64", "comma-separated numbers of concurrent clients")
	flag.BoolVar(&o.jsonOut, "json", false, "print the results as JSON instead of tables")
	flag.BoolVar(&o.auth, "auth", false, "serve the adapter, the remote and the gateway with a bearer token (off by default, as an adapter without bearerTokenFile); every client sends it, the gateway from a header file")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the measurements to this file")
	flag.BoolVar(&o.hop, "hop", false, "with the gateway and reads comparisons, also measure a bare HTTP reverse proxy (net/http/httputil, no MCP work) in front of the remote against the direct call: the cost of the extra HTTP hop alone over the gateway's transport, the floor of a gateway served by net/http")
	flag.DurationVar(&o.remoteDelay, "remote-delay", 0, "gateway comparison only: the remote's tool is an HTTP backend that answers after this delay (e.g. 1ms) instead of a template, as most real tools take time")
	flag.BoolVar(&o.tracing, "tracing", false, "trace the adapters (not the bare server) with the OpenTelemetry SDK, every call sampled, spans batched to an exporter that drops them: what tracing costs when it is on (off, the default, is how adapters run without OTEL_* settings)")
	flag.StringVar(&o.memprofile, "memprofile", "", "write an allocation profile to this file at the end (pprof -sample_index=alloc_objects)")
	var limits string
	flag.StringVar(&limits, "limits", "", "call limits of every adapter served, as spec.limits: CONCURRENT,QUEUE (e.g. 512,512; queue wait 10s); empty keeps the defaults (64,64)")
	flag.Parse()
	if limits != "" {
		var concurrent, queue int
		if _, err := fmt.Sscanf(limits, "%d,%d", &concurrent, &queue); err != nil || concurrent < 1 || queue < 0 {
			return o, fmt.Errorf("-limits %q: want CONCURRENT,QUEUE such as 512,512", limits)
		}
		callLimits = &adapterconfig.Limits{ConcurrentCalls: concurrent, QueueLength: queue, QueueWait: adapterconfig.Duration{Duration: 10 * time.Second}}
	}
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if !slices.Contains([]string{onlyAll, onlyAdapter, onlyGateway, onlyResources, onlyReads}, o.only) {
		return o, fmt.Errorf("-only %q: use %s, %s, %s, %s or %s", o.only, onlyAdapter, onlyGateway, onlyResources, onlyReads, onlyAll)
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
	name    string // onlyAdapter, onlyResources, onlyGateway, onlyReads or nameHop
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

	if o.tracing {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		tracing.Use(tp)
		defer func() { _ = tp.Shutdown(context.Background()) }()
	}
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
		c, stop, err := adapterComparison(token, newTarget)
		if err != nil {
			return err
		}
		defer stop()
		comparisons = append(comparisons, c)
	}
	if o.wants(onlyResources) {
		c, stop, err := resourcesComparison(token, newTarget)
		if err != nil {
			return err
		}
		defer stop()
		comparisons = append(comparisons, c)
	}
	if o.wants(onlyGateway) {
		cs, stop, err := gatewayComparisons(o, token, newTarget)
		if err != nil {
			return err
		}
		defer stop()
		comparisons = append(comparisons, cs...)
	}
	if o.wants(onlyReads) {
		cs, stop, err := readsComparisons(o.hop, token, newTarget)
		if err != nil {
			return err
		}
		defer stop()
		comparisons = append(comparisons, cs...)
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
		Tracing:         o.tracing,
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
