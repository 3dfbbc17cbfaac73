package adapter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// ---- a remote: the project's own adapter, in process, behind a recording handler ----

// remoteAdapter is an adapter serving as the remote of a gateway, on a real loopback
// listener, with what the gateway sent recorded. It answers 404 to a request carrying
// a session id it did not issue, as the spec asks of a stateful server (the adapter
// itself, on mcp-go's default session manager, accepts any well-formed id), so that a
// restarted remote has forgotten the sessions of the one before.
type remoteAdapter struct {
	srv  *Server
	hs   *httptest.Server
	addr string

	issued       sync.Map     // session ids this instance gave out
	initializes  atomic.Int32 // initialize requests
	calls        atomic.Int32 // tools/call requests, answered or not
	sessionMiss  atomic.Int32 // POSTs answered 404 (unknown session)
	lastAuth     atomic.Value // string: the Authorization header of the last POST
	closeStreams func()
}

// startRemoteAdapter serves cfg on addr ("" picks a free port; the same addr again
// restarts a remote where the last one was).
func startRemoteAdapter(t *testing.T, cfg *adapterconfig.Config, addr string, opts ...Option) *remoteAdapter {
	t.Helper()
	srv, err := NewServer(cfg, opts...)
	if err != nil {
		t.Fatalf("NewServer (remote): %v", err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	// A port just released may take a moment to be free again.
	testkit.Eventually(t, testTimeout, "a listener on "+addr, func() error {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	r := &remoteAdapter{srv: srv, addr: ln.Addr().String(), closeStreams: srv.endStreams}
	r.lastAuth.Store("")
	h := srv.Handler()
	r.hs = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			// POSTs only: they carry the handshakes and the calls, which the gateway
			// sends with the header values in use. When a header file changes, the
			// gateway retires the old session and ends it with a DELETE sent in the
			// background with the values that session was opened with (the session is
			// theirs); that DELETE can reach the remote after the next call's POST, so
			// recording it would make "the last value" depend on scheduling.
			r.lastAuth.Store(req.Header.Get("Authorization"))
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			var head struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &head)
			switch head.Method {
			case "initialize":
				r.initializes.Add(1)
			case "tools/call":
				r.calls.Add(1)
			}
		}
		if id := req.Header.Get("Mcp-Session-Id"); id != "" {
			if _, ok := r.issued.Load(id); !ok {
				if req.Method == http.MethodPost {
					r.sessionMiss.Add(1)
				}
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
		}
		h.ServeHTTP(w, req)
		if id := w.Header().Get("Mcp-Session-Id"); id != "" {
			r.issued.Store(id, true)
		}
	}))
	r.hs.Listener = ln
	r.hs.Start()
	t.Cleanup(r.stop)
	return r
}

// stop ends the remote and every connection to it, as a crashed pod would.
func (r *remoteAdapter) stop() {
	r.closeStreams()
	r.hs.CloseClientConnections()
	r.hs.Close()
	_ = r.srv.Close()
}

func (r *remoteAdapter) endpoint(transportName string) string {
	if transportName == adapterconfig.TransportSSE {
		return "http://" + r.addr + adapterconfig.PathSSE
	}
	return "http://" + r.addr + adapterconfig.PathMCP
}

