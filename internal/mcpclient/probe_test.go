package mcpclient_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"

	// The tests use only the exported API: they live outside the package because
	// they start a real cantus adapter, which itself imports this package.
	. "github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// TestProbeAdapter probes the project's own adapter over both transports (and both
// session modes of streamable HTTP): server info, negotiated version, capabilities,
// the tools with their schemas unchanged, the protocol header after initialize and the
// session DELETE at the end.
func TestProbeAdapter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		transport string
		stateless bool
	}{
		{"streamable-http/stateless", adapterconfig.TransportStreamableHTTP, true},
		{"streamable-http/stateful", adapterconfig.TransportStreamableHTTP, false},
		{"sse", adapterconfig.TransportSSE, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			url := startAdapter(t, tc.transport, tc.stateless, rec)
			res := mustProbe(t, Options{URL: url, Transport: tc.transport})

			if res.ServerName != "adapter-under-probe" || res.ServerVersion != "1.2.3" || res.Instructions != "Probe me." {
				t.Errorf("server info = %q %q %q", res.ServerName, res.ServerVersion, res.Instructions)
			}
			if res.ProtocolVersion != ProtocolVersion {
				t.Errorf("protocol version %q, want %q", res.ProtocolVersion, ProtocolVersion)
			}
			for _, c := range []string{"logging", "tools"} {
				if !slices.Contains(res.Capabilities, c) {
					t.Errorf("capabilities %v lack %s", res.Capabilities, c)
				}
			}
			if !slices.IsSorted(res.Capabilities) {
				t.Errorf("capabilities %v are not sorted", res.Capabilities)
			}
			if got := toolNames(res.Tools); !slices.Equal(got, []string{"greet", "ping"}) {
				t.Fatalf("tools %v, want [greet ping]", got)
			}
			for i, want := range adapterTools {
				got := res.Tools[i]
				if got.Description != want.Description {
					t.Errorf("%s: description %q, want %q", got.Name, got.Description, want.Description)
				}
				if !testkit.JSONEqual(t, got.InputSchema, want.InputSchema) {
					t.Errorf("%s: inputSchema\n%s\nwant\n%s", got.Name, got.InputSchema, want.InputSchema)
				}
				if len(got.Raw) == 0 || !json.Valid(got.Raw) {
					t.Errorf("%s: Raw = %q", got.Name, got.Raw)
				}
			}

			var sawList, sawDelete bool
			for _, r := range rec.all() {
				if r.rpcMethod == "tools/list" && r.header.Get(HeaderMethod) == "" { // the 2025-11-25 listing
					sawList = true
					if v := r.header.Get("MCP-Protocol-Version"); v != ProtocolVersion {
						t.Errorf("tools/list carried MCP-Protocol-Version %q, want %q", v, ProtocolVersion)
					}
				}
				if r.method == http.MethodDelete {
					sawDelete = true
					if r.header.Get("Mcp-Session-Id") == "" {
						t.Errorf("DELETE without Mcp-Session-Id")
					}
				}
			}
			if !sawList {
				t.Errorf("no tools/list request reached the adapter")
			}
			if wantDelete := tc.transport == adapterconfig.TransportStreamableHTTP && !tc.stateless; sawDelete != wantDelete {
				t.Errorf("session DELETE sent = %v, want %v", sawDelete, wantDelete)
			}
		})
	}
}

// TestProbeProtocolVersions: servers that answer initialize with an older revision
// (2025-06-18, 2025-03-26), an mcp-go server pinned to 2025-06-18, and mcp-go's
// default server, which also speaks the stateless 2026-07-28 core and so is "newer":
// every handshake succeeds and reports the negotiated version.
func TestProbeProtocolVersions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
		want string
	}{
		{"hand-written/2025-03-26", func(t *testing.T) string {
			return startFake(t, &fakeMCP{version: "2025-03-26", tools: numberedTools(2)}, nil)
		}, "2025-03-26"},
		{"hand-written/2025-06-18", func(t *testing.T) string {
			return startFake(t, &fakeMCP{version: "2025-06-18", tools: numberedTools(2), sse: true}, nil)
		}, "2025-06-18"},
		{"hand-written/2025-11-25", func(t *testing.T) string {
			return startFake(t, &fakeMCP{tools: numberedTools(2)}, nil)
		}, "2025-11-25"},
		{"mcp-go/answers-2025-06-18", func(t *testing.T) string { return startMCPGo(t, "2025-06-18") }, "2025-06-18"},
		{"mcp-go/default-newest", func(t *testing.T) string { return startMCPGo(t, "") }, "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := mustProbe(t, Options{URL: tc.url(t)})
			if res.ProtocolVersion != tc.want {
				t.Errorf("negotiated %q, want %q", res.ProtocolVersion, tc.want)
			}
			if len(res.Tools) != 2 {
				t.Errorf("tools %v, want 2", toolNames(res.Tools))
			}
		})
	}
}

