package adapter

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/test/testenv/taskremote"
)

const jobSchema = `{"type":"object","properties":{"name":{"type":"string"}}}`

// taskTools re-export the task fixture's job as work.job, a remote of 2026-07-28
// that offers the Tasks extension, relaying relay.
func taskTools(url string, relay ...string) []adapterconfig.Tool {
	tool := remoteTool("work.job", jobSchema, url, adapterconfig.TransportStreamableHTTP, taskremote.ToolJob)
	tool.Remote.Eras = []string{adapterconfig.EraModern}
	tool.Remote.Extensions = []string{adapterconfig.ExtensionTasks}
	tool.Remote.Relay = relay
	return []adapterconfig.Tool{tool}
}

// taskCaller posts raw requests of protocol 2026-07-28 to a gateway.
type taskCaller struct {
	url     string
	headers map[string]string // a caller's token
	// declares the Tasks extension; elicits declares elicitation.
	declares, elicits bool
}

var taskRequestIDs atomic.Int64

// send posts method with params (JSON object members, without braces) and name for
// Mcp-Name, and returns the HTTP status and the result or error answered.
func (c taskCaller) send(t *testing.T, method, name, params string) (int, json.RawMessage, *answeredError) {
	t.Helper()
	var caps []string
	if c.elicits {
		caps = append(caps, `"elicitation":{}`)
	}
	if c.declares {
		caps = append(caps, `"extensions":{"io.modelcontextprotocol/tasks":{}}`)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"task-caller","version":"0"},` +
		`"io.modelcontextprotocol/clientCapabilities":{` + strings.Join(caps, ",") + `}}`
	if params != "" {
		params += ","
	}
	msg := `{"jsonrpc":"2.0","id":` + mustJSON(taskRequestIDs.Add(1)) + `,"method":"` + method + `","params":{` + params + meta + `}}`
	headers := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}
	for k, v := range c.headers {
		headers[k] = v
	}
	reply := postRPC(t, c.url+adapterconfig.PathMCP, headers, msg)
	result, failed := answerOf(t, method, reply)
	return reply.status, result, failed
}

// result is send that fails the test on an error.
func (c taskCaller) result(t *testing.T, method, name, params string) gatewayTask {
	t.Helper()
	_, raw, failed := c.send(t, method, name, params)
	if failed != nil {
		t.Fatalf("%s: error %+v", method, *failed)
	}
	var task gatewayTask
	if err := json.Unmarshal(raw, &task); err != nil {
		t.Fatalf("%s: %s: %v", method, raw, err)
	}
	task.raw = raw
	return task
}

func (c taskCaller) call(t *testing.T) gatewayTask {
	t.Helper()
	return c.result(t, "tools/call", "work.job", `"name":"work.job","arguments":{}`)
}

func (c taskCaller) get(t *testing.T, handle string) gatewayTask {
	t.Helper()
	return c.result(t, "tasks/get", handle, `"taskId":`+mustJSON(handle))
}

// gatewayTask is a task (or any result) as the caller got it.
type gatewayTask struct {
	ResultType    string                     `json:"resultType"`
	TaskID        string                     `json:"taskId"`
	Status        string                     `json:"status"`
	TTLMs         *int64                     `json:"ttlMs"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	Result        *struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	} `json:"result"`
	IsError bool                    `json:"isError"`
	Content []struct{ Text string } `json:"content"`
	raw     json.RawMessage
}

func (g gatewayTask) resultText() string {
	if g.Result == nil || len(g.Result.Content) == 0 {
		return ""
	}
	return g.Result.Content[0].Text
}

