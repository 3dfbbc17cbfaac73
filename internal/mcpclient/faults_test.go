package mcpclient_test

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapter"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"

	// The tests use only the exported API: they live outside the package because
	// they start a real cantus adapter, which itself imports this package.
	. "github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// One test per fault: each asserts the Reason and the mcp_handshake_failed: prefix.

func TestFaultConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	for _, transport := range []string{TransportStreamableHTTP, TransportSSE} {
		_, err := Probe(testkit.Context(t, testBudget), Options{URL: "http://" + addr + "/mcp", Transport: transport})
		e := requireError(t, err, ReasonConnectionRefused)
		if !strings.Contains(e.Detail, addr) {
			t.Errorf("detail %q does not name %s", e.Detail, addr)
		}
	}
}

// TestFaultTimeout: a listener that accepts and never answers; the probe gives up at
// its Timeout, not later.
func TestFaultTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // read nothing, answer nothing
		}
	}()
	const timeout = 700 * time.Millisecond
	for _, transport := range []string{TransportStreamableHTTP, TransportSSE} {
		start := time.Now()
		_, err := Probe(context.Background(), Options{URL: "http://" + ln.Addr().String() + "/mcp", Transport: transport, Timeout: timeout})
		took := time.Since(start)
		requireReason(t, err, ReasonTimeout)
		if took < timeout-50*time.Millisecond || took > timeout+time.Second {
			t.Errorf("%s: Probe returned after %s, want about %s", transport, took, timeout)
		}
		t.Logf("%s: returned after %s (Timeout %s)", transport, took.Round(time.Millisecond), timeout)
	}
}

// TestFaultHTTP500: and a header value echoed in the error body never reaches the
// error.
func TestFaultHTTP500(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "backend exploded while checking "+r.Header.Get("X-Api-Key"), http.StatusInternalServerError)
	}))
	t.Cleanup(ts.Close)
	const secret = "s3cr3t-api-key-value"
	_, err := Probe(testkit.Context(t, testBudget), Options{URL: ts.URL + "/mcp", Headers: map[string]string{"X-Api-Key": secret}})
	e := requireError(t, err, ReasonHTTPError)
	if !strings.Contains(e.Detail, "HTTP 500 Internal Server Error from POST /mcp") {
		t.Errorf("detail %q", e.Detail)
	}
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("the header value was not scrubbed: %q", err)
	}
}

// TestFaultUnauthorized: the adapter with a bearer token; a wrong token is
// Unauthorized (and does not show), the right one succeeds.
func TestFaultUnauthorized(t *testing.T) {
	t.Parallel()
	const token = "the-right-token-123"
	for _, transport := range []string{adapterconfig.TransportStreamableHTTP, adapterconfig.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			url := startAdapter(t, transport, false, nil, adapter.WithBearerToken(token))
			const wrong = "Bearer wrong-token-456"
			_, err := Probe(testkit.Context(t, testBudget), Options{URL: url, Transport: transport, Headers: map[string]string{"Authorization": wrong}})
			e := requireError(t, err, ReasonUnauthorized)
			if !strings.Contains(e.Detail, "HTTP 401") || strings.Contains(err.Error(), "wrong-token-456") {
				t.Errorf("detail %q", e.Detail)
			}
			res := mustProbe(t, Options{URL: url, Transport: transport, Headers: map[string]string{"Authorization": "Bearer " + token}})
			if len(res.Tools) != len(adapterTools) {
				t.Errorf("tools %v", toolNames(res.Tools))
			}
		})
	}
}

// TestFaultInvalidJSON: answers that are not JSON, or JSON but not JSON-RPC.
func TestFaultInvalidJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, contentType, body string }{
		{"truncated-json", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":`},
		{"not-json", "application/json", `hello, world`},
		{"json-not-jsonrpc", "application/json", `{"status":"ok"}`},
		{"event-stream-garbage", "text/event-stream", "event: message\ndata: {not json}\n\n"},
		{"jsonrpc-not-mcp", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"hello":"world"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(ts.Close)
			_, err := Probe(testkit.Context(t, testBudget), Options{URL: ts.URL + "/mcp"})
			requireReason(t, err, ReasonProtocolError)
		})
	}
}

