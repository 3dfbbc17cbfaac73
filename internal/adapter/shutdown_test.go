package adapter

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// heldBackend holds each request until the test releases them, then answers "done";
// it reports each arrival, so a test knows when calls are in flight.
type heldBackend struct {
	url      string
	arrived  chan struct{}
	released chan struct{}
	release  func()
}

func newHeldBackend(t *testing.T) *heldBackend {
	t.Helper()
	b := &heldBackend{arrived: make(chan struct{}, 100), released: make(chan struct{})}
	b.release = sync.OnceFunc(func() { close(b.released) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice when the adapter hangs up.
		_, _ = io.Copy(io.Discard, r.Body)
		b.arrived <- struct{}{}
		select {
		case <-b.released:
			_, _ = w.Write([]byte("done"))
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(b.release) // runs first: no call stays held past the test
	b.url = srv.URL
	return b
}

func (b *heldBackend) waitArrivals(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		testkit.Receive(t, testTimeout, fmt.Sprintf("call %d of %d to reach the backend", i+1, n), b.arrived)
	}
}

type callOutcome struct {
	result *mcp.CallToolResult
	err    error
}

func callInBackground(c *client.Client, name string) <-chan callOutcome {
	out := make(chan callOutcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = map[string]any{}
		res, err := c.CallTool(ctx, req)
		out <- callOutcome{res, err}
	}()
	return out
}

// newCallStatus posts a fresh tools/call of tool to the transport's MCP endpoint and
// returns the status and body.
func newCallStatus(t *testing.T, baseURL, transportName, tool string) (int, string) {
	t.Helper()
	url := baseURL + adapterconfig.PathMCP
	if transportName == adapterconfig.TransportSSE {
		url = baseURL + adapterconfig.PathMessage + "?sessionId=any"
	}
	reply := postRPC(t, url, map[string]string{"MCP-Protocol-Version": protocol20250618},
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`","arguments":{}}}`)
	return reply.status, string(reply.body)
}

// openStream opens the transport's long-lived GET stream and returns a channel closed
// when the server ends it.
func openStream(t *testing.T, baseURL, transportName string) <-chan struct{} {
	t.Helper()
	url := baseURL + adapterconfig.PathMCP
	if transportName == adapterconfig.TransportSSE {
		url = baseURL + adapterconfig.PathSSE
	}
	req, err := http.NewRequestWithContext(testkit.Context(t, testTimeout), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protocol20250618)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("open stream: status %d", resp.StatusCode)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	return ended
}

func TestServe_ShutdownFinishesInFlightCallsAndRefusesNewOnes(t *testing.T) {
	for _, transportName := range []string{adapterconfig.TransportStreamableHTTP, adapterconfig.TransportSSE} {
		t.Run(transportName, func(t *testing.T) {
			backend := newHeldBackend(t)
			srv := serve(t, configWith(transportName, true, httpTool("slow", objectSchema, backend.url, 5*time.Second, 1024)),
				WithShutdownGrace(10*time.Second))
			var c *client.Client
			if transportName == adapterconfig.TransportSSE {
				c = connectSSE(t, srv.baseURL, protocol20250618)
			} else {
				c = connect(t, srv.baseURL, protocol20250618, nil)
			}
			streamEnded := openStream(t, srv.baseURL, transportName)

			inFlight := callInBackground(c, "slow")
			backend.waitArrivals(t, 1)
			stopped := make(chan error, 1)
			go func() { stopped <- srv.stop() }()

			testkit.EventuallyTrue(t, testTimeout, "/readyz to fail", func() bool {
				status, _ := getStatus(t, srv.baseURL+adapterconfig.PathReadyz)
				return status == http.StatusServiceUnavailable
			})
			if status, _ := getStatus(t, srv.baseURL+adapterconfig.PathHealthz); status != http.StatusOK {
				t.Errorf("/healthz = %d during shutdown, want 200", status)
			}
			status, body := newCallStatus(t, srv.baseURL, transportName, "slow")
			if status != http.StatusServiceUnavailable || !strings.Contains(body, `"id":7`) || !strings.Contains(body, "shutting down") {
				t.Errorf("new call during shutdown = %d %s, want 503 with a JSON-RPC error for id 7", status, body)
			}
			backend.release()

			outcome := testkit.Receive(t, testTimeout, "the in-flight call", inFlight)
			if outcome.err != nil {
				t.Fatalf("in-flight call failed: %v", outcome.err)
			}
			wantSuccess(t, outcome.result, "done")
			if err := testkit.Receive(t, testTimeout, "Serve to return", stopped); err != nil {
				t.Fatalf("Serve = %v, want nil after a clean shutdown", err)
			}
			testkit.Receive(t, testTimeout, "the open stream to end", streamEnded)
		})
	}
}

func TestServe_DrainDelayKeepsTakingCallsThenRefuses(t *testing.T) {
	backend := newHeldBackend(t)
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true,
		httpTool("slow", objectSchema, backend.url, 5*time.Second, 1024),
		templateTool("quick", objectSchema, "quick")),
		WithDrainDelay(600*time.Millisecond), WithShutdownGrace(10*time.Second))
	c := connect(t, srv.baseURL, protocol20250618, nil)
	// A call in flight keeps the server up after the drain delay, so refusals can be seen.
	inFlight := callInBackground(c, "slow")
	backend.waitArrivals(t, 1)

	stopped := make(chan error, 1)
	go func() { stopped <- srv.stop() }()
	testkit.EventuallyTrue(t, testTimeout, "/readyz to fail", func() bool {
		status, _ := getStatus(t, srv.baseURL+adapterconfig.PathReadyz)
		return status == http.StatusServiceUnavailable
	})
	wantSuccess(t, callTool(t, c, "quick", map[string]any{}), "quick")

	testkit.EventuallyTrue(t, testTimeout, "new calls to be refused after the drain delay", func() bool {
		status, _ := newCallStatus(t, srv.baseURL, adapterconfig.TransportStreamableHTTP, "quick")
		return status == http.StatusServiceUnavailable
	})
	backend.release()
	if outcome := testkit.Receive(t, testTimeout, "the in-flight call", inFlight); outcome.err != nil {
		t.Fatalf("in-flight call failed: %v", outcome.err)
	}
	if err := testkit.Receive(t, testTimeout, "Serve to return", stopped); err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
}

