package adapter

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

const greetSchema = `{"type":"object","properties":{"name":{"type":"string"},"count":{"type":"integer"}},"required":["name"]}`

func TestTemplateTool_RendersArguments(t *testing.T) {
	tests := []struct {
		name string
		text string
		args map[string]any
		want string
	}{
		{"plain field", "Hello {{.name}}", map[string]any{"name": "Ada"}, "Hello Ada"},
		{"integer printed as written", "{{.name}} x{{.count}}", map[string]any{"name": "a", "count": 1000000}, "a x1000000"},
		{"json helper", `{{json .}}`, map[string]any{"name": "a"}, `{"name":"a"}`},
		{"upper and lower helpers", "{{upper .name}} {{lower .name}}", map[string]any{"name": "MiXed"}, "MIXED mixed"},
		{"default helper for an absent argument", `{{index . "count" | default "none"}}`, map[string]any{"name": "a"}, "none"},
		{"default helper keeps a present argument", `{{index . "count" | default "none"}}`, map[string]any{"name": "a", "count": 3}, "3"},
	}
	tools := make([]adapterconfig.Tool, len(tests))
	for i, tt := range tests {
		tools[i] = templateTool(fmt.Sprintf("t%d", i), greetSchema, tt.text)
	}
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, tools...))
	c := connect(t, srv.baseURL, protocol20250618, nil)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantSuccess(t, callTool(t, c, fmt.Sprintf("t%d", i), tt.args), tt.want)
		})
	}
}

func TestTemplateTool_MissingKeyIsToolErrorNamingTheKey(t *testing.T) {
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true,
		templateTool("greet", greetSchema, "Hello {{.name}}, you are {{.age}}")))
	c := connect(t, srv.baseURL, protocol20250618, nil)

	wantToolError(t, callTool(t, c, "greet", map[string]any{"name": "Ada"}), "template_call_failed: ", `"age"`)
	// The server carries on after a failed call.
	wantToolError(t, callTool(t, c, "greet", map[string]any{"name": "Bob"}), "template_call_failed: ")
}

func TestInvalidArguments_ErrorNamesTheArgument(t *testing.T) {
	schema := `{"type":"object","additionalProperties":false,
		"properties":{"title":{"type":"string","maxLength":5},"tags":{"type":"array","items":{"type":"string"}},
		"mode":{"enum":["fast","slow"]}},"required":["title"]}`
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("note", schema, "ok")))
	c := connect(t, srv.baseURL, protocol20250618, nil)

	tests := []struct {
		name string
		args map[string]any
		want []string
	}{
		{"wrong type", map[string]any{"title": 42}, []string{"/title: ", "want string"}},
		{"too long", map[string]any{"title": "toolong"}, []string{"/title: ", "maxLength"}},
		{"missing required", map[string]any{}, []string{"missing property 'title'"}},
		{"unknown argument", map[string]any{"title": "a", "colour": "red"}, []string{"'colour' not allowed"}},
		{"wrong item type", map[string]any{"title": "a", "tags": []any{"x", 3}}, []string{"/tags/1: ", "want string"}},
		{"value outside enum", map[string]any{"title": "a", "mode": "medium"}, []string{"/mode: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantToolError(t, callTool(t, c, "note", tt.args), "invalid arguments: ", tt.want...)
		})
	}
	t.Run("valid arguments still succeed", func(t *testing.T) {
		wantSuccess(t, callTool(t, c, "note", map[string]any{"title": "a"}), "ok")
	})
}