// countingBackend is an http backend that counts the calls it ran.
func countingBackend(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = fmt.Fprintf(w, "ran %d", n.Load())
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// failingBackend answers every call with 500 and a body.
func failingBackend(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "backend exploded", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

const helloSchema = `{"type":"object","properties":{"name":{"type":"string","minLength":1}},"required":["name"],"additionalProperties":false}`

// remoteTools are the remote's tools: greet (template), fail (an http backend that
// answers 500, so the result has isError) and count (an http backend that counts runs).
func remoteTools(t *testing.T, counter string) []adapterconfig.Tool {
	return []adapterconfig.Tool{
		templateTool("greet", helloSchema, "Hello, {{.name}}!"),
		httpTool("fail", objectSchema, failingBackend(t), 5*time.Second, 1<<20),
		httpTool("count", objectSchema, counter, 5*time.Second, 1<<20),
	}
}

// remoteTool is a gateway tool re-exporting remoteName of the remote at endpoint.
func remoteTool(name, schema, endpoint, transportName, remoteName string) adapterconfig.Tool {
	return adapterconfig.Tool{
		Name:        name,
		Description: "re-exported " + remoteName,
		InputSchema: json.RawMessage(schema),
		Remote: &adapterconfig.RemoteBackend{
			Import:     "team/upstream",
			URL:        endpoint,
			Transport:  transportName,
			RemoteName: remoteName,
			Timeout:    adapterconfig.Duration{Duration: 5 * time.Second},
		},
	}
}

// gatewayTools re-export greet, fail and count under a prefix, plus a tool the remote
// does not have.
func gatewayTools(endpoint, transportName string) []adapterconfig.Tool {
	return []adapterconfig.Tool{
		remoteTool("team.hello", helloSchema, endpoint, transportName, "greet"),
		remoteTool("team.fail", objectSchema, endpoint, transportName, "fail"),
		remoteTool("team.count", objectSchema, endpoint, transportName, "count"),
		remoteTool("team.ghost", objectSchema, endpoint, transportName, "ghost"),
	}
}

// ---- tests ----

// TestGateway_ForwardsCallsToTheRemoteAdapter: over each remote transport, a gateway
// lists the re-exported tools under their served names with their schemas, forwards
// calls to the remote's names, validates arguments before forwarding, and turns a
// failed remote result and a JSON-RPC error into mcp_remote_error: tool errors.
func TestGateway_ForwardsCallsToTheRemoteAdapter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport string
		stateless bool
	}{
		{"streamable-http stateful", adapterconfig.TransportStreamableHTTP, false},
		{"streamable-http stateless", adapterconfig.TransportStreamableHTTP, true},
		{"sse", adapterconfig.TransportSSE, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter, runs := countingBackend(t)
			remote := startRemoteAdapter(t, configWith(tc.transport, tc.stateless, remoteTools(t, counter)...), "")
			gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, gatewayTools(remote.endpoint(tc.transport), tc.transport)...))
			c := connect(t, gw.baseURL, protocol20251125, nil)

			list, err := c.ListTools(testkit.Context(t, testTimeout), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if len(list.Tools) != 4 {
				t.Fatalf("gateway lists %d tools, want 4", len(list.Tools))
			}
			for _, tool := range list.Tools {
				if tool.Name == "team.hello" && (len(tool.InputSchema.Required) != 1 || tool.InputSchema.Properties["name"] == nil) {
					t.Errorf("team.hello schema = %+v, want the one configured (%s)", tool.InputSchema, helloSchema)
				}
			}

			wantSuccess(t, callTool(t, c, "team.hello", map[string]any{"name": "Ada"}), "Hello, Ada!")
			wantToolError(t, callTool(t, c, "team.fail", nil), gateway.MarkerRemoteError+"http_call_failed: 500 Internal Server Error: backend exploded")
			wantToolError(t, callTool(t, c, "team.ghost", nil), gateway.MarkerRemoteError, "-32602", "ghost")
			wantSuccess(t, callTool(t, c, "team.count", nil), "ran 1")

			callsBefore := remote.calls.Load()
			wantToolError(t, callTool(t, c, "team.hello", map[string]any{"name": 7}), markerInvalidArgs, "/name")
			if got := remote.calls.Load(); got != callsBefore {
				t.Errorf("a call with invalid arguments reached the remote (%d tools/call, want %d)", got, callsBefore)
			}
			if got := remote.initializes.Load(); got != 1 {
				t.Errorf("the remote saw %d initialize requests for 5 calls, want 1 (one pooled session)", got)
			}
			if runs.Load() != 1 {
				t.Errorf("the counting tool ran %d times, want 1", runs.Load())
			}

			metrics := metricsText(t, gw.Server)
			for _, want := range []string{
				`cantus_adapter_tool_calls_total{tool="team.hello"} 2`,
				`cantus_adapter_tool_errors_total{tool="team.fail"} 1`,
				`cantus_adapter_remote_connects_total{outcome="succeeded",remote="` + remote.endpoint(tc.transport) + `"} 1`,
			} {
				if !strings.Contains(metrics, want) {
					t.Errorf("metrics lack %s", want)
				}
			}
		})
	}
}