// A caller of 2026-07-28 that declares the Tasks extension gets the remote's task
// through a gateway, stateless or stateful, with or without relaying (the pass-through
// and mcp-go's path): a taskId of the gateway's own, which it polls to completion.
// Where the import relays elicitation, the task asks the caller for input on the way
// and takes the caller's answer (tasks/update). The remote sees only its own taskId,
// in params and Mcp-Name, and the extension declared on every request.
func TestTasksGateway_TaskIsPolledToCompletionThroughTheGateway(t *testing.T) {
	cases := []struct {
		name      string
		stateless bool
		relay     []string
		want      string
	}{
		{"stateless pass-through", true, nil, "Hello, stranger!"},
		{"stateless relaying elicitation", true, []string{adapterconfig.RelayElicitation}, "Hello, Luca!"},
		{"stateful", false, nil, "Hello, stranger!"},
		{"stateful relaying elicitation", false, []string{adapterconfig.RelayElicitation}, "Hello, Luca!"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			remote := taskremote.Start(t)
			gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, tc.stateless, taskTools(remote.URL, tc.relay...)...))
			c := taskCaller{url: gw.baseURL, declares: true, elicits: true}
			created := c.call(t)
			if created.ResultType != "task" || created.Status != "working" || !strings.HasPrefix(created.TaskID, "cantus-task.") ||
				created.TTLMs == nil || *created.TTLMs != taskremote.TTLMs {
				t.Fatalf("the call got %s, want the remote's task under a handle of the gateway", created.raw)
			}
			if !strings.Contains(string(created.raw), `"test-server"`) {
				t.Errorf("the task %s does not name the gateway in its _meta", created.raw)
			}
			calls := remote.Requests("tools/call")
			if len(calls) != 1 || !calls[0].Declared {
				t.Fatalf("the remote got %+v, want one call declaring the extension", calls)
			}
			if relays := len(tc.relay) > 0; strings.Contains(string(calls[0].Capabilities), "elicitation") != relays {
				t.Errorf("the remote's call declared %s, want elicitation only where the import relays it", calls[0].Capabilities)
			}
			handle := created.TaskID
			if got := c.get(t, handle); got.Status != "working" || got.TaskID != handle || got.ResultType != "complete" {
				t.Fatalf("the first poll got %s, want working under the handle", got.raw)
			}
			next := c.get(t, handle)
			if len(tc.relay) > 0 {
				var asked struct {
					Method string `json:"method"`
				}
				_ = json.Unmarshal(next.InputRequests[taskremote.ElicitationKey], &asked)
				if next.Status != "input_required" || asked.Method != "elicitation/create" || next.TaskID != handle {
					t.Fatalf("the second poll got %s, want the remote's elicitation", next.raw)
				}
				ack := c.result(t, "tasks/update", handle, `"taskId":`+mustJSON(handle)+
					`,"inputResponses":{"name":{"action":"accept","content":{"name":"Luca"}}}`)
				if ack.ResultType != "complete" || ack.TaskID != "" {
					t.Fatalf("tasks/update got %s, want an empty acknowledgement", ack.raw)
				}
				if got := c.get(t, handle); got.Status != "working" {
					t.Fatalf("the poll after the update got %s, want working", got.raw)
				}
				next = c.get(t, handle)
			}
			if next.Status != "completed" || next.resultText() != tc.want || next.TaskID != handle {
				t.Fatalf("the last poll got %s, want completed with %q", next.raw, tc.want)
			}
			remoteID := calls[0].TaskID
			for _, req := range remote.Requests("") {
				if !strings.HasPrefix(req.Method, "tasks/") {
					continue
				}
				if remoteID == "" {
					remoteID = req.TaskID
				}
				if req.TaskID != remoteID || req.McpName != remoteID || req.McpMethod != req.Method || !req.Declared || strings.HasPrefix(req.TaskID, "cantus-task.") {
					t.Errorf("the remote got %+v, want its own taskId %q in params and Mcp-Name, the extension declared", req, remoteID)
				}
			}
			if remote.Status(remoteID) != "completed" {
				t.Errorf("the remote's task %q is %q, want completed", remoteID, remote.Status(remoteID))
			}
		})
	}
}

// A gateway that serves a remote offering tasks says so in server/discover.
func TestTasksGateway_DiscoverAdvertisesTheExtension(t *testing.T) {
	remote := taskremote.Start(t)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, taskTools(remote.URL)...))
	_, raw, failed := taskCaller{url: gw.baseURL}.send(t, "server/discover", "", "")
	if failed != nil {
		t.Fatalf("server/discover: %+v", *failed)
	}
	var discovered struct {
		Capabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(raw, &discovered); err != nil || discovered.Capabilities.Extensions[adapterconfig.ExtensionTasks] == nil {
		t.Errorf("server/discover answered %s, want the Tasks extension among its capabilities", raw)
	}
	plain := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, plainDualEraTools("http://127.0.0.1:1/mcp", adapterconfig.EraModern)...))
	if _, raw, _ := (taskCaller{url: plain.baseURL}).send(t, "server/discover", "", ""); strings.Contains(string(raw), adapterconfig.ExtensionTasks) {
		t.Errorf("a gateway without a remote offering tasks advertised them: %s", raw)
	}
}