// TestFaultNotMCP: a plain web server with an HTML page, over both transports.
func TestFaultNotMCP(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>"))
	}))
	t.Cleanup(ts.Close)
	for _, transport := range []string{TransportStreamableHTTP, TransportSSE} {
		_, err := Probe(testkit.Context(t, testBudget), Options{URL: ts.URL + "/", Transport: transport})
		e := requireError(t, err, ReasonProtocolError)
		if !strings.Contains(e.Detail, "text/html") {
			t.Errorf("detail %q does not name the content type", e.Detail)
		}
	}
}

// TestFaultTLSUnknownCA: a TLS server whose CA the probe does not know; with that CA
// as the bundle the same server succeeds.
func TestFaultTLSUnknownCA(t *testing.T) {
	t.Parallel()
	ts := httptest.NewTLSServer(&fakeMCP{tools: numberedTools(2)})
	t.Cleanup(ts.Close)
	_, err := Probe(testkit.Context(t, testBudget), Options{URL: ts.URL + "/mcp"})
	e := requireError(t, err, ReasonTLSError)
	if !strings.Contains(e.Detail, "unknown authority") {
		t.Errorf("detail %q", e.Detail)
	}
	bundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	res := mustProbe(t, Options{URL: ts.URL + "/mcp", CABundle: bundle})
	if len(res.Tools) != 2 {
		t.Errorf("tools %v", toolNames(res.Tools))
	}
	// An https URL for a plain HTTP server.
	plain := httptest.NewServer(&fakeMCP{})
	t.Cleanup(plain.Close)
	_, err = Probe(testkit.Context(t, testBudget), Options{URL: strings.Replace(plain.URL, "http://", "https://", 1) + "/mcp"})
	requireReason(t, err, ReasonTLSError)
	// A bundle that holds no certificate is a TLSError too, before any connection.
	_, err = Probe(testkit.Context(t, testBudget), Options{URL: ts.URL + "/mcp", CABundle: []byte("not a pem")})
	requireReason(t, err, ReasonTLSError)
}

// TestFaultRedirectRefused: a redirect to another host that CheckRedirect refuses;
// the target receives no request at all.
func TestFaultRedirectRefused(t *testing.T) {
	t.Parallel()
	var targetHits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
		(&fakeMCP{}).ServeHTTP(w, r)
	}))
	t.Cleanup(target.Close)
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	elsewhere := "http://localhost:" + port + "/mcp" // another host name, same machine
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)

	var checked []string
	policy := func(u *url.URL) error {
		checked = append(checked, u.String())
		if u.Hostname() != "127.0.0.1" {
			return fmt.Errorf("host %s is not allowlisted", u.Hostname())
		}
		return nil
	}
	for _, transport := range []string{TransportStreamableHTTP, TransportSSE} {
		_, err := Probe(testkit.Context(t, testBudget), Options{URL: redirector.URL + "/mcp", Transport: transport, CheckRedirect: policy})
		e := requireError(t, err, ReasonRedirectRefused)
		if !strings.Contains(e.Detail, "localhost") || !strings.Contains(e.Detail, "not allowlisted") {
			t.Errorf("detail %q", e.Detail)
		}
	}
	if n := targetHits.Load(); n != 0 {
		t.Errorf("the refused redirect target received %d request(s), want none", n)
	}
	if len(checked) != 2 || checked[0] != elsewhere {
		t.Errorf("CheckRedirect saw %q", checked)
	}
}

