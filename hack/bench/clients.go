package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The clients: one side's pool of initialized mcp-go clients, the slices it runs, and
// what a slice measures (calls, latency, CPU, allocations).

// target is one side of a comparison: an endpoint and the tool called there (or, with
// uri, the resource read there; with prompt, the prompt got there).
type target struct {
	name    string
	url     string
	tool    string
	uri     string
	prompt  string
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

// request is the one request the side repeats, built once: tools/call of its tool,
// resources/read of its uri or prompts/get of its prompt; it checks the answer.
func (t target) request() func(*client.Client) error {
	if t.uri != "" {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = t.uri
		return func(c *client.Client) error { return readOnce(c, req) }
	}
	if t.prompt != "" {
		req := mcp.GetPromptRequest{}
		req.Params.Name = t.prompt
		req.Params.Arguments = map[string]string{"name": argName}
		return func(c *client.Client) error { return getPromptOnce(c, req) }
	}
	req := callRequest(t.tool)
	return func(c *client.Client) error { return callOnce(c, req) }
}

func (t target) check() error {
	c, err := t.connect()
	if err != nil {
		return fmt.Errorf("%s at %s: %w", t.name, t.url, err)
	}
	defer c.Close()
	if err := t.request()(c); err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
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

// slice has every client repeat its request for settle+window, and keeps the calls that
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
			request := p.t.request()
			w := &results[i]
			for {
				s := time.Now()
				if !s.Before(until) {
					return
				}
				err := request(c)
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
