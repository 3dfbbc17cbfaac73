package adapter

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// httpClientFrom is an HTTP client whose connections come from the loopback address
// ip, so that a test has two client addresses on one machine.
func httpClientFrom(ip string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
}

// thiefOnSession is a real mcp-go transport that resumes the session id of another
// caller, as someone who learnt the id would, and calls a tool on it (the mcp-go
// client itself would not call before initializing).
func thiefOnSession(t *testing.T, baseURL, sessionID string, opts ...transport.StreamableHTTPCOption) error {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(baseURL+adapterconfig.PathMCP, append(opts, transport.WithSession(sessionID))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(testkit.Context(t, testTimeout)); err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.SetProtocolVersion(protocol20250618)
	resp, err := tr.SendRequest(testkit.Context(t, testTimeout), transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(7)), Method: string(mcp.MethodToolsCall),
		Params: map[string]any{"name": "echo", "arguments": map[string]any{}},
	})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return fmt.Errorf("JSON-RPC error %d: %s", resp.Error.Code, resp.Error.Message)
	}
	return nil
}

// sessionRequest sends method to url with a client and headers, and returns status
// and body.
func sessionRequest(t *testing.T, hc *http.Client, method, url string, headers map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testkit.Context(t, testTimeout), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", protocol20250618)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

const echoCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`

// A stateful session is its opener's: another authenticated caller presenting its id
// (a real mcp-go client resuming it, or a raw POST or DELETE) is refused with 403 and
// session_forbidden, and the owner's session keeps working; the other caller's own
// session works.
func TestSessionIsBoundToTheAuthenticatedCaller(t *testing.T) {
	key := newClusterKey(t, "k1")
	cfg := identityConfig(t, key)
	cfg.Stateless = false
	cfg.Tools = append(cfg.Tools, templateTool("echo", objectSchema, "pong"))
	srv := serve(t, cfg)
	ownerToken, thiefToken := key.token(t, "agents", "owner", "room"), key.token(t, "agents", "thief", "room")

	owner := connect(t, srv.baseURL, protocol20250618, bearerHeader(ownerToken))
	id := owner.GetSessionId()
	if id == "" {
		t.Fatal("a stateful server gave the owner no session id")
	}

	err := thiefOnSession(t, srv.baseURL, id, transport.WithHTTPHeaders(bearerHeader(thiefToken)))
	if err == nil || !strings.Contains(err.Error(), "session_forbidden") {
		t.Fatalf("thief's call on the owner's session: err = %v, want session_forbidden", err)
	}
	headers := bearerHeader(thiefToken)
	headers["Mcp-Session-Id"] = id
	if status, body := sessionRequest(t, http.DefaultClient, http.MethodPost, srv.baseURL+adapterconfig.PathMCP, headers, echoCall); status != http.StatusForbidden || !strings.Contains(body, "session_forbidden") {
		t.Fatalf("raw POST on the owner's session = %d %s, want 403 session_forbidden", status, body)
	}
	if status, body := sessionRequest(t, http.DefaultClient, http.MethodDelete, srv.baseURL+adapterconfig.PathMCP, headers, ""); status != http.StatusForbidden {
		t.Fatalf("thief's DELETE of the owner's session = %d %s, want 403", status, body)
	}

	wantSuccess(t, callTool(t, owner, "echo", map[string]any{}), "pong")
	thief := connect(t, srv.baseURL, protocol20250618, bearerHeader(thiefToken))
	wantSuccess(t, callTool(t, thief, "echo", map[string]any{}), "pong")
	if thief.GetSessionId() == id {
		t.Fatal("two callers got the same session id")
	}
}

// Holders of two different static tokens are two callers.
func TestSessionIsBoundToTheStaticToken(t *testing.T) {
	cfg := configWith(adapterconfig.TransportStreamableHTTP, false, templateTool("echo", objectSchema, "pong"))
	srv := serve(t, cfg, WithBearerToken("token-of-owner\ntoken-of-thief"))
	owner := connect(t, srv.baseURL, protocol20250618, bearerHeader("token-of-owner"))
	err := thiefOnSession(t, srv.baseURL, owner.GetSessionId(), transport.WithHTTPHeaders(bearerHeader("token-of-thief")))
	if err == nil || !strings.Contains(err.Error(), "session_forbidden") {
		t.Fatalf("call with another static token on the owner's session: err = %v, want session_forbidden", err)
	}
	wantSuccess(t, callTool(t, owner, "echo", map[string]any{}), "pong")
}

// Without auth a session is bound to the client address that opened it.
func TestSessionIsBoundToTheClientAddressWithoutAuth(t *testing.T) {
	cfg := configWith(adapterconfig.TransportStreamableHTTP, false, templateTool("echo", objectSchema, "pong"))
	srv := serve(t, cfg)
	owner := connect(t, srv.baseURL, protocol20250618, nil)
	err := thiefOnSession(t, srv.baseURL, owner.GetSessionId(), transport.WithHTTPBasicClient(httpClientFrom("127.0.0.2")))
	if err == nil || !strings.Contains(err.Error(), "session_forbidden") {
		t.Fatalf("call from another address on the owner's session: err = %v, want session_forbidden", err)
	}
	// The same address resuming its own session is served.
	if err := thiefOnSession(t, srv.baseURL, owner.GetSessionId(), transport.WithHTTPBasicClient(httpClientFrom("127.0.0.1"))); err != nil {
		t.Fatalf("the owner's address resuming its session: %v", err)
	}
	// An id this server never made is not found (clients then initialize again).
	status, body := sessionRequest(t, http.DefaultClient, http.MethodPost, srv.baseURL+adapterconfig.PathMCP,
		map[string]string{"Mcp-Session-Id": "mcp-session-4f9c2a1e-0000-4000-8000-000000000000"}, echoCall)
	if status != http.StatusNotFound {
		t.Fatalf("POST with a session id this server did not make = %d %s, want 404", status, body)
	}
}

// On sse, posting into another address's session is refused with 403 before the
// message reaches the owner's stream.
func TestSSESessionIsBoundToItsOpener(t *testing.T) {
	cfg := configWith(adapterconfig.TransportSSE, false, templateTool("echo", objectSchema, "pong"))
	srv := serve(t, cfg)
	tr, err := transport.NewSSE(srv.baseURL + adapterconfig.PathSSE)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := startClient(t, client.NewClient(tr, client.WithProtocolVersion(protocol20250618)), protocol20250618)
	if err != nil {
		t.Fatal(err)
	}
	// The message endpoint the server gave the owner names its session.
	url := tr.GetEndpoint().String()
	if !strings.Contains(url, "sessionId=") {
		t.Fatalf("the sse endpoint %q names no session", url)
	}
	status, body := sessionRequest(t, httpClientFrom("127.0.0.2"), http.MethodPost, url, nil, echoCall)
	if status != http.StatusForbidden || !strings.Contains(body, "session_forbidden") {
		t.Fatalf("POST into another address's sse session = %d %s, want 403 session_forbidden", status, body)
	}
	wantSuccess(t, callTool(t, owner, "echo", map[string]any{}), "pong")
}

// Session ids carry their owner: the same identity always matches, another never.
func TestSessionOwnership(t *testing.T) {
	id := sessionIDFor("address:10.0.0.1")
	for _, tc := range []struct {
		id, identity string
		want         sessionOwnership
	}{
		{id, "address:10.0.0.1", sessionOwned},
		{id, "address:10.0.0.2", sessionForeign},
		{id + "x", "address:10.0.0.1", sessionForeign},
		{"mcp-session-0f0e", "address:10.0.0.1", sessionUnknown},
		{"0f0e.abc", "address:10.0.0.1", sessionUnknown},
	} {
		if got := ownershipOf(tc.id, tc.identity); got != tc.want {
			t.Errorf("ownershipOf(%q, %q) = %d, want %d", tc.id, tc.identity, got, tc.want)
		}
	}
}

// Whatever id a caller presents, it is its own only if it was made for that caller:
// an id made for one identity never passes for another, and a made id always passes
// for its owner.
func FuzzSessionOwnership(f *testing.F) {
	f.Add("mcp-session-0f.abc", "address:10.0.0.1", "address:10.0.0.2")
	f.Add(sessionIDFor("bearer:x"), "bearer:x", "bearer:y")
	f.Fuzz(func(t *testing.T, presented, owner, other string) {
		id := sessionIDFor(owner)
		if ownershipOf(id, owner) != sessionOwned {
			t.Fatalf("the id made for %q is not its own", owner)
		}
		if owner != other && ownershipOf(id, other) == sessionOwned {
			t.Fatalf("the id made for %q passes for %q", owner, other)
		}
		if ownershipOf(presented, owner) == sessionOwned && !strings.HasSuffix(presented, "."+ownerTag(owner)) {
			t.Fatalf("%q passes for %q without its tag", presented, owner)
		}
	})
}

// A session its owner terminated (DELETE) is gone: the next request on it is answered
// 404, as the transport's spec asks, so that a client knows to initialize again; a
// session of the same caller that was not terminated keeps working.
func TestTerminatedSessionIsAnswered404(t *testing.T) {
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, false, templateTool("echo", objectSchema, "ok")))
	url := srv.baseURL + adapterconfig.PathMCP
	open := func() string {
		req, _ := http.NewRequestWithContext(testkit.Context(t, testTimeout), http.MethodPost, url, strings.NewReader(initializeMessage(protocol20250618)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		id := resp.Header.Get("Mcp-Session-Id")
		if id == "" {
			t.Fatalf("initialize gave no session id (%s)", resp.Status)
		}
		return id
	}
	ended, kept := open(), open()
	if status, body := sessionRequest(t, http.DefaultClient, http.MethodPost, url, map[string]string{"Mcp-Session-Id": ended}, echoCall); status != http.StatusOK {
		t.Fatalf("a call on a live session: %d %s", status, body)
	}
	if status, body := sessionRequest(t, http.DefaultClient, http.MethodDelete, url, map[string]string{"Mcp-Session-Id": ended}, ""); status != http.StatusOK {
		t.Fatalf("DELETE of the session: %d %s", status, body)
	}
	if status, body := sessionRequest(t, http.DefaultClient, http.MethodPost, url, map[string]string{"Mcp-Session-Id": ended}, echoCall); status != http.StatusNotFound {
		t.Errorf("a call on the terminated session: %d %s, want 404", status, body)
	}
	if status, body := sessionRequest(t, http.DefaultClient, http.MethodPost, url, map[string]string{"Mcp-Session-Id": kept}, echoCall); status != http.StatusOK {
		t.Errorf("a call on the caller's other session: %d %s, want 200", status, body)
	}
}