// TestRedirectFollowed: an allowed redirect keeps the POST and its body; the headers
// (possibly secrets) go to the configured host only.
func TestRedirectFollowed(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	target := httptest.NewServer(rec.wrap(&fakeMCP{tools: numberedTools(2)}))
	t.Cleanup(target.Close)
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	for _, tc := range []struct {
		name, location string
		wantHeader     bool
	}{
		{"same-host", target.URL + "/mcp", true},
		{"other-host", "http://localhost:" + port + "/mcp", false},
	} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, tc.location, http.StatusMovedPermanently)
		}))
		t.Cleanup(redirector.Close)
		before := rec.count()
		var dialed []string // every connection goes through Dial, after the redirect too
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			dialed = append(dialed, addr)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		res := mustProbe(t, Options{URL: redirector.URL + "/old", Headers: map[string]string{"X-Token": "tok-123456"},
			CheckRedirect: func(*url.URL) error { return nil }, Dial: dial})
		targetURL, _ := url.Parse(tc.location)
		if !slices.Contains(dialed, redirector.Listener.Addr().String()) || !slices.Contains(dialed, targetURL.Host) {
			t.Errorf("%s: Dial saw %q, want the redirector and %s", tc.name, dialed, targetURL.Host)
		}
		if len(res.Tools) != 2 {
			t.Errorf("%s: tools %v", tc.name, toolNames(res.Tools))
		}
		for _, r := range rec.all()[before:] {
			if r.method != http.MethodPost {
				t.Errorf("%s: the target got a %s, want the POST kept", tc.name, r.method)
			}
			if got := r.header.Get("X-Token") != ""; got != tc.wantHeader {
				t.Errorf("%s: header sent to %s = %v, want %v", tc.name, tc.location, got, tc.wantHeader)
			}
		}
	}
}

// TestFaultTooManyTools: 30 tools in pages of 10 against MaxTools 25.
func TestFaultTooManyTools(t *testing.T) {
	t.Parallel()
	url := startFake(t, &fakeMCP{tools: numberedTools(30), pageSize: 10}, nil)
	_, err := Probe(testkit.Context(t, testBudget), Options{URL: url, MaxTools: 25})
	e := requireError(t, err, ReasonResponseTooLarge)
	if !strings.Contains(e.Detail, "more than 25 tools") {
		t.Errorf("detail %q", e.Detail)
	}
}

// TestFaultMessageTooLarge: a tools/list answer over MaxMessageBytes, as JSON, as an
// event stream, and on the SSE transport's stream.
func TestFaultMessageTooLarge(t *testing.T) {
	t.Parallel()
	big := numberedTools(1)
	big[0]["description"] = strings.Repeat("x", 64<<10)
	for _, sse := range []bool{false, true} {
		url := startFake(t, &fakeMCP{tools: big, sse: sse}, nil)
		_, err := Probe(testkit.Context(t, testBudget), Options{URL: url, MaxMessageBytes: 16 << 10})
		requireReason(t, err, ReasonResponseTooLarge)
	}
	// The adapter's SSE transport, with a limit its tools/list answer exceeds.
	url := startAdapter(t, adapterconfig.TransportSSE, false, nil)
	_, err := Probe(testkit.Context(t, testBudget), Options{URL: url, Transport: TransportSSE, MaxMessageBytes: 300})
	requireReason(t, err, ReasonResponseTooLarge)
}

// TestFaultConnectionDropped: the server sends the headers and 12 bytes of a 200-byte
// answer, then closes; and a server that closes before answering at all.
func TestFaultConnectionDropped(t *testing.T) {
	t.Parallel()
	hijack := func(write string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			_, _ = buf.WriteString(write)
			_ = buf.Flush()
			_ = conn.Close()
		}
	}
	midAnswer := httptest.NewServer(hijack("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n" + `{"jsonrpc":"`))
	t.Cleanup(midAnswer.Close)
	_, err := Probe(testkit.Context(t, testBudget), Options{URL: midAnswer.URL + "/mcp"})
	e := requireError(t, err, ReasonConnectionDropped)
	if !strings.Contains(e.Detail, "mid-answer after 12 bytes") {
		t.Errorf("detail %q", e.Detail)
	}

	beforeAnswer := httptest.NewServer(hijack(""))
	t.Cleanup(beforeAnswer.Close)
	_, err = Probe(testkit.Context(t, testBudget), Options{URL: beforeAnswer.URL + "/mcp"})
	requireReason(t, err, ReasonConnectionDropped)

	// An event stream that ends (without an event id to resume from) before the
	// answer.
	streamEnds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n"))
	}))
	t.Cleanup(streamEnds.Close)
	_, err = Probe(testkit.Context(t, testBudget), Options{URL: streamEnds.URL + "/mcp"})
	requireReason(t, err, ReasonConnectionDropped)
}

