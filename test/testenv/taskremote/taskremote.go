// Package taskremote is a remote MCP server for tests that serves protocol 2026-07-28
// only, statelessly, with the Tasks extension (io.modelcontextprotocol/tasks,
// SEP-2663), written as a plain JSON-RPC handler (mcp-go v1.2.1 has only the
// experimental tasks of 2025-11-25). It records every request it gets.
//
// It serves one tool, ToolJob {name?}, which only runs as a task: a call whose _meta
// did not declare the extension is answered -32021 (Missing Required Client
// Capability) naming it. A task goes, one tasks/get at a time:
//   - working (the first poll), then, when the call declared elicitation,
//     input_required asking ElicitationKey (an elicitation/create form for a name)
//     until a tasks/update answers it, then working once more;
//   - completed, with the result "Hello, <name>!" (the name answered, else the
//     argument name, else "stranger").
//
// tasks/cancel makes a task cancelled. A taskId the fixture did not create is answered
// -32602, and a request about a task that did not declare the extension -32021.
package taskremote

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// Names the fixture uses.
const (
	Extension      = "io.modelcontextprotocol/tasks"
	ToolJob        = "job"
	ElicitationKey = "name"
	// TTLMs is the ttlMs of every task.
	TTLMs = 60000
	// Protocol is the only protocol version served.
	Protocol = "2026-07-28"
)

// Request is one request the fixture got.
type Request struct {
	Method string
	// McpMethod and McpName are the headers Mcp-Method and Mcp-Name.
	McpMethod, McpName string
	// TaskID is params.taskId; Declared says the request's _meta declared the
	// extension; Capabilities is its clientCapabilities as sent.
	TaskID       string
	Declared     bool
	Capabilities json.RawMessage
}

// Remote is a running fixture.
type Remote struct {
	URL string

	mu       sync.Mutex
	requests []Request
	tasks    map[string]*task
}

type task struct {
	status    string
	ask       bool // the call declared elicitation
	asked     bool
	name      string
	createdAt string
	polls     int

	// Of the conformance tools (conformance.go): the tool, its label, when a timed
	// one ends, what an asking one still asks, and how it ended.
	kind    string
	label   string
	due     time.Time
	pending map[string]any
	result  map[string]any
	failure map[string]any
}

