package mcpclient_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapter"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"

	// The tests use only the exported API: they live outside the package because
	// they start a real cantus adapter, which itself imports this package.
	. "github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// testBudget bounds every probe of the tests (the faults set their own, shorter,
// Timeout).
const testBudget = 10 * time.Second

// requireReason fails the test unless err is an *Error with reason whose message
// starts with the marker.
func requireReason(t *testing.T, err error, reason string) {
	t.Helper()
	_ = requireError(t, err, reason)
}

// requireError is requireReason returning the *Error, for a test that looks further.
func requireError(t *testing.T, err error, reason string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("Probe succeeded, want reason %s", reason)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Probe error %T %v is not an *Error", err, err)
	}
	if !strings.HasPrefix(err.Error(), "mcp_handshake_failed: ") {
		t.Fatalf("error %q lacks the mcp_handshake_failed: prefix", err)
	}
	if e.Reason != reason {
		t.Fatalf("reason %s (%s), want %s", e.Reason, err, reason)
	}
	t.Logf("%s: %s", e.Reason, err)
	return e
}

func mustProbe(t *testing.T, opts Options) *Result {
	t.Helper()
	res, err := Probe(testkit.Context(t, testBudget), opts)
	if err != nil {
		t.Fatalf("Probe %s (%s): %v (reason %s)", opts.URL, opts.Transport, err, ReasonOf(err))
	}
	return res
}

func toolNames(tools []Tool) []string {
	names := make([]string, len(tools))
	for i, tool := range tools {
		names[i] = tool.Name
	}
	return names
}

// ---- the project's adapter, in process ----

const greetSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
  "properties":{"name":{"type":"string","title":"Name","examples":["Ada"]},"times":{"type":"integer","minimum":1,"default":1}},
  "required":["name"],"additionalProperties":false}`

var adapterTools = []adapterconfig.Tool{
	{Name: "greet", Description: "Greets someone.", InputSchema: json.RawMessage(greetSchema),
		Template: &adapterconfig.TemplateBackend{Text: "hello {{.name}}"}},
	{Name: "ping", Description: "Answers pong.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Template: &adapterconfig.TemplateBackend{Text: "pong"}},
}

// recorder notes the requests a handler received.
type recorder struct {
	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	method, path string
	header       http.Header
	rpcMethod    string
	cursor       string
}

func (r *recorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := recorded{method: req.Method, path: req.URL.Path, header: req.Header.Clone()}
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			var m struct {
				Method string `json:"method"`
				Params struct {
					Cursor string `json:"cursor"`
				} `json:"params"`
			}
			_ = json.Unmarshal(body, &m)
			rec.rpcMethod, rec.cursor = m.Method, m.Params.Cursor
			req.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		r.mu.Lock()
		r.requests = append(r.requests, rec)
		r.mu.Unlock()
		next.ServeHTTP(w, req)
	})
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.requests...)
}

func (r *recorder) count() int { return len(r.all()) }

// startAdapter serves the project's adapter (internal/adapter) on a loopback
// httptest server and returns its MCP endpoint URL.
func startAdapter(t *testing.T, transport string, stateless bool, rec *recorder, opts ...adapter.Option) string {
	t.Helper()
	cfg := &adapterconfig.Config{
		Server:    adapterconfig.ServerInfo{Name: "adapter-under-probe", Version: "1.2.3", Instructions: "Probe me."},
		Transport: transport,
		Stateless: stateless,
		Tools:     adapterTools,
	}
	srv, err := adapter.NewServer(cfg, opts...)
	if err != nil {
		t.Fatalf("adapter.NewServer: %v", err)
	}
	h := srv.Handler()
	if rec != nil {
		h = rec.wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	if transport == adapterconfig.TransportSSE {
		return ts.URL + adapterconfig.PathSSE
	}
	return ts.URL + adapterconfig.PathMCP
}

// ---- a hand-written MCP server, for the shapes real servers rarely take ----

// fakeMCP answers initialize, notifications/initialized, tools/list (paginated) and
// DELETE over streamable HTTP.
type fakeMCP struct {
	// version is the protocolVersion answered; "" echoes the client's.
	version string
	// capabilities answered; nil means {"tools":{}}.
	capabilities map[string]any
	tools        []map[string]any
	pageSize     int // 0: one page
	// sse answers requests with a text/event-stream instead of application/json.
	sse       bool
	sessionID string
	// initializeError / toolsListError, when set, are JSON-RPC error answers.
	initializeError *ErrorObject
	toolsListError  *ErrorObject
	// pollTools (with sse) closes the tools/list stream after a priming event and
	// sends the answer on the GET that resumes it with Last-Event-ID (SEP-1699).
	pollTools bool

	mu      sync.Mutex
	pending []byte
}

func (f *fakeMCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		w.WriteHeader(http.StatusOK)
		return
	}
	if r.Method == http.MethodGet && f.pollTools && r.Header.Get("Last-Event-ID") == "ev-1" {
		f.mu.Lock()
		pending := f.pending
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: ev-2\nevent: message\ndata: %s\n\n", pending)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
			Cursor          string `json:"cursor"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	if req.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	answer := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	switch req.Method {
	case "initialize":
		if f.initializeError != nil {
			answer["error"] = f.initializeError
			break
		}
		version := f.version
		if version == "" {
			version = req.Params.ProtocolVersion
		}
		caps := f.capabilities
		if caps == nil {
			caps = map[string]any{"tools": map[string]any{}}
		}
		answer["result"] = map[string]any{
			"protocolVersion": version,
			"capabilities":    caps,
			"serverInfo":      map[string]any{"name": "fake", "version": "0.0.1"},
		}
		if f.sessionID != "" {
			w.Header().Set("Mcp-Session-Id", f.sessionID)
		}
	case "tools/list":
		if f.toolsListError != nil {
			answer["error"] = f.toolsListError
			break
		}
		start := 0
		if req.Params.Cursor != "" {
			start, _ = strconv.Atoi(strings.TrimPrefix(req.Params.Cursor, "page-at-"))
		}
		end := len(f.tools)
		if f.pageSize > 0 && start+f.pageSize < end {
			end = start + f.pageSize
		}
		result := map[string]any{"tools": f.tools[start:end]}
		if end < len(f.tools) {
			result["nextCursor"] = fmt.Sprintf("page-at-%d", end)
		}
		answer["result"] = result
	default:
		answer["error"] = ErrorObject{Code: -32601, Message: "method not found"}
	}
	data, _ := json.Marshal(answer)
	if f.sse && f.pollTools && req.Method == "tools/list" {
		f.mu.Lock()
		f.pending = data
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: ev-1\nretry: 20\ndata: \n\n")
		return
	}
	if f.sse {
		w.Header().Set("Content-Type", "text/event-stream")
		// A notification first, as servers do while they work.
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"working\"}}\n\n")
		fmt.Fprintf(w, "id: 1\nevent: message\ndata: %s\n\n", data)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// numberedTools returns n tools named tool-000, tool-001, …
func numberedTools(n int) []map[string]any {
	tools := make([]map[string]any, n)
	for i := range tools {
		tools[i] = map[string]any{
			"name":        fmt.Sprintf("tool-%03d", i),
			"description": fmt.Sprintf("Tool number %d.", i),
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "const": i}}},
		}
	}
	return tools
}

func startFake(t *testing.T, f *fakeMCP, rec *recorder) string {
	t.Helper()
	var h http.Handler = f
	if rec != nil {
		h = rec.wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}