// TestFaultHeadersTooLarge: an answer whose headers do not end, to the probe and to the
// gateway's client, over plain HTTP (the client's own pool) and over https
// (net/http's Transport).
func TestFaultHeadersTooLarge(t *testing.T) {
	t.Parallel()
	endless := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer func() { _ = conn.Close() }()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nX-Filler: ")
		for range 64 { // 2 MiB of one header unless the client stops reading
			if _, err := buf.WriteString(strings.Repeat("a", 32<<10)); err != nil || buf.Flush() != nil {
				return
			}
		}
	})
	plain := httptest.NewServer(endless)
	t.Cleanup(plain.Close)
	tlsServer := httptest.NewTLSServer(endless)
	t.Cleanup(tlsServer.Close)
	bundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsServer.Certificate().Raw})
	for _, endpoint := range []string{plain.URL + "/mcp", tlsServer.URL + "/mcp"} {
		_, err := Probe(testkit.Context(t, testBudget), Options{URL: endpoint, CABundle: bundle})
		requireReason(t, err, ReasonResponseTooLarge)

		c, err := New(ClientOptions{URL: endpoint, CABundle: bundle})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Connect(testkit.Context(t, testBudget))
		var e *Error
		if !errors.As(err, &e) || e.Reason != ReasonResponseTooLarge {
			t.Errorf("the gateway's client against %s: %v, want reason %s", endpoint, err, ReasonResponseTooLarge)
		}
	}
}

func TestFaultInitializeFailed(t *testing.T) {
	t.Parallel()
	url := startFake(t, &fakeMCP{initializeError: &ErrorObject{Code: -32602, Message: "Unsupported protocol version"}}, nil)
	_, err := Probe(testkit.Context(t, testBudget), Options{URL: url})
	e := requireError(t, err, ReasonInitializeFailed)
	if !strings.Contains(e.Detail, "-32602 Unsupported protocol version") {
		t.Errorf("detail %q", e.Detail)
	}
}

func TestFaultToolsListFailed(t *testing.T) {
	t.Parallel()
	url := startFake(t, &fakeMCP{toolsListError: &ErrorObject{Code: -32603, Message: "database down"}}, nil)
	_, err := Probe(testkit.Context(t, testBudget), Options{URL: url})
	e := requireError(t, err, ReasonToolsListFailed)
	if !strings.Contains(e.Detail, "database down") {
		t.Errorf("detail %q", e.Detail)
	}
}

// TestFaultUnsupportedVersion: a server that picks a revision this client does not
// speak.
func TestFaultUnsupportedVersion(t *testing.T) {
	t.Parallel()
	url := startFake(t, &fakeMCP{version: "2023-01-01"}, nil)
	_, err := Probe(testkit.Context(t, testBudget), Options{URL: url})
	requireReason(t, err, ReasonProtocolError)
}

func TestFaultDNSError(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Probe(ctx, Options{URL: "http://no-such-host.invalid/mcp", Timeout: 5 * time.Second})
	e := requireError(t, err, ReasonDNSError)
	if !strings.Contains(e.Detail, "no-such-host.invalid") {
		t.Errorf("detail %q", e.Detail)
	}
}

// TestFaultSSEEndpointOtherOrigin: an SSE stream that names a message endpoint on
// another origin is refused before anything is POSTed there.
func TestFaultSSEEndpointOtherOrigin(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: endpoint\ndata: http://169.254.169.254/message?sessionId=1\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(ts.Close)
	_, err := Probe(testkit.Context(t, testBudget), Options{URL: ts.URL + "/sse", Transport: TransportSSE})
	requireReason(t, err, ReasonProtocolError)
}

func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	for _, opts := range []Options{
		{URL: "file:///etc/passwd"},
		{URL: "http://user:pass@example.com/mcp"},
		{URL: "http:///mcp"},
		{URL: "http://example.com/mcp", Transport: "stdio"},
		{URL: "http://example.com/mcp", Headers: map[string]string{"X-Bad": "line\nbreak-secret"}},
	} {
		_, err := Probe(context.Background(), opts)
		e := requireError(t, err, ReasonInvalidConfig)
		if strings.Contains(e.Error(), "pass") || strings.Contains(e.Error(), "break-secret") {
			t.Errorf("detail %q shows a credential", e.Detail)
		}
	}
}