// TestGateway_RemoteRestartDownAndBack: a stateful remote restarted on the same port has
// forgotten the gateway's session; the next call reconnects and succeeds, running the
// tool exactly once. While the remote is down a call is mcp_call_failed:; once it is
// back the next call succeeds.
func TestGateway_RemoteRestartDownAndBack(t *testing.T) {
	counter, runs := countingBackend(t)
	cfg := configWith(adapterconfig.TransportStreamableHTTP, false, remoteTools(t, counter)...)
	first := startRemoteAdapter(t, cfg, "")
	endpoint := first.endpoint(adapterconfig.TransportStreamableHTTP)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, gatewayTools(endpoint, adapterconfig.TransportStreamableHTTP)...))
	c := connect(t, gw.baseURL, protocol20251125, nil)

	wantSuccess(t, callTool(t, c, "team.count", nil), "ran 1")
	first.stop()
	second := startRemoteAdapter(t, cfg, first.addr)
	wantSuccess(t, callTool(t, c, "team.count", nil), "ran 2")
	if second.sessionMiss.Load() != 1 || second.initializes.Load() != 1 {
		t.Errorf("restarted remote: %d answers 404 and %d initialize, want 1 and 1 (old session refused, one reconnect)",
			second.sessionMiss.Load(), second.initializes.Load())
	}
	if runs.Load() != 2 {
		t.Errorf("the tool ran %d times for 2 calls, want 2 (the refused attempt must not run)", runs.Load())
	}

	second.stop()
	wantToolError(t, callTool(t, c, "team.count", nil), gateway.MarkerCallFailed, "connection refused", "import team/upstream")
	third := startRemoteAdapter(t, cfg, first.addr)
	wantSuccess(t, callTool(t, c, "team.count", nil), "ran 3")
	if third.initializes.Load() != 1 {
		t.Errorf("remote back up: %d initialize, want 1", third.initializes.Load())
	}
}

// TestGateway_RemoteThatIsNoMCPServerIsCallFailed: a handshake that fails (the URL
// answers 404 to initialize) is mcp_call_failed:, naming what happened.
func TestGateway_RemoteThatIsNoMCPServerIsCallFailed(t *testing.T) {
	notMCP := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notMCP.Close)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true,
		remoteTool("x.tool", objectSchema, notMCP.URL+"/mcp", adapterconfig.TransportStreamableHTTP, "tool")))
	c := connect(t, gw.baseURL, protocol20251125, nil)
	wantToolError(t, callTool(t, c, "x.tool", nil), gateway.MarkerCallFailed, "404")
}

