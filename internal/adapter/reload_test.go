package adapter

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// servedWithStreams serves srv behind a handler that reports, on streams, each GET
// stream the server has started answering (by then mcp-go has registered its session).
func servedWithStreams(t *testing.T, srv *Server) (baseURL string, streams <-chan struct{}) {
	t.Helper()
	opened := make(chan struct{}, 16)
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w = &flushSignal{ResponseWriter: w, signal: opened}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.endStreams()
		hs.CloseClientConnections()
		hs.Close()
		// Its streams to remotes end too, or the remotes' servers would wait for them.
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return hs.URL, opened
}

// flushSignal signals once, at the first Flush.
type flushSignal struct {
	http.ResponseWriter
	signal  chan<- struct{}
	flushed bool
}

func (f *flushSignal) Flush() {
	f.ResponseWriter.(http.Flusher).Flush()
	if !f.flushed {
		f.flushed = true
		f.signal <- struct{}{}
	}
}

func (f *flushSignal) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// listening connects an mcp-go client that reports notifications/tools/list_changed:
// over streamable HTTP with its GET stream open (WithContinuousListening), or over SSE.
func listening(t *testing.T, baseURL, transportName string, streams <-chan struct{}) (*client.Client, <-chan struct{}) {
	t.Helper()
	var tr transport.Interface
	var err error
	if transportName == adapterconfig.TransportSSE {
		tr, err = transport.NewSSE(baseURL + adapterconfig.PathSSE)
	} else {
		// The standalone GET stream is what these tests watch for list_changed.
		tr, err = transport.NewStreamableHTTP(baseURL+adapterconfig.PathMCP, transport.WithContinuousListening()) //nolint:staticcheck // SA1019: see above
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := startClient(t, client.NewClient(tr, client.WithProtocolVersion(protocol20251125)), protocol20251125)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	changed := make(chan struct{}, 8)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	testkit.Receive(t, testTimeout, "the client's stream to open", streams)
	// A round trip: the server has handled notifications/initialized by its answer.
	if _, err := c.ListTools(testkit.Context(t, testTimeout), mcp.ListToolsRequest{}); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	return c, changed
}

func listedNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	list, err := c.ListTools(testkit.Context(t, testTimeout), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// TestReload_ConnectedSessionsAreToldTheToolListChanged: a streamable HTTP client with
// its GET stream open (stateful and stateless server) and an SSE session each receive
// notifications/tools/list_changed when Reload adds a tool, then when it removes one;
// tools/list then shows the change, the new tool answers, and its metrics exist.
func TestReload_ConnectedSessionsAreToldTheToolListChanged(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport string
		stateless bool
	}{
		{"streamable-http stateful", adapterconfig.TransportStreamableHTTP, false},
		{"streamable-http stateless", adapterconfig.TransportStreamableHTTP, true},
		{"sse", adapterconfig.TransportSSE, false},
	} {
		transportName, stateless := tc.transport, tc.stateless
		t.Run(tc.name, func(t *testing.T) {
			cfg := configWith(transportName, stateless, templateTool("a", objectSchema, "A"))
			srv, err := NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			baseURL, streams := servedWithStreams(t, srv)
			c, changed := listening(t, baseURL, transportName, streams)

			grown := configWith(transportName, stateless, templateTool("a", objectSchema, "A"), templateTool("b", objectSchema, "B"))
			if err := srv.Reload(grown); err != nil {
				t.Fatalf("Reload: %v", err)
			}
			testkit.Receive(t, testTimeout, "notifications/tools/list_changed after a tool was added", changed)
			if got := listedNames(t, c); !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("tools/list after the reload = %v, want [a b]", got)
			}
			wantSuccess(t, callTool(t, c, "b", nil), "B")
			if metrics := metricsText(t, srv); !strings.Contains(metrics, `cantus_adapter_tool_calls_total{tool="b"} 1`) {
				t.Errorf("metrics lack the added tool's calls")
			}

			if err := srv.Reload(configWith(transportName, stateless, templateTool("b", objectSchema, "B"))); err != nil {
				t.Fatalf("Reload: %v", err)
			}
			testkit.Receive(t, testTimeout, "notifications/tools/list_changed after a tool was removed", changed)
			if got := listedNames(t, c); !slices.Equal(got, []string{"b"}) {
				t.Fatalf("tools/list after the second reload = %v, want [b]", got)
			}
			if got := srv.ToolNames(); !slices.Equal(got, []string{"b"}) {
				t.Errorf("ToolNames = %v, want [b]", got)
			}
		})
	}
}