// tasks/cancel reaches the remote with its own taskId; the task is then cancelled.
func TestTasksGateway_CancelReachesTheRemote(t *testing.T) {
	for _, relay := range [][]string{nil, {adapterconfig.RelayElicitation}} {
		remote := taskremote.Start(t)
		gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, taskTools(remote.URL, relay...)...))
		c := taskCaller{url: gw.baseURL, declares: true}
		handle := c.call(t).TaskID
		ack := c.result(t, "tasks/cancel", handle, `"taskId":`+mustJSON(handle))
		if ack.ResultType != "complete" {
			t.Fatalf("tasks/cancel got %s, want an acknowledgement", ack.raw)
		}
		cancels := remote.Requests("tasks/cancel")
		if len(cancels) != 1 || remote.Status(cancels[0].TaskID) != "cancelled" {
			t.Fatalf("the remote got %+v, want one cancel of its task, which is now cancelled", cancels)
		}
		if got := c.get(t, handle); got.Status != "cancelled" {
			t.Errorf("the poll after the cancel got %s, want cancelled", got.raw)
		}
	}
}

// A handle given to one caller is refused to another (each authenticated by its own
// service-account token), which the remote never hears of; its caller polls with it.
func TestTasksGateway_HandleOfAnotherCallerIsRefused(t *testing.T) {
	remote := taskremote.Start(t)
	key := newClusterKey(t, "k1")
	cfg := identityConfig(t, key)
	cfg.Tools = taskTools(remote.URL)
	gw := serve(t, cfg)
	ada := taskCaller{url: gw.baseURL, declares: true, headers: bearerHeader(key.saToken(t, "agents", "ada", "uid-ada", "room"))}
	bo := taskCaller{url: gw.baseURL, declares: true, headers: bearerHeader(key.saToken(t, "agents", "bo", "uid-bo", "room"))}
	handle := ada.call(t).TaskID
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		_, raw, failed := bo.send(t, method, handle, `"taskId":`+mustJSON(handle))
		if failed == nil || failed.Code != -32602 || !strings.Contains(failed.Message, "another caller") {
			t.Errorf("bo's %s of ada's task got %s %+v, want it refused as another caller's", method, raw, failed)
		}
	}
	if n := len(remote.Requests("")) - 1; n != 0 {
		t.Errorf("the remote got %d requests about the task from bo, want none", n)
	}
	if got := ada.get(t, handle); got.Status != "working" {
		t.Errorf("ada's poll got %s, want her task", got.raw)
	}
}

// A handle altered in any part, made up, or a taskId that is no handle is refused, and
// the remote never sees it.
func TestTasksGateway_TamperedHandleIsRefused(t *testing.T) {
	remote := taskremote.Start(t)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, taskTools(remote.URL)...))
	c := taskCaller{url: gw.baseURL, declares: true}
	handle := c.call(t).TaskID
	body, mac, _ := strings.Cut(strings.TrimPrefix(handle, "cantus-task."), ".")
	payload, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		t.Fatal(err)
	}
	var sealed map[string]any
	if err := json.Unmarshal(payload, &sealed); err != nil {
		t.Fatal(err)
	}
	sealed["r"] = "another-task"
	sealed["e"] = sealed["e"].(float64) + 86400
	altered, _ := json.Marshal(sealed)
	forged := map[string]string{
		"payload changed": "cantus-task." + base64.RawURLEncoding.EncodeToString(altered) + "." + mac,
		"mac changed":     "cantus-task." + body + "." + strings.Repeat("A", len(mac)),
		"made up":         "cantus-task.e30.AAAA",
		"not a handle":    "a-task-of-the-remote",
	}
	for what, bad := range forged {
		_, raw, failed := c.send(t, "tasks/get", bad, `"taskId":`+mustJSON(bad))
		if failed == nil || failed.Code != -32602 || !strings.Contains(failed.Message, "not a task this gateway handed out") {
			t.Errorf("%s: got %s %+v, want the handle refused as forged", what, raw, failed)
		}
	}
	if n := len(remote.Requests("tasks/get")); n != 0 {
		t.Errorf("the remote got %d polls, want none", n)
	}
}