// startMCPGo serves an mcp-go streamable HTTP server with two tools; answerVersion,
// when set, replaces the protocolVersion of its initialize answer and is the only
// version its transport advertises.
func startMCPGo(t *testing.T, answerVersion string) string {
	t.Helper()
	hooks := &server.Hooks{}
	var httpOpts []server.StreamableHTTPOption
	if answerVersion != "" {
		hooks.AddAfterInitialize(func(_ context.Context, _ any, _ *mcp.InitializeRequest, res *mcp.InitializeResult) {
			res.ProtocolVersion = answerVersion
		})
		httpOpts = append(httpOpts, server.WithStreamableHTTPProtocolVersions(answerVersion))
	}
	m := server.NewMCPServer("mcp-go-peer", "9.9.9", server.WithToolCapabilities(false), server.WithHooks(hooks))
	for _, name := range []string{"alpha", "beta"} {
		m.AddTool(mcp.NewTool(name, mcp.WithDescription("tool "+name), mcp.WithString("x", mcp.Required())),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ok"), nil
			})
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(m, httpOpts...))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// TestProbePagination lists 7 tools in pages of 3 (three tools/list requests, the
// cursors passed back as given), with JSON and with event-stream answers; the order
// is the server's and the session is closed with a DELETE.
func TestProbePagination(t *testing.T) {
	t.Parallel()
	for _, sse := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "event-stream"}[sse]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			url := startFake(t, &fakeMCP{tools: numberedTools(7), pageSize: 3, sse: sse, sessionID: "sess-42"}, rec)
			res := mustProbe(t, Options{URL: url})
			want := []string{"tool-000", "tool-001", "tool-002", "tool-003", "tool-004", "tool-005", "tool-006"}
			if got := toolNames(res.Tools); !slices.Equal(got, want) {
				t.Fatalf("tools %v, want %v", got, want)
			}
			if !testkit.JSONEqual(t, res.Tools[4].InputSchema, []byte(`{"type":"object","properties":{"n":{"type":"integer","const":4}}}`)) {
				t.Errorf("tool-004 schema %s", res.Tools[4].InputSchema)
			}
			var cursors []string
			var deletes int
			for _, r := range rec.all() {
				if r.rpcMethod == "tools/list" {
					cursors = append(cursors, r.cursor)
					if sid := r.header.Get("Mcp-Session-Id"); sid != "sess-42" {
						t.Errorf("tools/list carried session %q, want sess-42", sid)
					}
				}
				if r.method == http.MethodDelete && r.header.Get("Mcp-Session-Id") == "sess-42" {
					deletes++
				}
			}
			if !slices.Equal(cursors, []string{"", "page-at-3", "page-at-6"}) {
				t.Errorf("tools/list cursors %q, want three pages", cursors)
			}
			if deletes != 1 {
				t.Errorf("%d session DELETEs, want 1", deletes)
			}
		})
	}
}

// TestProbeUsesDial: every connection goes through Options.Dial, which here pins a
// name that does not resolve to the test server's address.
func TestProbeUsesDial(t *testing.T) {
	t.Parallel()
	url := startFake(t, &fakeMCP{tools: numberedTools(3), sessionID: "s"}, nil)
	pinned := url[len("http://") : len(url)-len("/mcp")] // 127.0.0.1:PORT
	_, port, _ := net.SplitHostPort(pinned)
	var mu sync.Mutex
	var asked []string
	var dials atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		mu.Lock()
		asked = append(asked, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, pinned)
	}
	res := mustProbe(t, Options{URL: "http://mcp.pinned.invalid:" + port + "/mcp", Dial: dial})
	if len(res.Tools) != 3 {
		t.Errorf("tools %v, want 3", toolNames(res.Tools))
	}
	if dials.Load() < 1 {
		t.Fatalf("Dial was never called")
	}
	for _, a := range asked {
		if a != "mcp.pinned.invalid:"+port {
			t.Errorf("Dial asked for %q, want the URL's host:port", a)
		}
	}
	t.Logf("%d dial(s) through Options.Dial", dials.Load())
}

// TestProbeNoToolsCapability: a server that does not announce tools is not asked for
// them.
func TestProbeNoToolsCapability(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	url := startFake(t, &fakeMCP{capabilities: map[string]any{"prompts": map[string]any{}, "logging": map[string]any{}}, tools: numberedTools(2)}, rec)
	res := mustProbe(t, Options{URL: url})
	if len(res.Tools) != 0 || !slices.Equal(res.Capabilities, []string{"logging", "prompts"}) {
		t.Errorf("tools %v capabilities %v", toolNames(res.Tools), res.Capabilities)
	}
	for _, r := range rec.all() {
		if r.rpcMethod == "tools/list" {
			t.Errorf("tools/list sent to a server without the tools capability")
		}
	}
}

// TestProbeResumesClosedStream: a 2025-11-25 server may close the event stream of a
// request after a priming event and send the answer on the GET that resumes it with
// Last-Event-ID (SEP-1699).
func TestProbeResumesClosedStream(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	url := startFake(t, &fakeMCP{tools: numberedTools(2), sse: true, pollTools: true, sessionID: "poll"}, rec)
	res := mustProbe(t, Options{URL: url})
	if len(res.Tools) != 2 {
		t.Fatalf("tools %v, want 2", toolNames(res.Tools))
	}
	var resumed bool
	for _, r := range rec.all() {
		if r.method == http.MethodGet && r.header.Get("Last-Event-ID") == "ev-1" && r.header.Get("Mcp-Session-Id") == "poll" {
			resumed = true
		}
	}
	if !resumed {
		t.Errorf("no GET with Last-Event-ID ev-1 and the session id")
	}
}