func TestInvalidArguments_DraftFromSchemaIsHonoured(t *testing.T) {
	// draft-07 asserts "format" by default; 2020-12 would not.
	schema := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
		"properties":{"email":{"type":"string","format":"email"}}}`
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("mail", schema, "sent")))
	c := connect(t, srv.baseURL, protocol20250618, nil)

	wantToolError(t, callTool(t, c, "mail", map[string]any{"email": "not-an-email"}), "invalid arguments: ", "/email: ")
	wantSuccess(t, callTool(t, c, "mail", map[string]any{"email": "a@example.com"}), "sent")
}

// backendRecorder is an HTTP backend that records what the adapter sent it.
type backendRecorder struct {
	contentType atomic.Value
	body        atomic.Value
}

func TestHTTPTool_PostsArgumentsAsJSON(t *testing.T) {
	var rec backendRecorder
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "want POST", http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		rec.contentType.Store(r.Header.Get("Content-Type"))
		rec.body.Store(body)
		_, _ = w.Write([]byte(`{"answer":42}`))
	}))
	t.Cleanup(backend.Close)
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true,
		httpTool("ask", greetSchema, backend.URL+"/ask", 5*time.Second, 1024)))
	c := connect(t, srv.baseURL, protocol20250618, nil)

	args := map[string]any{"name": "Ada", "count": 9007199254740993} // above 2^53: precision must survive
	wantSuccess(t, callTool(t, c, "ask", args), `{"answer":42}`)

	if ct := rec.contentType.Load(); ct != "application/json" {
		t.Errorf("backend Content-Type = %v, want application/json", ct)
	}
	got, _ := rec.body.Load().([]byte)
	if !testkit.JSONEqual(t, got, []byte(`{"name":"Ada","count":9007199254740993}`)) {
		t.Errorf("backend received %s, want the arguments as a JSON object", got)
	}
	if !strings.Contains(string(got), "9007199254740993") {
		t.Errorf("backend received %s: the large integer lost precision", got)
	}
}

func TestHTTPTool_FailuresAreToolErrors(t *testing.T) {
	longBody := strings.Repeat("x", 2000)
	testDone := testkit.Context(t, testTimeout).Done()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/500":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/404-long":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(longBody))
		case "/slow":
			// Reading the body lets the server notice when the adapter hangs up.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-testDone: // the adapter never hung up: the test fails on its answer
			}
		case "/ten":
			_, _ = w.Write([]byte("0123456789"))
		case "/eleven":
			_, _ = w.Write([]byte("0123456789A"))
		}
	}))
	t.Cleanup(backend.Close)
	closed := closedPortURL(t)

	tests := []struct {
		name        string
		path        string
		url         string
		timeout     time.Duration
		maxBytes    int64
		wantOK      string
		wantPrefix  string
		wantContent []string
	}{
		{name: "non-2xx reports status and body", path: "/500", wantPrefix: "http_call_failed: 500 Internal Server Error: boom"},
		{name: "non-2xx body cut at 512 bytes", path: "/404-long", wantPrefix: "http_call_failed: 404 Not Found: " + longBody[:512]},
		{name: "timeout", path: "/slow", timeout: 200 * time.Millisecond, wantPrefix: "http_call_failed: ", wantContent: []string{"timeout 200ms"}},
		{name: "response over the limit", path: "/eleven", maxBytes: 10, wantPrefix: "http_call_failed: response exceeds 10 bytes"},
		{name: "response exactly at the limit", path: "/ten", maxBytes: 10, wantOK: "0123456789"},
		{name: "connection refused", url: closed, wantPrefix: "http_call_failed: ", wantContent: []string{"connection refused"}},
	}
	tools := make([]adapterconfig.Tool, len(tests))
	for i, tt := range tests {
		url := tt.url
		if url == "" {
			url = backend.URL + tt.path
		}
		timeout, maxBytes := tt.timeout, tt.maxBytes
		if timeout == 0 {
			timeout = 5 * time.Second
		}
		if maxBytes == 0 {
			maxBytes = 1 << 20
		}
		tools[i] = httpTool(fmt.Sprintf("t%d", i), objectSchema, url, timeout, maxBytes)
	}
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, tools...))
	c := connect(t, srv.baseURL, protocol20250618, nil)

	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := callTool(t, c, fmt.Sprintf("t%d", i), map[string]any{})
			if tt.wantOK != "" {
				wantSuccess(t, res, tt.wantOK)
				return
			}
			wantToolError(t, res, tt.wantPrefix, tt.wantContent...)
			if tt.path == "/404-long" && len(textOf(res)) != len(tt.wantPrefix) {
				t.Errorf("error carries %d bytes, want the body cut at 512", len(textOf(res)))
			}
		})
	}
}

// closedPortURL returns an http URL nothing listens on.
func closedPortURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr + "/"
}

func TestToolsList_PassesSchemaThroughUnchanged(t *testing.T) {
	schema := `{
	  "type": "object",
	  "title": "SearchArgs",
	  "description": "Pydantic-style model",
	  "additionalProperties": false,
	  "$defs": {"Mode": {"enum": ["a", "b"], "title": "Mode", "type": "string"}},
	  "properties": {
	    "query": {"type": "string", "title": "Query", "examples": ["cats"], "minLength": 1},
	    "mode": {"$ref": "#/$defs/Mode", "default": "a"},
	    "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null}
	  },
	  "required": ["query"]
	}`
	tool := templateTool("search", schema, "ok")
	readOnly := true
	tool.Description = "Searches"
	tool.Annotations = &adapterconfig.ToolAnnotations{Title: "Search", ReadOnlyHint: &readOnly}
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, tool))

	// Raw JSON-RPC, because mcp-go's client types drop schema keys they do not model.
	headers := map[string]string{"MCP-Protocol-Version": protocol20250618}
	if r := postRPC(t, srv.baseURL+adapterconfig.PathMCP, nil, initializeMessage(protocol20250618)); r.status != http.StatusOK {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	reply := postRPC(t, srv.baseURL+adapterconfig.PathMCP, headers, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	var list struct {
		Result struct {
			Tools []struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"inputSchema"`
				Annotations struct {
					Title        string `json:"title"`
					ReadOnlyHint *bool  `json:"readOnlyHint"`
				} `json:"annotations"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(reply.body, &list); err != nil {
		t.Fatalf("tools/list reply %s: %v", reply.body, err)
	}
	if len(list.Result.Tools) != 1 {
		t.Fatalf("tools/list returned %d tools: %s", len(list.Result.Tools), reply.body)
	}
	got := list.Result.Tools[0]
	if !testkit.JSONEqual(t, got.InputSchema, []byte(schema)) {
		t.Errorf("inputSchema changed on the way:\n got %s\nwant %s", got.InputSchema, schema)
	}
	if got.Description != "Searches" || got.Annotations.Title != "Search" || got.Annotations.ReadOnlyHint == nil || !*got.Annotations.ReadOnlyHint {
		t.Errorf("description/annotations not served as configured: %+v", got)
	}
}

func TestInitialize_ReportsServerInfoAndCapabilities(t *testing.T) {
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x")))
	reply := postRPC(t, srv.baseURL+adapterconfig.PathMCP, nil, initializeMessage(protocol20250618))
	var init struct {
		Result mcp.InitializeResult `json:"result"`
	}
	if err := json.Unmarshal(reply.body, &init); err != nil {
		t.Fatalf("initialize reply %s: %v", reply.body, err)
	}
	r := init.Result
	if r.ServerInfo.Name != "test-server" || r.ServerInfo.Version != "1.2.3" || r.Instructions != "test instructions" {
		t.Errorf("server info = %+v, instructions %q", r.ServerInfo, r.Instructions)
	}
	if r.Capabilities.Tools == nil || r.Capabilities.Logging == nil {
		t.Errorf("capabilities = %+v, want tools and logging", r.Capabilities)
	}
}

func TestProtocolVersions_CallSucceedsOnEachVersion(t *testing.T) {
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("greet", greetSchema, "Hello {{.name}}")))
	for _, version := range []string{protocol20250618, protocol20251125, "" /* unpinned: 2026-07-28 */} {
		t.Run("protocol "+version, func(t *testing.T) {
			c := connect(t, srv.baseURL, version, nil)
			if version != "" && c.ProtocolVersion() != version {
				t.Fatalf("negotiated %s, want %s", c.ProtocolVersion(), version)
			}
			tools, err := c.ListTools(testkit.Context(t, testTimeout), mcp.ListToolsRequest{})
			if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "greet" {
				t.Fatalf("tools/list = %+v, %v", tools, err)
			}
			wantSuccess(t, callTool(t, c, "greet", map[string]any{"name": "Ada"}), "Hello Ada")
		})
	}
}

func TestStreamableHTTP_SessionIDOnlyWhenStateful(t *testing.T) {
	tests := []struct {
		name        string
		stateless   bool
		wantSession bool
	}{
		{"stateful returns Mcp-Session-Id", false, true},
		{"stateless returns none", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, tt.stateless, templateTool("greet", greetSchema, "Hello {{.name}}")))
			reply := postRPC(t, srv.baseURL+adapterconfig.PathMCP, nil, initializeMessage(protocol20250618))
			if got := reply.header.Get("Mcp-Session-Id"); (got != "") != tt.wantSession {
				t.Fatalf("Mcp-Session-Id = %q, want present=%v", got, tt.wantSession)
			}
			c := connect(t, srv.baseURL, protocol20250618, nil)
			if (c.GetSessionId() != "") != tt.wantSession {
				t.Fatalf("client session = %q, want present=%v", c.GetSessionId(), tt.wantSession)
			}
			wantSuccess(t, callTool(t, c, "greet", map[string]any{"name": "Ada"}), "Hello Ada")
		})
	}
}

func TestStreamableHTTP_RefusesForeignHostOnLoopback(t *testing.T) {
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x")))
	tests := []struct {
		host       string
		wantStatus int
	}{
		{"evil.example.com", http.StatusForbidden},
		{"localhost", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testkit.Context(t, testTimeout), http.MethodPost, srv.baseURL+adapterconfig.PathMCP,
				strings.NewReader(initializeMessage(protocol20250618)))
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tt.host
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
		})
	}
}

func TestSSETransport_ServesTools(t *testing.T) {
	srv := serve(t, configWith(adapterconfig.TransportSSE, true, templateTool("greet", greetSchema, "Hello {{.name}}")))
	c := connectSSE(t, srv.baseURL, protocol20250618)

	tools, err := c.ListTools(testkit.Context(t, testTimeout), mcp.ListToolsRequest{})
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools/list over sse = %+v, %v", tools, err)
	}
	wantSuccess(t, callTool(t, c, "greet", map[string]any{"name": "Ada"}), "Hello Ada")
	wantToolError(t, callTool(t, c, "greet", map[string]any{}), "invalid arguments: ", "'name'")
	if status, _ := getStatus(t, srv.baseURL+adapterconfig.PathMCP); status != http.StatusNotFound {
		t.Errorf("GET %s on the sse transport = %d, want 404", adapterconfig.PathMCP, status)
	}
}

func TestSSETransport_AdvertisesARelativeMessageEndpoint(t *testing.T) {
	srv := serve(t, configWith(adapterconfig.TransportSSE, true, templateTool("a", objectSchema, "x")))
	req, _ := http.NewRequestWithContext(testkit.Context(t, testTimeout), http.MethodGet, srv.baseURL+adapterconfig.PathSSE, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	first := string(buf[:n])
	// A relative endpoint resolves against whatever host:port the client reached.
	if !strings.Contains(first, "event: endpoint\ndata: "+adapterconfig.PathMessage+"?sessionId=") {
		t.Fatalf("first event = %q, want a relative %s endpoint", first, adapterconfig.PathMessage)
	}
}

func TestBearerAuth_GuardsOnlyTheMCPEndpoint(t *testing.T) {
	const token = "s3cret-token"
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("greet", greetSchema, "Hello {{.name}}"))
	srv := serve(t, cfg, WithBearerToken(token))

	tests := []struct {
		name       string
		header     string
		wantStatus int
	}{
		{"no Authorization", "", http.StatusUnauthorized},
		{"wrong token", "Bearer nope", http.StatusUnauthorized},
		{"token as a prefix", "Bearer " + token + "x", http.StatusUnauthorized},
		{"other scheme", "Basic " + token, http.StatusUnauthorized},
		{"right token", "Bearer " + token, http.StatusOK},
		{"scheme is case-insensitive", "bearer " + token, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			headers := map[string]string{}
			if tt.header != "" {
				headers["Authorization"] = tt.header
			}
			reply := postRPC(t, srv.baseURL+adapterconfig.PathMCP, headers, initializeMessage(protocol20250618))
			if reply.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", reply.status, tt.wantStatus, reply.body)
			}
			wantChallenge := `Bearer resource_metadata="` + srv.baseURL + `/.well-known/oauth-protected-resource"`
			if tt.wantStatus == http.StatusUnauthorized && !strings.HasPrefix(reply.header.Get("WWW-Authenticate"), wantChallenge) {
				t.Errorf("WWW-Authenticate = %q, want %s", reply.header.Get("WWW-Authenticate"), wantChallenge)
			}
			if strings.Contains(string(reply.body), token) {
				t.Errorf("reply leaks the token: %s", reply.body)
			}
		})
	}
	t.Run("mcp-go client with the token", func(t *testing.T) {
		c := connect(t, srv.baseURL, protocol20250618, map[string]string{"Authorization": "Bearer " + token})
		wantSuccess(t, callTool(t, c, "greet", map[string]any{"name": "Ada"}), "Hello Ada")
	})
	t.Run("mcp-go client without the token", func(t *testing.T) {
		if _, err := dial(t, srv.baseURL, protocol20250618, nil); err == nil {
			t.Fatal("initialize without a token succeeded")
		}
	})
	for _, path := range []string{adapterconfig.PathHealthz, adapterconfig.PathReadyz} {
		t.Run(path+" stays open", func(t *testing.T) {
			if status, _ := getStatus(t, srv.baseURL+path); status != http.StatusOK {
				t.Fatalf("GET %s = %d, want 200 without a token", path, status)
			}
		})
	}
}

func TestBearerAuth_TokenFileIsReadAndTrimmed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("  file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x"))
	cfg.BearerTokenFile = path
	srv := serve(t, cfg)

	if r := postRPC(t, srv.baseURL+adapterconfig.PathMCP, nil, initializeMessage(protocol20250618)); r.status != http.StatusUnauthorized {
		t.Fatalf("without token: %d, want 401", r.status)
	}
	if r := postRPC(t, srv.baseURL+adapterconfig.PathMCP, map[string]string{"Authorization": "Bearer file-token"}, initializeMessage(protocol20250618)); r.status != http.StatusOK {
		t.Fatalf("with the file's token: %d, want 200 (%s)", r.status, r.body)
	}
}

func TestBearerAuth_TokenOptionOverridesFile(t *testing.T) {
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x"))
	cfg.BearerTokenFile = filepath.Join(t.TempDir(), "does-not-exist")
	srv := serve(t, cfg, WithBearerToken("in-memory"))
	if r := postRPC(t, srv.baseURL+adapterconfig.PathMCP, map[string]string{"Authorization": "Bearer in-memory"}, initializeMessage(protocol20250618)); r.status != http.StatusOK {
		t.Fatalf("with the in-memory token: %d, want 200", r.status)
	}
}

func TestNewServer_TokenFileProblemsAreErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		file string
		want string
	}{
		{"missing file", filepath.Join(t.TempDir(), "nope"), "read bearer token file"},
		{"empty file", empty, "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x"))
			cfg.BearerTokenFile = tt.file
			_, err := NewServer(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewServer error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestMetrics_CountCallsAndErrorsPerTool(t *testing.T) {
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true,
		templateTool("greet", greetSchema, "Hello {{.name}}"),
		templateTool("idle", objectSchema, "x")))
	c := connect(t, srv.baseURL, protocol20250618, nil)

	callTool(t, c, "greet", map[string]any{"name": "a"})
	callTool(t, c, "greet", map[string]any{"name": "b"})
	callTool(t, c, "greet", map[string]any{"name": 1}) // invalid arguments count as errors

	body := metricsText(t, srv.Server)
	for _, want := range []string{
		`cantus_adapter_tool_calls_total{tool="greet"} 3`,
		`cantus_adapter_tool_errors_total{tool="greet"} 1`,
		`cantus_adapter_tool_call_duration_seconds_count{tool="greet"} 3`,
		`cantus_adapter_tool_calls_total{tool="idle"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestMetrics_EachServerHasItsOwnRegistry(t *testing.T) {
	cfg := func() *adapterconfig.Config {
		return configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("greet", greetSchema, "x"))
	}
	a := serve(t, cfg())
	b := serve(t, cfg())
	callTool(t, connect(t, a.baseURL, protocol20250618, nil), "greet", map[string]any{"name": "a"})

	body := metricsText(t, b.Server)
	if !strings.Contains(body, `cantus_adapter_tool_calls_total{tool="greet"} 0`) {
		t.Fatalf("second server counted the first server's call:\n%s", body)
	}
}

func TestHealthz_AndReadyz_WhileServing(t *testing.T) {
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x")))
	for _, path := range []string{adapterconfig.PathHealthz, adapterconfig.PathReadyz} {
		if status, body := getStatus(t, srv.baseURL+path); status != http.StatusOK || body != "ok" {
			t.Errorf("GET %s = %d %q, want 200 ok", path, status, body)
		}
	}
}
