package adapter

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Calls past the concurrency limit wait for a slot; past the waiting limit, or after
// the wait, they are refused with server_busy instead of piling up.
func TestCallLimiterBoundsRunningAndWaitingCalls(t *testing.T) {
	l := newCallLimiter(1, 1, 200*time.Millisecond)
	ctx := context.Background()
	if r := l.acquire(ctx); r != nil {
		t.Fatalf("first call refused: %s", textOf(r))
	}
	waited := make(chan string, 1)
	go func() {
		if r := l.acquire(ctx); r != nil {
			waited <- textOf(r)
			return
		}
		waited <- "admitted"
	}()
	// Let the second call start waiting, then a third finds the queue full.
	deadline := time.Now().Add(5 * time.Second)
	for l.waiting.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	r := l.acquire(ctx)
	if r == nil || !strings.HasPrefix(textOf(r), "server_busy: too many calls are waiting") {
		t.Fatalf("third call = %v, want server_busy (queue full)", r)
	}
	if got := <-waited; !strings.HasPrefix(got, "server_busy: no call slot freed within") {
		t.Fatalf("waiting call = %q, want server_busy after the wait", got)
	}
	l.release()
	if r := l.acquire(ctx); r != nil {
		t.Fatalf("a freed slot was not taken: %s", textOf(r))
	}
}

// A client that sends its body a byte at a time is cut off with 408, and the server
// keeps answering others.
func TestSlowRequestBodyIsCutOff(t *testing.T) {
	r := serve(t, configWith(TransportStreamableHTTP, true, templateTool("echo", objectSchema, "pong")),
		func(o *options) { o.bodyReadTimeout = 200 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.baseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{", PathMCP)
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
	r := serve(t, configWith(TransportStreamableHTTP, true, templateTool("echo", objectSchema, "pong")))
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"x":"` + strings.Repeat("a", maxMCPRequestBytes) + `"}}}`
	req, _ := http.NewRequest(http.MethodPost, r.baseURL+PathMCP, strings.NewReader(big))
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
	r := serve(t, configWith(TransportStreamableHTTP, true, httpTool("slow", objectSchema, backend.URL, 10*time.Second, 1024)),
		func(o *options) { o.calls = newCallLimiter(1, 0, time.Millisecond) })
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
