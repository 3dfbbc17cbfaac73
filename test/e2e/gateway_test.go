package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

const gatewayTimeout = 60 * time.Second

// remoteSpec is the remote backend of a gateway tool, written as JSON by hand the way
// the controller's ConfigMap reaches the binary.
type remoteSpec struct {
	Import      string            `json:"import"`
	URL         string            `json:"url"`
	Transport   string            `json:"transport"`
	RemoteName  string            `json:"remoteName"`
	HeaderFiles map[string]string `json:"headerFiles,omitempty"`
	Timeout     string            `json:"timeout"`
	Relay       []string          `json:"relay,omitempty"`
	Subscribe   bool              `json:"subscribe,omitempty"`
	Eras        []string          `json:"eras,omitempty"`
	Definition  json.RawMessage   `json:"definition,omitempty"`
	// RemoteEras, ModernDefinition and Extensions are a dual-era import's (see
	// adapterconfig.RemoteBackend).
	RemoteEras       []string        `json:"remoteEras,omitempty"`
	ModernDefinition json.RawMessage `json:"modernDefinition,omitempty"`
	Extensions       []string        `json:"extensions,omitempty"`
	ListChanges      bool            `json:"listChanges,omitempty"`
}

type gatewayTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Template    *templateSpec   `json:"template,omitempty"`
	Remote      *remoteSpec     `json:"remote,omitempty"`
}

// writeGatewayConfig writes (or rewrites, atomically as a ConfigMap update would) the
// gateway's config at path, after checking that adapter.Config knows every key and
// accepts it.
func writeGatewayConfig(t *testing.T, path, transportName string, stateless bool, tools []gatewayTool) {
	t.Helper()
	writeGatewayConfigWith(t, path, transportName, stateless, tools, nil)
}

// writeGatewayConfigWith is writeGatewayConfig with more members of the config (such as
// "imported").
func writeGatewayConfigWith(t *testing.T, path, transportName string, stateless bool, tools []gatewayTool, more map[string]any) {
	t.Helper()
	cfg := map[string]any{
		"server":    map[string]any{"name": "cantus-gateway", "version": "0.1.0"},
		"transport": transportName,
		"port":      0,
		"stateless": stateless,
		"tools":     tools,
	}
	maps.Copy(cfg, more)
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var typed adapterconfig.Config
	if err := dec.Decode(&typed); err != nil {
		t.Fatalf("the gateway config no longer matches internal/adapter.Config: %v", err)
	}
	if err := adapterconfig.Validate(&typed); err != nil {
		t.Fatalf("the gateway config is invalid: %v", err)
	}
	writeAtomically(t, path, data)
}

