package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The report: the environment, each side's figures and the ratios against the targets,
// as tables or JSON.

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
	Tracing         bool               `json:"tracing"`
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
	traced := "off"
	if r.Tracing {
		traced = "on (adapters sample every call; spans batched to a discarding exporter)"
	}
	fmt.Fprintf(out, "tools/call (resources/read and prompts/get where the title says) over streamable HTTP (stateless, protocol %s) on 127.0.0.1, auth %s, tracing %s\n",
		protocolVersion, auth, traced)
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