// writeFileAtomically replaces path as a Secret volume update does: a new file renamed
// over the old one.
func writeFileAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestGateway_HeaderFilesReachTheRemoteAndChangesArePickedUp: the Authorization header
// read from a file reaches a remote that requires a bearer token; a changed file is used
// by the next call (a wrong token then fails as upstream_unauthorized: naming the 401, with
// the value scrubbed), and changing it back works again.
func TestGateway_HeaderFilesReachTheRemoteAndChangesArePickedUp(t *testing.T) {
	counter, _ := countingBackend(t)
	remote := startRemoteAdapter(t, configWith(adapterconfig.TransportStreamableHTTP, false, remoteTools(t, counter)...), "",
		WithBearerToken("good-token-1234"))
	headerFile := filepath.Join(t.TempDir(), "authorization")
	writeFileAtomically(t, headerFile, "Bearer good-token-1234\n")
	tool := remoteTool("team.hello", helloSchema, remote.endpoint(adapterconfig.TransportStreamableHTTP), adapterconfig.TransportStreamableHTTP, "greet")
	tool.Remote.HeaderFiles = map[string]string{"Authorization": headerFile}
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, tool))
	c := connect(t, gw.baseURL, protocol20251125, nil)

	wantSuccess(t, callTool(t, c, "team.hello", map[string]any{"name": "Ada"}), "Hello, Ada!")
	if got := remote.lastAuth.Load(); got != "Bearer good-token-1234" {
		t.Fatalf("the remote got Authorization %q, want the file's value", got)
	}

	writeFileAtomically(t, headerFile, "Bearer wrong-token-5678")
	res := callTool(t, c, "team.hello", map[string]any{"name": "Ada"})
	wantToolError(t, res, gateway.CodeUpstreamUnauthorized+": ", "401", "team/upstream", "spec.headers")
	if strings.Contains(textOf(res), "wrong-token-5678") {
		t.Errorf("the error shows the header value: %q", textOf(res))
	}
	if got := remote.lastAuth.Load(); got != "Bearer wrong-token-5678" {
		t.Fatalf("after the file changed the remote got Authorization %q, want the new value", got)
	}

	writeFileAtomically(t, headerFile, "Bearer good-token-1234")
	wantSuccess(t, callTool(t, c, "team.hello", map[string]any{"name": "Bo"}), "Hello, Bo!")
}