// Start serves a fixture until the test ends.
func Start(t testing.TB) *Remote {
	r := &Remote{tasks: map[string]*task{}}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	testkit.CloseAtEnd(t, srv)
	r.URL = srv.URL + "/mcp"
	return r
}

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name           string                     `json:"name"`
		Arguments      map[string]any             `json:"arguments"`
		TaskID         string                     `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
		Meta           map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

type capabilities struct {
	Elicitation json.RawMessage            `json:"elicitation"`
	Extensions  map[string]json.RawMessage `json:"extensions"`
}

func (r *Remote) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(req.Body)
	var m message
	if json.Unmarshal(body, &m) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	rawCaps := m.Params.Meta["io.modelcontextprotocol/clientCapabilities"]
	var caps capabilities
	_ = json.Unmarshal(rawCaps, &caps)
	_, declared := caps.Extensions[Extension]
	r.mu.Lock()
	r.requests = append(r.requests, Request{Method: m.Method, McpMethod: req.Header.Get("Mcp-Method"), McpName: req.Header.Get("Mcp-Name"),
		TaskID: m.Params.TaskID, Declared: declared, Capabilities: rawCaps})
	r.mu.Unlock()
	result, code, text, data := r.answer(&m, declared, len(caps.Elicitation) > 0)
	status := http.StatusOK
	if why := headersDisagree(req, &m); why != "" {
		result, code, text, data, status = nil, -32020, why, nil, http.StatusBadRequest
	} else if code == -32021 {
		status = http.StatusBadRequest
	}
	response := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	if code != 0 {
		details := map[string]any{"code": code, "message": text}
		if data != nil {
			details["data"] = data
		}
		response["error"] = details
	} else {
		response["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(response)
}

// headersDisagree says why the Mcp-Method and Mcp-Name headers of req do not mirror
// m (SEP-2243); "" when they do.
func headersDisagree(req *http.Request, m *message) string {
	if req.Header.Get("Mcp-Method") != m.Method {
		return "the Mcp-Method header does not name the request's method"
	}
	name := ""
	switch m.Method {
	case "tools/call":
		name = m.Params.Name
	case "tasks/get", "tasks/update", "tasks/cancel":
		name = m.Params.TaskID
	default:
		return ""
	}
	if strings.TrimSpace(req.Header.Get("Mcp-Name")) != name {
		return "the Mcp-Name header does not name the request's tool or task"
	}
	return ""
}

// missing is the data of a -32021 naming the extension.
var missing = map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{Extension: map[string]any{}}}}

func (r *Remote) answer(m *message, declared, elicits bool) (result map[string]any, code int, text string, data any) {
	switch m.Method {
	case "server/discover":
		return map[string]any{"supportedVersions": []string{Protocol}, "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
			"capabilities": map[string]any{"tools": map[string]any{}, "extensions": map[string]any{Extension: map[string]any{}}},
			"_meta":        map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "task-remote", "version": "1.0.0"}}}, 0, "", nil
	case "tools/list":
		return map[string]any{"tools": append([]any{map[string]any{"name": ToolJob, "description": "runs as a task",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}},
			conformanceToolList()...), "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}, 0, "", nil
	case "tools/call":
		if result, code, text, data, ok := r.callConformance(m, declared); ok {
			return result, code, text, data
		}
		if m.Params.Name != ToolJob {
			return nil, -32602, "no tool " + m.Params.Name, nil
		}
		if !declared {
			return nil, -32021, "Missing required client capability", missing
		}
		return r.create(m, elicits), 0, "", nil
	case "tasks/get", "tasks/update", "tasks/cancel":
		if !declared {
			return nil, -32021, "Missing required client capability", missing
		}
		return r.onTask(m)
	case "initialize":
		return nil, -32600, "this server serves protocol " + Protocol + " only", nil
	}
	return nil, -32601, "method not found: " + m.Method, nil
}

func (r *Remote) create(m *message, elicits bool) map[string]any {
	name, _ := m.Params.Arguments["name"].(string)
	return r.store(&task{status: "working", ask: elicits, name: name, createdAt: time.Now().UTC().Format(time.RFC3339)})
}

// store keeps tk under a new taskId and returns its CreateTaskResult.
func (r *Remote) store(tk *task) map[string]any {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	taskID := hex.EncodeToString(id)
	r.mu.Lock()
	r.tasks[taskID] = tk
	r.mu.Unlock()
	out := tk.view(taskID)
	delete(out, "inputRequests")
	out["resultType"] = "task"
	return out
}

func (r *Remote) onTask(m *message) (map[string]any, int, string, any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tk := r.tasks[m.Params.TaskID]
	if tk == nil {
		return nil, -32602, "Failed to retrieve task: Task not found", nil
	}
	tk.settle(time.Now())
	switch m.Method {
	case "tasks/cancel":
		if tk.status == "working" || tk.status == "input_required" {
			tk.status = "cancelled"
		}
		return map[string]any{"resultType": "complete"}, 0, "", nil
	case "tasks/update":
		if tk.kind != "" {
			tk.answer(m.Params.InputResponses)
			return map[string]any{"resultType": "complete"}, 0, "", nil
		}
		if raw, ok := m.Params.InputResponses[ElicitationKey]; ok && tk.status == "input_required" {
			var answer struct {
				Content struct {
					Name string `json:"name"`
				} `json:"content"`
			}
			_ = json.Unmarshal(raw, &answer)
			tk.name, tk.status = answer.Content.Name, "working"
		}
		return map[string]any{"resultType": "complete"}, 0, "", nil
	}
	out := tk.view(m.Params.TaskID)
	out["resultType"] = "complete"
	if tk.kind == "" {
		tk.advance()
	}
	return out, 0, "", nil
}

// advance moves a task on after a poll saw it.
func (tk *task) advance() {
	tk.polls++
	if tk.status != "working" {
		return
	}
	if tk.ask && !tk.asked {
		tk.status, tk.asked = "input_required", true
		return
	}
	tk.status = "completed"
}

// view is what a poll of the task sees now.
func (tk *task) view(id string) map[string]any {
	out := map[string]any{"taskId": id, "status": tk.status, "createdAt": tk.createdAt, "lastUpdatedAt": tk.createdAt,
		"ttlMs": TTLMs, "pollIntervalMs": 10}
	if tk.kind != "" {
		tk.conformanceView(out)
		return out
	}
	switch tk.status {
	case "input_required":
		out["inputRequests"] = map[string]any{ElicitationKey: map[string]any{"method": "elicitation/create", "params": map[string]any{
			"mode": "form", "message": "Your name?",
			"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}}}}}
	case "completed":
		name := tk.name
		if name == "" {
			name = "stranger"
		}
		out["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": "Hello, " + name + "!"}}, "isError": false}
	}
	return out
}

// Requests are the requests of method the fixture got, in order; all for "".
func (r *Remote) Requests(method string) []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Request
	for _, req := range r.requests {
		if method == "" || req.Method == method {
			out = append(out, req)
		}
	}
	return out
}

// Status is the status of the fixture's task id now; "" for none.
func (r *Remote) Status(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tk := r.tasks[id]; tk != nil {
		return tk.status
	}
	return ""
}
