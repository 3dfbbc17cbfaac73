package adapter

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// A client that sends its body a byte at a time is cut off with 408, and the server
// keeps answering others.
func TestSlowRequestBodyIsCutOff(t *testing.T) {
	r := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("echo", objectSchema, "pong")),
		func(o *options) { o.bodyReadTimeout = 200 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.baseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{", adapterconfig.PathMCP)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled body answered %d, want 408", resp.StatusCode)
	}
	c := connect(t, r.baseURL, "", nil)
	wantSuccess(t, callTool(t, c, "echo", map[string]any{}), "pong")
}

// A body over the limit is refused with 413 without being read whole.
func TestOversizedRequestBodyIsRefused(t *testing.T) {
	r := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("echo", objectSchema, "pong")))
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"x":"` + strings.Repeat("a", maxMCPRequestBytes) + `"}}}`
	req, _ := http.NewRequest(http.MethodPost, r.baseURL+adapterconfig.PathMCP, strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body answered %d, want 413", resp.StatusCode)
	}
}

// On a real server, a call past the limits is answered server_busy while the running
// one completes.
func TestBusyServerRefusesCallsPastTheLimits(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
		_, _ = w.Write([]byte("slow done"))
	}))
	t.Cleanup(backend.Close)
	t.Cleanup(func() { close(release) })
	r := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, httpTool("slow", objectSchema, backend.URL, 10*time.Second, 1024)),
		func(o *options) { o.calls = admission.NewCallLimiter(1, 0, time.Millisecond) })
	c := connect(t, r.baseURL, "", nil)

	first := make(chan string, 1)
	go func() { first <- textOf(callTool(t, c, "slow", map[string]any{})) }()
	<-arrived
	wantToolError(t, callTool(t, c, "slow", map[string]any{}), "server_busy: ")
	release <- struct{}{}
	if got := <-first; got != "slow done" {
		t.Fatalf("running call = %q, want slow done", got)
	}
}

// slowBackend holds every call until the test ends, and counts them.
func slowBackend(t *testing.T) (url string, arrived chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	arrived = make(chan struct{}, 16)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
		_, _ = w.Write([]byte("slow done"))
	}))
	t.Cleanup(backend.Close)
	t.Cleanup(func() { close(release) })
	return backend.URL, arrived
}

// The config's limits (spec.limits) replace the defaults: with one call at once and
// none waiting, a second call is server_busy naming the pod's limit, and the rejection
// is counted by reason.
func TestConfiguredLimitsBoundCallsAndAreCounted(t *testing.T) {
	url, arrived := slowBackend(t)
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, httpTool("slow", objectSchema, url, 10*time.Second, 1024))
	cfg.Limits = &adapterconfig.Limits{ConcurrentCalls: 1, QueueLength: 0, QueueWait: adapterconfig.Duration{Duration: time.Second}}
	r := serve(t, cfg)
	c := connect(t, r.baseURL, "", nil)
	go func() { _, _ = c.CallTool(context.Background(), callRequest("slow")) }()
	<-arrived
	wantToolError(t, callTool(t, c, "slow", map[string]any{}), "server_busy: too many calls are waiting", "at most 1 calls run at once in this pod")
	if m := metricsText(t, r.Server); !strings.Contains(m, `cantus_adapter_rejected_calls_total{reason="queue_full"} 1`) {
		t.Errorf("metrics lack the queue_full rejection:\n%s", grepLines(m, "rejected"))
	}
}

// A caller past its rate gets HTTP 429 with Retry-After before the call starts (the
// backend never sees it), from a real mcp-go client too; every request counts
// (initialize, the calls, a listing; not the initialized notification); another caller
// has its own bucket; the rejection is counted.
func TestPerCallerRateAnswers429BeforeTheCall(t *testing.T) {
	var calls atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		_, _ = w.Write([]byte("done"))
	}))
	t.Cleanup(backend.Close)
	key := newClusterKey(t, "k1")
	cfg := identityConfig(t, key)
	cfg.Tools = append(cfg.Tools, httpTool("fetch", objectSchema, backend.URL, 10*time.Second, 1024))
	cfg.Limits = &adapterconfig.Limits{ConcurrentCalls: 64, QueueLength: 64, QueueWait: adapterconfig.Duration{Duration: time.Second},
		PerCaller: &adapterconfig.CallerRate{CallsPerSecond: 0.1, Burst: 3}}
	r := serve(t, cfg)
	hasty, patient := bearerHeader(key.token(t, "agents", "hasty", "room")), bearerHeader(key.token(t, "agents", "patient", "room"))

	c := connect(t, r.baseURL, protocol20250618, hasty)
	wantSuccess(t, callTool(t, c, "fetch", map[string]any{}), "done")
	wantSuccess(t, callTool(t, c, "fetch", map[string]any{}), "done")
	if _, err := c.CallTool(testkit.Context(t, testTimeout), callRequest("fetch")); err == nil || !strings.Contains(err.Error(), "rate_limited: ") {
		t.Errorf("the mcp-go client's third call: err = %v, want rate_limited", err)
	}
	headers := map[string]string{"Mcp-Protocol-Version": protocol20250618}
	for k, v := range hasty {
		headers[k] = v
	}
	reply := postRPC(t, r.baseURL+adapterconfig.PathMCP, headers, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"fetch","arguments":{}}}`)
	if reply.status != http.StatusTooManyRequests || reply.header.Get("Retry-After") == "" ||
		!strings.Contains(string(reply.body), `"id":9`) || !strings.Contains(string(reply.body), "rate_limited:") {
		t.Errorf("call over the rate = %d Retry-After=%q %s, want 429 with Retry-After and a rate_limited JSON-RPC error for id 9",
			reply.status, reply.header.Get("Retry-After"), reply.body)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("the backend saw %d calls, want 2: a refused call must not start", got)
	}
	if _, err := c.ListTools(testkit.Context(t, testTimeout), mcp.ListToolsRequest{}); err == nil || !strings.Contains(err.Error(), "rate_limited: ") {
		t.Errorf("tools/list past the rate: err = %v, want rate_limited", err)
	}
	other := connect(t, r.baseURL, protocol20250618, patient)
	wantSuccess(t, callTool(t, other, "fetch", map[string]any{}), "done")
	if m := metricsText(t, r.Server); !strings.Contains(m, `cantus_adapter_rejected_calls_total{reason="rate_limited"} 3`) {
		t.Errorf("metrics lack the 3 rate_limited rejections:\n%s", grepLines(m, "rejected"))
	}
}

func callRequest(name string) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = map[string]any{}
	return req
}