// TestGateway_RefusedHandshakeRereadsTheHeaderFiles: a change the file's stat does not
// show (rewritten in place, same length, modification time put back) is still picked
// up when the remote refuses the values in use: the refused handshake forces a re-read
// of the files and the call is retried once with the new values.
func TestGateway_RefusedHandshakeRereadsTheHeaderFiles(t *testing.T) {
	counter, _ := countingBackend(t)
	remote := startRemoteAdapter(t, configWith(adapterconfig.TransportStreamableHTTP, false, remoteTools(t, counter)...), "",
		WithBearerToken("good-token-1234"))
	headerFile := filepath.Join(t.TempDir(), "authorization")
	writeFileAtomically(t, headerFile, "Bearer bad-token-12345")
	tool := remoteTool("team.hello", helloSchema, remote.endpoint(adapterconfig.TransportStreamableHTTP), adapterconfig.TransportStreamableHTTP, "greet")
	tool.Remote.HeaderFiles = map[string]string{"Authorization": headerFile}
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, tool))
	c := connect(t, gw.baseURL, protocol20251125, nil)

	wantToolError(t, callTool(t, c, "team.hello", map[string]any{"name": "Ada"}), gateway.CodeUpstreamUnauthorized+": ", "401")

	before, err := os.Stat(headerFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(headerFile, []byte("Bearer good-token-1234"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(headerFile, before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(headerFile)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || !os.SameFile(after, before) {
		t.Fatalf("the in-place rewrite changed the stat (size %d→%d, mtime %v→%v); the test needs it unchanged",
			before.Size(), after.Size(), before.ModTime(), after.ModTime())
	}

	wantSuccess(t, callTool(t, c, "team.hello", map[string]any{"name": "Bo"}), "Hello, Bo!")
	if got := remote.lastAuth.Load(); got != "Bearer good-token-1234" {
		t.Fatalf("the remote got Authorization %q, want the rewritten file's value", got)
	}
}

// TestNewServer_RemoteFilesMustBeReadable: Validate does not read header files (the
// controller has none), NewServer does and names the header.
func TestNewServer_RemoteFilesMustBeReadable(t *testing.T) {
	tool := remoteTool("x.tool", objectSchema, "http://127.0.0.1:1/mcp", adapterconfig.TransportStreamableHTTP, "tool")
	tool.Remote.HeaderFiles = map[string]string{"X-Api-Key": filepath.Join(t.TempDir(), "missing")}
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, tool)
	if err := adapterconfig.Validate(cfg); err != nil {
		t.Fatalf("Validate read the header file: %v", err)
	}
	_, err := NewServer(cfg)
	if err == nil || !strings.Contains(err.Error(), "X-Api-Key") || !strings.Contains(err.Error(), "x.tool") {
		t.Fatalf("NewServer error = %v, want one naming the tool and the header", err)
	}
}

// TestGateway_ConcurrentCallsShareOneRemoteSession: 20 concurrent calls from two
// clients open exactly one session at the remote, over each remote transport.
func TestGateway_ConcurrentCallsShareOneRemoteSession(t *testing.T) {
	for _, transportName := range []string{adapterconfig.TransportStreamableHTTP, adapterconfig.TransportSSE} {
		t.Run(transportName, func(t *testing.T) {
			counter, runs := countingBackend(t)
			remote := startRemoteAdapter(t, configWith(transportName, false, remoteTools(t, counter)...), "")
			gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, gatewayTools(remote.endpoint(transportName), transportName)...))
			clients := []*client.Client{
				connect(t, gw.baseURL, protocol20251125, nil),
				connect(t, gw.baseURL, protocol20250618, nil),
			}
			var wg sync.WaitGroup
			errs := make(chan string, 20)
			for i := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := mcp.CallToolRequest{}
					req.Params.Name = "team.hello"
					req.Params.Arguments = map[string]any{"name": fmt.Sprintf("n%d", i)}
					res, err := clients[i%2].CallTool(testkit.Context(t, testTimeout), req)
					switch {
					case err != nil:
						errs <- err.Error()
					case res.IsError || textOf(res) != fmt.Sprintf("Hello, n%d!", i):
						errs <- textOf(res)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Errorf("call: %s", e)
			}
			if got := remote.initializes.Load(); got != 1 {
				t.Errorf("20 concurrent calls opened %d sessions at the remote, want 1", got)
			}
			if got := remote.calls.Load(); got != 20 {
				t.Errorf("the remote got %d tools/call, want 20", got)
			}
			_ = runs
		})
	}
}

// TestGateway_ReloadKeepsTheRemoteSession: a reload that adds a tool keeps the pooled
// session of an unchanged remote.
func TestGateway_ReloadKeepsTheRemoteSession(t *testing.T) {
	counter, _ := countingBackend(t)
	remote := startRemoteAdapter(t, configWith(adapterconfig.TransportStreamableHTTP, false, remoteTools(t, counter)...), "")
	tools := gatewayTools(remote.endpoint(adapterconfig.TransportStreamableHTTP), adapterconfig.TransportStreamableHTTP)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, tools...))
	c := connect(t, gw.baseURL, protocol20251125, nil)
	wantSuccess(t, callTool(t, c, "team.hello", map[string]any{"name": "Ada"}), "Hello, Ada!")

	if err := gw.Reload(configWith(adapterconfig.TransportStreamableHTTP, true, append(tools, templateTool("local", objectSchema, "local"))...)); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	wantSuccess(t, callTool(t, c, "team.hello", map[string]any{"name": "Bo"}), "Hello, Bo!")
	wantSuccess(t, callTool(t, c, "local", nil), "local")
	if got := remote.initializes.Load(); got != 1 {
		t.Errorf("the remote saw %d initialize requests across a reload, want 1", got)
	}
}