// A caller that does not declare the extension never gets a task: the remote hears the
// call without it and refuses it (this remote runs the tool only as a task), and the
// caller gets the remote's -32021 as sent, on every path; a remote that did not advertise the extension is not told of it either.
// A request about a task that does not declare the extension is refused -32021.
func TestTasksGateway_CallerThatDidNotDeclareTheExtensionGetsNoTask(t *testing.T) {
	for _, relay := range [][]string{nil, {adapterconfig.RelayElicitation}} {
		remote := taskremote.Start(t)
		gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, taskTools(remote.URL, relay...)...))
		status, raw, failed := taskCaller{url: gw.baseURL}.send(t, "tools/call", "work.job", `"name":"work.job","arguments":{}`)
		if raw != nil || failed == nil || failed.Code != -32021 || status != http.StatusBadRequest ||
			!strings.Contains(string(failed.Data), adapterconfig.ExtensionTasks) {
			t.Errorf("relay %v: the undeclared call got HTTP %d %s %+v, want no task but the remote's -32021 naming the extension", relay, status, raw, failed)
		}
		if calls := remote.Requests("tools/call"); len(calls) != 1 || calls[0].Declared {
			t.Errorf("relay %v: the remote got %+v, want one call without the extension", relay, calls)
		}
		handle := taskCaller{url: gw.baseURL, declares: true}.call(t).TaskID
		status, _, failed = taskCaller{url: gw.baseURL}.send(t, "tasks/get", handle, `"taskId":`+mustJSON(handle))
		if failed == nil || failed.Code != -32021 || status != http.StatusBadRequest || !strings.Contains(string(failed.Data), adapterconfig.ExtensionTasks) {
			t.Errorf("relay %v: an undeclared poll got HTTP %d %+v, want -32021 naming the extension", relay, status, failed)
		}
		if _, _, failed := (taskCaller{url: gw.baseURL}).send(t, "tasks/cancel", "gate-test", `"taskId":"gate-test"`); failed == nil || failed.Code != -32021 {
			t.Errorf("relay %v: an undeclared cancel of an unknown task got %+v, want -32021", relay, failed)
		}
	}
	remote := taskremote.Start(t)
	tools := taskTools(remote.URL)
	tools[0].Remote.Extensions = nil
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, tools...))
	_, raw, _ := taskCaller{url: gw.baseURL, declares: true}.send(t, "tools/call", "work.job", `"name":"work.job","arguments":{}`)
	if calls := remote.Requests("tools/call"); len(calls) != 1 || calls[0].Declared || strings.Contains(string(raw), `"task"`) {
		t.Errorf("a remote that did not advertise tasks got %+v and the caller %s, want the extension not declared upstream", calls, raw)
	}
}

// A request about a task whose Mcp-Name or Mcp-Method header disagrees with its body is
// refused -32020 (SEP-2243), and the remote never sees it.
func TestTasksGateway_TaskRequestWhoseHeadersDisagreeIsRefused(t *testing.T) {
	remote := taskremote.Start(t)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, taskTools(remote.URL)...))
	c := taskCaller{url: gw.baseURL, declares: true}
	handle := c.call(t).TaskID
	status, raw, failed := c.send(t, "tasks/get", "another-task", `"taskId":`+mustJSON(handle))
	if failed == nil || failed.Code != -32020 || status != http.StatusBadRequest {
		t.Errorf("a poll naming another task in Mcp-Name got HTTP %d %s %+v, want -32020", status, raw, failed)
	}
	c.headers = map[string]string{"Mcp-Method": "tools/call"}
	status, raw, failed = c.send(t, "tasks/get", handle, `"taskId":`+mustJSON(handle))
	if failed == nil || failed.Code != -32020 || status != http.StatusBadRequest {
		t.Errorf("a poll whose Mcp-Method says tools/call got HTTP %d %s %+v, want -32020", status, raw, failed)
	}
	if n := len(remote.Requests("tasks/get")); n != 0 {
		t.Errorf("the remote got %d polls, want none", n)
	}
}

// A request about a task runs as a call of its tool: once the authorization rules no
// longer let its caller call the tool (a reload), its polls are refused, and the remote
// never hears them.
func TestTasksGateway_PollIsAuthorizedAsACallOfTheTool(t *testing.T) {
	remote := taskremote.Start(t)
	key := newClusterKey(t, "k1")
	cfg := identityConfig(t, key, adapterconfig.AuthorizationRule{Tools: []string{"work.*"}, ServiceAccounts: []string{"agents/ada"}})
	cfg.Tools = taskTools(remote.URL)
	gw := serve(t, cfg)
	ada := taskCaller{url: gw.baseURL, declares: true, headers: bearerHeader(key.saToken(t, "agents", "ada", "uid-ada", "room"))}
	handle := ada.call(t).TaskID
	if got := ada.get(t, handle); got.Status != "working" {
		t.Fatalf("ada's poll got %s, want her task", got.raw)
	}
	revoked := identityConfig(t, key, adapterconfig.AuthorizationRule{Tools: []string{"search_*"}, ServiceAccounts: []string{"agents/ada"}})
	revoked.Tools = taskTools(remote.URL)
	if err := gw.Reload(revoked); err != nil {
		t.Fatal(err)
	}
	_, raw, failed := ada.send(t, "tasks/get", handle, `"taskId":`+mustJSON(handle))
	if failed == nil || failed.Code != -32600 || raw != nil || !strings.HasPrefix(failed.Message, "not_allowed: tool \"work.job\"") {
		t.Errorf("ada's poll after the rules changed got %s %+v, want it refused as her call of work.job would be", raw, failed)
	}
	if n := len(remote.Requests("tasks/get")); n != 1 {
		t.Errorf("the remote got %d polls, want ada's first one only", n)
	}
}