// A client whose keep-alive connection was idle when shutdown began can still send its
// next call on it during the drain delay: it is answered, with Connection: close, instead
// of finding the connection cut (a POST cannot be retried by the client).
func TestServe_DrainAnswersOnIdleConnectionsThenClosesThem(t *testing.T) {
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("quick", objectSchema, "quick")),
		WithDrainDelay(2*time.Second), WithShutdownGrace(10*time.Second))
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.baseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reader := bufio.NewReader(conn)
	call := func() *http.Response {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"quick","arguments":{}}}`
		req, _ := http.NewRequest(http.MethodPost, srv.baseURL+adapterconfig.PathMCP, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", protocol20250618)
		if err := req.Write(conn); err != nil {
			t.Fatalf("write the call: %v", err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(testTimeout))
		resp, err := http.ReadResponse(reader, req)
		if err != nil {
			t.Fatalf("read the answer on the same connection: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := call(); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("before shutdown: %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}

	stopped := make(chan error, 1)
	go func() { stopped <- srv.stop() }()
	testkit.EventuallyTrue(t, testTimeout, "/readyz to fail", func() bool {
		status, _ := getStatus(t, srv.baseURL+adapterconfig.PathReadyz)
		return status == http.StatusServiceUnavailable
	})
	if resp := call(); resp.StatusCode != http.StatusOK || !resp.Close {
		t.Errorf("during the drain: %d, close %v; want 200 with Connection: close", resp.StatusCode, resp.Close)
	}
	if err := testkit.Receive(t, testTimeout, "Serve to return", stopped); err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
}

func TestServe_ShutdownGraceBoundsInFlightCalls(t *testing.T) {
	backend := newHeldBackend(t)
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, httpTool("slow", objectSchema, backend.url, 30*time.Second, 1024)),
		WithShutdownGrace(300*time.Millisecond))
	c := connect(t, srv.baseURL, protocol20250618, nil)

	inFlight := callInBackground(c, "slow")
	backend.waitArrivals(t, 1)
	began := time.Now()
	err := srv.stop()
	took := time.Since(began)

	if err == nil || !strings.Contains(err.Error(), "shutdown grace 300ms expired with 1 calls in flight") {
		t.Fatalf("Serve = %v, want the expired grace reported", err)
	}
	if took > 3*time.Second {
		t.Fatalf("shutdown took %s with a 300ms grace", took)
	}
	if outcome := testkit.Receive(t, testTimeout, "the cut-off call to return", inFlight); outcome.err == nil && !outcome.result.IsError {
		t.Fatalf("cut-off call succeeded: %q", textOf(outcome.result))
	}
}

func TestServe_RefusesToServeTwice(t *testing.T) {
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x")))
	testkit.EventuallyTrue(t, testTimeout, "the first Serve to answer", func() bool {
		status, _ := getStatus(t, srv.baseURL+adapterconfig.PathHealthz)
		return status == http.StatusOK
	})
	err := srv.Serve(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "already serving") {
		t.Fatalf("second Serve = %v, want refused", err)
	}
}

func TestNewServer_RejectsBadShutdownOptions(t *testing.T) {
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x"))
	tests := []struct {
		name string
		opt  Option
		want string
	}{
		{"zero grace", WithShutdownGrace(0), "shutdown grace 0s must be greater than 0"},
		{"negative drain delay", WithDrainDelay(-time.Second), "drain delay -1s must not be negative"},
		{"empty token", WithBearerToken("  "), "bearer token is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewServer(cfg, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewServer = %v, want %q", err, tt.want)
			}
		})
	}
}