func TestValidate_RemoteBackendProblems(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*adapterconfig.RemoteBackend)
		want   string
	}{
		{"relative URL", func(r *adapterconfig.RemoteBackend) { r.URL = "/mcp" }, `remote.url "/mcp" must be an absolute http or https URL with a host`},
		{"ftp URL", func(r *adapterconfig.RemoteBackend) { r.URL = "ftp://h/mcp" }, `remote.url "ftp://h/mcp" must be`},
		{"URL with credentials", func(r *adapterconfig.RemoteBackend) { r.URL = "http://u:p@h/mcp" }, "remote.url carries credentials"},
		{"unknown transport", func(r *adapterconfig.RemoteBackend) { r.Transport = "stdio" }, `remote.transport "stdio" is not supported`},
		{"empty remote name", func(r *adapterconfig.RemoteBackend) { r.RemoteName = "" }, `remote.remoteName "" is not a valid MCP tool name`},
		{"remote name with a space", func(r *adapterconfig.RemoteBackend) { r.RemoteName = "a b" }, `remote.remoteName "a b"`},
		{"bad header name", func(r *adapterconfig.RemoteBackend) { r.HeaderFiles = map[string]string{"X Key": "/f"} }, `"X Key" is not a valid HTTP header name`},
		{"header without file", func(r *adapterconfig.RemoteBackend) { r.HeaderFiles = map[string]string{"X-Key": " "} }, `remote.headerFiles["X-Key"] names no file`},
		{"zero timeout", func(r *adapterconfig.RemoteBackend) { r.Timeout = adapterconfig.Duration{} }, `remote.timeout "0s" must be greater than 0`},
		{"no import", func(r *adapterconfig.RemoteBackend) { r.Import = "" }, "remote.import is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := remoteTool("x.tool", objectSchema, "http://h/mcp", adapterconfig.TransportStreamableHTTP, "tool")
			tc.mutate(tool.Remote)
			err := adapterconfig.Validate(configWith(adapterconfig.TransportStreamableHTTP, true, tool))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	tool := remoteTool("x.tool", objectSchema, "http://h/mcp", adapterconfig.TransportStreamableHTTP, "tool")
	tool.Template = &adapterconfig.TemplateBackend{Text: "x"}
	if err := adapterconfig.Validate(configWith(adapterconfig.TransportStreamableHTTP, true, tool)); err == nil || !strings.Contains(err.Error(), "2 backends") {
		t.Fatalf("Validate of a tool with template and remote = %v, want 2 backends", err)
	}
}

// A gateway connects only to the addresses the operator's policy check accepted: a name
// that resolves nowhere (or somewhere else now) is reached at the checked address, and a
// URL's own address is not used when it was not checked.
func TestGateway_DialsOnlyTheCheckedAddresses(t *testing.T) {
	srv, err := NewServer(configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("greet", helloSchema, "Hello, {{.name}}!")))
	if err != nil {
		t.Fatal(err)
	}
	// The remote sits behind a name; mcp-go refuses a non-local Host on a local listener.
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Host = "localhost"
		srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(remote.Close)
	_, port, _ := net.SplitHostPort(remote.Listener.Addr().String())

	viaName := remoteTool("pinned.hello", helloSchema, "http://remote.cantus-test.invalid:"+port+adapterconfig.PathMCP, adapterconfig.TransportStreamableHTTP, "greet")
	viaName.Remote.Addresses = []string{"127.0.0.1"}
	// The URL names the remote's real address, but the check accepted another one.
	elsewhere := remoteTool("elsewhere.hello", helloSchema, remote.URL+adapterconfig.PathMCP, adapterconfig.TransportStreamableHTTP, "greet")
	elsewhere.Remote.Addresses = []string{"127.0.0.2"}
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, viaName, elsewhere))
	c := connect(t, gw.baseURL, protocol20251125, nil)

	wantSuccess(t, callTool(t, c, "pinned.hello", map[string]any{"name": "Ada"}), "Hello, Ada!")
	wantToolError(t, callTool(t, c, "elsewhere.hello", map[string]any{"name": "Ada"}), gateway.MarkerCallFailed, "127.0.0.2")
}