func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startRemoteAdapter serves, in process, an adapter with greet (template) and
// test_error_handling (an http skill whose backend answers 500), behind a bearer token.
func startRemoteAdapter(t *testing.T, token string) string {
	t.Helper()
	var cfg adapterconfig.Config
	data, err := json.Marshal(map[string]any{
		"server": map[string]any{"name": "remote", "version": "1"}, "transport": adapterconfig.TransportStreamableHTTP,
		"stateless": false, "tools": skillTools(startBackend(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	srv, err := adapter.NewServer(&cfg, adapter.WithBearerToken(token))
	if err != nil {
		t.Fatalf("remote adapter: %v", err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		_ = srv.Close()
	})
	return hs.URL + adapterconfig.PathMCP
}

func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func mcpGoClient(t *testing.T, ctx context.Context, url string, opts ...transport.StreamableHTTPCOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "e2e-gateway", Version: "0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize %s: %v", url, err)
	}
	return c
}

func mcpGoCall(t *testing.T, ctx context.Context, c *client.Client, name string, args any) (string, bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("mcp-go call %s: %v", name, err)
	}
	var parts []string
	for _, content := range res.Content {
		if text, ok := mcp.AsTextContent(content); ok {
			parts = append(parts, text.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError
}

// TestGateway re-exports tools of two real remotes through the real adapter binary:
// the project's own adapter (behind a bearer token read from a header file) and
// @modelcontextprotocol/server-everything, each under a prefix or a new name. Two
// independent clients, the official TypeScript SDK client and mcp-go's, list the served
// names and call through the gateway: successes pass through, a remote tool failure
// comes back as "mcp_remote_error: …", an unreachable remote as "mcp_call_failed: …".
func TestGateway(t *testing.T) {
	ctx := testkit.Context(t, gatewayTimeout)
	token := "e2e-remote-token-42"
	remoteURL := startRemoteAdapter(t, token)
	everything := peers.StartServerEverything(t, ctx, peers.TransportStreamableHTTP) + "/mcp"
	// The schema the controller would copy from the import's status.
	probed, err := mcpclient.Probe(ctx, mcpclient.Options{URL: everything})
	if err != nil {
		t.Fatalf("probe server-everything: %v", err)
	}
	var echoSchema json.RawMessage
	for _, tool := range probed.Tools {
		if tool.Name == "echo" {
			echoSchema = tool.InputSchema
		}
	}
	if echoSchema == nil {
		t.Fatalf("server-everything lists no echo tool")
	}

	dir := t.TempDir()
	authFile := filepath.Join(dir, "authorization")
	writeAtomically(t, authFile, []byte("Bearer "+token+"\n"))
	remote := func(url, name string) *remoteSpec {
		return &remoteSpec{Import: "e2e/upstream", URL: url, Transport: peers.TransportStreamableHTTP, RemoteName: name, Timeout: "10s"}
	}
	adapterRemote := func(name string) *remoteSpec {
		r := remote(remoteURL, name)
		r.HeaderFiles = map[string]string{"Authorization": authFile}
		return r
	}
	tools := []gatewayTool{
		{Name: "team.greet", Description: "Greets (re-exported).", InputSchema: json.RawMessage(greetSchema), Remote: adapterRemote("greet")},
		{Name: "team.broken", Description: "Always fails (re-exported).", InputSchema: json.RawMessage(`{"type":"object"}`), Remote: adapterRemote("test_error_handling")},
		{Name: "say", Description: "server-everything's echo, renamed.", InputSchema: echoSchema, Remote: remote(everything, "echo")},
		{Name: "gone.tool", Description: "A remote that is down.", InputSchema: json.RawMessage(`{"type":"object"}`),
			Remote: remote("http://"+closedPort(t)+"/mcp", "tool")},
	}
	configPath := filepath.Join(dir, adapterconfig.ConfigFileName)
	writeGatewayConfig(t, configPath, adapterconfig.TransportStreamableHTTP, true, tools)
	gateway := peers.StartAdapter(t, ctx, configPath) + adapterconfig.PathMCP

	type outcome struct {
		text    string
		isError bool
	}
	calls := []struct {
		tool   string
		args   map[string]any
		check  func(outcome) bool
		expect string
	}{
		{"team.greet", map[string]any{"name": "Ada"},
			func(o outcome) bool { return !o.isError && o.text == "Hello, Ada! (1x)" }, "Hello, Ada! (1x)"},
		{"say", map[string]any{"message": "hi there"},
			func(o outcome) bool { return !o.isError && o.text == "Echo: hi there" }, "Echo: hi there"},
		{"team.broken", nil,
			func(o outcome) bool {
				return o.isError && o.text == "mcp_remote_error: http_call_failed: 500 Internal Server Error: "+errorResponse
			}, "isError mcp_remote_error: http_call_failed: 500 …"},
		{"gone.tool", nil,
			func(o outcome) bool {
				return o.isError && strings.HasPrefix(o.text, "mcp_call_failed: ") && strings.Contains(o.text, "connection refused")
			}, "isError mcp_call_failed: connection refused …"},
	}

	t.Run("typescript-sdk", func(t *testing.T) {
		for i, call := range calls {
			out := peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Call: call.tool, Args: call.args})
			if i == 0 {
				names := strings.Join(out.ToolNames(), ",")
				if names != "gone.tool,say,team.broken,team.greet" {
					t.Errorf("the TypeScript client lists %s, want the served names", names)
				}
			}
			got := outcome{out.Result.Text(), out.Result.IsError}
			if !call.check(got) {
				t.Errorf("TypeScript client, %s: got %+v, want %s", call.tool, got, call.expect)
			}
		}
	})
	t.Run("mcp-go", func(t *testing.T) {
		c := mcpGoClient(t, ctx, gateway)
		for _, call := range calls {
			text, isError := mcpGoCall(t, ctx, c, call.tool, call.args)
			if got := (outcome{text, isError}); !call.check(got) {
				t.Errorf("mcp-go client, %s: got %+v, want %s", call.tool, got, call.expect)
			}
		}
	})
}

// TestGatewayConfigReloadedFromFile: the adapter binary watches its config file. A
// rewrite that adds a re-exported tool reaches a connected stateful session as
// notifications/tools/list_changed, and the tool answers; an invalid rewrite, and one
// changing the transport, are logged and the previous config keeps being served.
func TestGatewayConfigReloadedFromFile(t *testing.T) {
	ctx := testkit.Context(t, gatewayTimeout)
	token := "e2e-reload-token-7"
	remoteURL := startRemoteAdapter(t, token)
	dir := t.TempDir()
	authFile := filepath.Join(dir, "authorization")
	writeAtomically(t, authFile, []byte("Bearer "+token))
	local := gatewayTool{Name: "local", Description: "A local skill.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Template: &templateSpec{Text: "local"}}
	imported := gatewayTool{Name: "team.greet", Description: "Greets (re-exported).", InputSchema: json.RawMessage(greetSchema),
		Remote: &remoteSpec{Import: "e2e/upstream", URL: remoteURL, Transport: peers.TransportStreamableHTTP, RemoteName: "greet",
			HeaderFiles: map[string]string{"Authorization": authFile}, Timeout: "10s"}}
	configPath := filepath.Join(dir, adapterconfig.ConfigFileName)
	writeGatewayConfig(t, configPath, adapterconfig.TransportStreamableHTTP, false, []gatewayTool{local})
	proc := peers.StartAdapterServer(t, ctx, configPath, "--reload-interval", "200ms", "--metrics-port", "0")
	metricsURL := proc.MetricsURL()
	if metricsURL == "" {
		t.Fatalf("the adapter printed no metrics line\n%s", proc.Logs())
	}

	// The standalone GET stream carries the list_changed this test waits for.
	c := mcpGoClient(t, ctx, proc.BaseURL+adapterconfig.PathMCP, transport.WithContinuousListening()) //nolint:staticcheck // SA1019: see above
	changed := make(chan struct{}, 4)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	testkit.EventuallyTrue(t, gatewayTimeout, "the client's GET stream to open", func() bool {
		return strings.Contains(httpBody(t, ctx, metricsURL+adapterconfig.PathMetrics), "cantus_adapter_open_streams 1")
	})

	writeGatewayConfig(t, configPath, adapterconfig.TransportStreamableHTTP, false, []gatewayTool{local, imported})
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatalf("no notifications/tools/list_changed after the config file changed\n%s", proc.Logs())
	}
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(list.Tools) != 2 {
		t.Fatalf("tools/list after the reload: %v, %+v; want 2 tools", err, list)
	}
	if text, isError := mcpGoCall(t, ctx, c, "team.greet", map[string]any{"name": "Ada"}); isError || text != "Hello, Ada! (1x)" {
		t.Fatalf("the added tool answered %q (isError %v)", text, isError)
	}

	writeAtomically(t, configPath, []byte(`{"transport": `))
	testkit.EventuallyTrue(t, gatewayTimeout, "the invalid config to be logged", func() bool {
		return strings.Contains(proc.Logs(), "the new config does not parse; still serving the previous one")
	})
	writeGatewayConfig(t, configPath, adapterconfig.TransportSSE, false, []gatewayTool{local})
	testkit.EventuallyTrue(t, gatewayTimeout, "the transport change to be refused", func() bool {
		return strings.Contains(proc.Logs(), "restart the adapter to apply it")
	})
	if text, isError := mcpGoCall(t, ctx, c, "team.greet", map[string]any{"name": "Bo"}); isError || text != "Hello, Bo! (1x)" {
		t.Fatalf("after refused reloads team.greet answered %q (isError %v), want the previous config served", text, isError)
	}
}

func httpBody(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return b.String()
}

// everythingProcess runs server-everything (streamable HTTP) on addr until stop.
type everythingProcess struct {
	cmd  *exec.Cmd
	logs bytes.Buffer
}

func startEverythingOn(t *testing.T, ctx context.Context, addr string) *everythingProcess {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	p := &everythingProcess{}
	p.cmd = exec.Command(peers.Node(t), serverEverythingEntry(t), "streamableHttp")
	p.cmd.Dir = filepath.Dir(filepath.Dir(serverEverythingEntry(t)))
	p.cmd.Env = append(os.Environ(), "PORT="+port)
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start server-everything: %v", err)
	}
	t.Cleanup(p.stop)
	testkit.EventuallyTrue(t, gatewayTimeout, "server-everything to listen on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
	return p
}

// stop kills the process, as a crash would, and waits for it.
func (p *everythingProcess) stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// TestGatewayReconnectsToARestartedServerEverything: server-everything killed and
// started again on the same port has forgotten the gateway's session (it answers the old
// session id with 400 "No valid session ID provided"); the gateway reconnects and the
// call succeeds. While it is down a call is mcp_call_failed:.
func TestGatewayReconnectsToARestartedServerEverything(t *testing.T) {
	ctx := testkit.Context(t, gatewayTimeout)
	addr := closedPort(t)
	everything := startEverythingOn(t, ctx, addr)
	dir := t.TempDir()
	configPath := filepath.Join(dir, adapterconfig.ConfigFileName)
	writeGatewayConfig(t, configPath, adapterconfig.TransportStreamableHTTP, true, []gatewayTool{{
		Name: "say", Description: "server-everything's echo, renamed.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
		Remote: &remoteSpec{Import: "e2e/everything", URL: "http://" + addr + "/mcp", Transport: peers.TransportStreamableHTTP,
			RemoteName: "echo", Timeout: "10s"},
	}})
	gateway := peers.StartAdapterServer(t, ctx, configPath, "--v", "1")
	c := mcpGoClient(t, ctx, gateway.BaseURL+adapterconfig.PathMCP)
	say := func(message string) (string, bool) {
		return mcpGoCall(t, ctx, c, "say", map[string]any{"message": message})
	}

	if text, isError := say("one"); isError || text != "Echo: one" {
		t.Fatalf("first call: %q (isError %v)", text, isError)
	}
	everything.stop()
	everything = startEverythingOn(t, ctx, addr)
	if text, isError := say("two"); isError || text != "Echo: two" {
		t.Fatalf("call after the remote restarted: %q (isError %v)\n%s", text, isError, gateway.Logs())
	}
	if logs := gateway.Logs(); !strings.Contains(logs, "retrying a call the remote did not process") {
		t.Errorf("the gateway did not retry on a new session after the restart:\n%s", logs)
	}
	everything.stop()
	if text, isError := say("three"); !isError || !strings.HasPrefix(text, "mcp_call_failed: ") {
		t.Fatalf("call while the remote is down: %q (isError %v), want mcp_call_failed:", text, isError)
	}
	startEverythingOn(t, ctx, addr)
	if text, isError := say("four"); isError || text != "Echo: four" {
		t.Fatalf("call once the remote is back: %q (isError %v)", text, isError)
	}
}