// TestReload_BackendOnlyChangeIsAppliedWithoutNotification: changing only a tool's
// backend (its template) takes effect for the next call, and sessions are not told the
// list changed, since it did not.
func TestReload_BackendOnlyChangeIsAppliedWithoutNotification(t *testing.T) {
	srv, err := NewServer(configWith(adapterconfig.TransportStreamableHTTP, false, templateTool("a", objectSchema, "old")))
	if err != nil {
		t.Fatal(err)
	}
	baseURL, streams := servedWithStreams(t, srv)
	c, changed := listening(t, baseURL, adapterconfig.TransportStreamableHTTP, streams)
	wantSuccess(t, callTool(t, c, "a", nil), "old")
	if err := srv.Reload(configWith(adapterconfig.TransportStreamableHTTP, false, templateTool("a", objectSchema, "new"))); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	wantSuccess(t, callTool(t, c, "a", nil), "new")
	// Reload hands its notifications to the sessions before it returns, and a session's
	// stream carries them in order: a notification sent now arrives after any the
	// reload sent.
	barrier := make(chan struct{}, 1)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/test/barrier" {
			barrier <- struct{}{}
		}
	})
	srv.mcp.SendNotificationToAllClients("notifications/test/barrier", nil)
	testkit.Receive(t, testTimeout, "the barrier notification sent after the reload", barrier)
	select {
	case <-changed:
		t.Fatal("notifications/tools/list_changed for a change the listing does not show")
	default:
	}
}

// TestReload_RefusesWhatNeedsARestart: a change the running server cannot apply, or an
// invalid config, is refused with an error saying so, and the old tools stay served.
func TestReload_RefusesWhatNeedsARestart(t *testing.T) {
	base := func() *adapterconfig.Config {
		return configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "A"))
	}
	srv := serve(t, base())
	c := connect(t, srv.baseURL, protocol20251125, nil)
	for _, tc := range []struct {
		name   string
		mutate func(*adapterconfig.Config)
		want   string
	}{
		{"transport", func(c *adapterconfig.Config) { c.Transport = adapterconfig.TransportSSE }, "the transport (streamable-http → sse)"},
		{"port", func(c *adapterconfig.Config) { c.Port = 9999 }, "the port (0 → 9999)"},
		{"stateless", func(c *adapterconfig.Config) { c.Stateless = false }, "stateless"},
		{"memory", func(c *adapterconfig.Config) {
			c.Memory = &adapterconfig.MemoryConfig{Root: t.TempDir(), ToolName: "memory"}
		}, "the memory tool"},
		{"server info", func(c *adapterconfig.Config) { c.Server.Version = "9.9.9" }, "the server info"},
		{"invalid tool", func(c *adapterconfig.Config) { c.Tools[0].Template.Text = "{{" }, "invalid adapter config"},
		{"invalid token file", func(c *adapterconfig.Config) { c.BearerTokenFile = "/nonexistent/token" }, "invalid adapter config: auth: read bearer token file"},
		{"invalid rule", func(c *adapterconfig.Config) {
			c.Auth = &adapterconfig.AuthConfig{Authorization: &adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{{Tools: []string{"*"}, When: "claims.x +"}}}}
		}, "invalid adapter config: auth: authorization rule 1: when:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			cfg.Tools = append(cfg.Tools, templateTool("b", objectSchema, "B"))
			tc.mutate(cfg)
			err := srv.Reload(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reload = %v, want an error containing %q", err, tc.want)
			}
			if !strings.HasPrefix(tc.name, "invalid") && !strings.Contains(err.Error(), "restart the adapter") {
				t.Errorf("error %q does not say a restart is needed", err)
			}
			if got := srv.ToolNames(); !slices.Equal(got, []string{"a"}) {
				t.Errorf("after a refused reload ToolNames = %v, want [a]", got)
			}
			wantSuccess(t, callTool(t, c, "a", nil), "A")
		})
	}
}
