package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// The Tasks extension (io.modelcontextprotocol/tasks, SEP-2663, protocol 2026-07-28)
// lets a server answer a tools/call with a task, which the client then polls
// (tasks/get), answers (tasks/update) and may cancel (tasks/cancel). A gateway passes
// it through for a remote that advertised it (RemoteBackend.Extensions):
//   - a call goes upstream declaring the extension when its caller declared it, and
//     only then (a server must not answer a task to a request that did not);
//   - the remote's CreateTaskResult reaches the caller with a taskId of the
//     gateway's own: a handle that seals the remote's taskId, the caller it was given
//     to, the tool and import, and an expiry (the task's ttlMs, at most
//     MaxTaskHandleTTL), under the key of request states (requeststate.go) in a MAC
//     domain of its own. Unlike a request state, a handle is used again and again;
//   - tasks/get, tasks/update and tasks/cancel of a handle are served here
//     (ServeTask, before mcp-go, which keeps the tasks of an older draft of its own
//     for every other taskId): a forged or expired handle, or one given to another
//     caller, is refused with an error that says so; otherwise the request runs as a
//     call of the tool does (authorization, limits, metrics, audit) and goes to the
//     remote with its own taskId, and its answer carries the handle in its place.

// Bounds and names of task handles.
const (
	// ExtensionTasks is the Tasks extension's identifier.
	ExtensionTasks = adapterconfig.ExtensionTasks
	// MaxTaskHandleTTL bounds how long a task handle is good for: a remote's task
	// with no ttlMs, or a longer one, is reachable through the gateway this long.
	MaxTaskHandleTTL = 24 * time.Hour
	taskHandlePrefix = "cantus-task."
	// taskMACDomain keeps handles and request states apart under one key: a state's
	// MAC covers base64url text, which never holds a NUL.
	taskMACDomain        = "\x00task\x00"
	maxRemoteTaskIDBytes = 1 << 10
	resultTypeTask       = "task"
	statusInputRequired  = "input_required"
	statusCompleted      = "completed"
)

// Why a task handle is refused; each is the message of the error answered.
var (
	errTaskForged = errors.New("the taskId is not a task this gateway handed out (altered, or sealed with another key: " +
		"without a shared request state key, a task is reached only through the replica that created it)")
	errTaskExpired = errors.New("the task has expired at the gateway")
	errTaskCaller  = errors.New("the task was created for another caller")
	errTaskTool    = errors.New("the task's tool is no longer served from the import that created it")
)

// taskHandles are the tokens that wrap a remote's taskId.
var taskHandles = tokenKind{prefix: taskHandlePrefix, domain: taskMACDomain, forged: errTaskForged, expired: errTaskExpired, caller: errTaskCaller, subject: errTaskTool}

// sealTask makes the handle of the remote's task remoteID, created by caller's call of
// t and good for ttl.
func (s *stateSealer) sealTask(remoteID, caller string, t *Tool, ttl time.Duration) (string, error) {
	switch {
	case remoteID == "":
		return "", errors.New("the remote's task has no taskId")
	case len(remoteID) > maxRemoteTaskIDBytes:
		return "", fmt.Errorf("the remote's taskId holds %d bytes, more than the %d a gateway passes on", len(remoteID), maxRemoteTaskIDBytes)
	}
	return s.sealToken(taskHandles, sealedToken{Remote: remoteID, Expires: s.now().Add(ttl).Unix()}, caller, t)
}

// peekTask reads a handle without checking it: the tool it names says whose sealer
// checks it (openTask).
func peekTask(handle string) (sealedToken, bool) { return peekToken(taskHandles, handle) }

// openTask checks handle for caller's request about a task of t and returns the
// remote's taskId in it. A handle serves any number of requests until it expires.
func (s *stateSealer) openTask(handle, caller string, t *Tool) (string, error) {
	sealed, err := s.openToken(taskHandles, handle, caller, t)
	if err != nil {
		return "", err
	}
	return sealed.Remote, nil
}

// handleTTL is how long the handle of a task whose ttlMs is ttlMs is good for.
func handleTTL(ttlMs *float64) time.Duration {
	if ttlMs == nil || *ttlMs <= 0 || *ttlMs >= float64(MaxTaskHandleTTL/time.Millisecond) || math.IsNaN(*ttlMs) {
		return MaxTaskHandleTTL
	}
	return time.Duration(*ttlMs) * time.Millisecond
}

// ---- calls that may end in a task ----

// declaresTasks says whether caps declare the Tasks extension.
func declaresTasks(caps *mcp.ClientCapabilities) bool {
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[ExtensionTasks]
	return ok
}

// declareTasksUpstream makes meta declare the Tasks extension when the caller of ctx,
// of protocol 2026-07-28, declared it and t's remote offers it.
func (t *Tool) declareTasksUpstream(ctx context.Context, meta *mcpclient.RequestMeta) {
	info := server.RequestProtocolInfoFromContext(ctx)
	if meta == nil || !t.Backend.ServesTasks() || info == nil || !info.Modern || !declaresTasks(info.ClientCapabilities) {
		return
	}
	meta.ClientCapabilities = withTasksExtension(meta.ClientCapabilities)
}

// passesTasksDeclared says whether the call the pass-through forwards declared the
// Tasks extension in its _meta.
func passesTasksDeclared(call *forwardableCall) bool {
	var meta map[string]json.RawMessage
	if json.Unmarshal(call.Params.Meta, &meta) != nil {
		return false
	}
	var caps mcp.ClientCapabilities
	return json.Unmarshal(meta[mcp.MetaKeyClientCapabilities], &caps) == nil && declaresTasks(&caps)
}

// withTasksExtension is the capabilities object caps with the Tasks extension added.
func withTasksExtension(caps json.RawMessage) json.RawMessage {
	var members map[string]json.RawMessage
	if json.Unmarshal(caps, &members) != nil || members == nil {
		members = map[string]json.RawMessage{}
	}
	var extensions map[string]json.RawMessage
	if json.Unmarshal(members["extensions"], &extensions) != nil || extensions == nil {
		extensions = map[string]json.RawMessage{}
	}
	extensions[ExtensionTasks] = json.RawMessage("{}")
	members["extensions"], _ = json.Marshal(extensions)
	out, _ := json.Marshal(members)
	return out
}

// upstreamDeclaresTasks says whether the call forwarded with meta declared the Tasks
// extension to the remote.
func upstreamDeclaresTasks(meta *mcpclient.RequestMeta) bool {
	var caps mcp.ClientCapabilities
	return meta != nil && json.Unmarshal(meta.ClientCapabilities, &caps) == nil && declaresTasks(&caps)
}

// taskCreated says whether raw is a CreateTaskResult.
func taskCreated(raw json.RawMessage) bool {
	var head struct {
		ResultType string `json:"resultType"`
	}
	return json.Unmarshal(raw, &head) == nil && head.ResultType == resultTypeTask
}

// handOverTask is the remote's CreateTaskResult raw, to the call of t forwarded with
// meta, as the caller of ctx gets it: with a handle in place of the remote's taskId.
func (t *Tool) handOverTask(ctx context.Context, raw json.RawMessage, meta *mcpclient.RequestMeta) (json.RawMessage, error) {
	if !upstreamDeclaresTasks(meta) {
		return nil, errors.New("the remote answered with a task, which the call did not declare (io.modelcontextprotocol/tasks)")
	}
	var task struct {
		TaskID string   `json:"taskId"`
		TTL    *float64 `json:"ttlMs"`
	}
	if err := json.Unmarshal(raw, &task); err != nil {
		return nil, fmt.Errorf("the remote's task does not parse: %s", clip.Line(err.Error(), 200))
	}
	handle, err := t.remote.relay.states.sealTask(task.TaskID, callerOf(ctx), t, handleTTL(task.TTL))
	if err != nil {
		return nil, err
	}
	return withTaskID(raw, handle)
}

// withTaskID is task (a JSON object) with id as its taskId.
func withTaskID(task json.RawMessage, id string) (json.RawMessage, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(task, &members); err != nil || members == nil {
		return nil, errors.New("the remote's task is not a JSON object")
	}
	members["taskId"], _ = json.Marshal(id)
	return json.Marshal(members)
}

// answerTask answers the call of ctx (served by mcp-go) with the remote's task raw
// handed over, in place of the result mcp-go writes; the result returned stands for it
// in the server's metrics and audit.
func (t *Tool) answerTask(ctx context.Context, raw json.RawMessage, meta *mcpclient.RequestMeta) *mcp.CallToolResult {
	task, err := t.handOverTask(ctx, raw, meta)
	if err != nil {
		return mcp.NewToolResultError(MarkerRemoteError + err.Error())
	}
	if !eventWatchOf(ctx).answerWith(task) {
		return mcp.NewToolResultError(MarkerCallFailed + "the remote answered with a task, which a gateway hands over on streamable HTTP only")
	}
	return mcp.NewToolResultText("the remote created a task")
}

// ---- tasks/get, tasks/update and tasks/cancel ----

// taskRequest is a request of the Tasks extension as ServeTask reads it.
type taskRequest = request[struct {
	TaskID         string                     `json:"taskId"`
	InputResponses json.RawMessage            `json:"inputResponses"`
	Meta           map[string]json.RawMessage `json:"_meta"`
}]

// isTaskMethod says whether method is one of the Tasks extension's requests about a task.
func isTaskMethod(method string) bool {
	switch mcp.MCPMethod(method) {
	case mcpclient.MethodTasksGet, mcpclient.MethodTasksUpdate, mcpclient.MethodTasksCancel:
		return true
	}
	return false
}

// ServeTask answers body, the POST of r, when it is a tasks/get, tasks/update or
// tasks/cancel of protocol 2026-07-28, and reports whether it did. The tasks of that
// era a gateway knows are those it handed out (handles); a request about any other
// taskId, or one that does not declare the extension, is refused as the extension
// says. Requests of older eras it leaves to mcp-go, writing nothing: mcp-go has the
// tasks of 2025-11-25 of its own.
func ServeTask(w http.ResponseWriter, r *http.Request, body []byte, srv Server) bool {
	if !modernProtocol(r) || !bytes.Contains(body, []byte("tasks/")) {
		return false
	}
	var req taskRequest
	if !req.decode(body) || !isTaskMethod(req.Method) {
		return false
	}
	a := taskAnswer{w: w, id: req.ID}
	var caps mcp.ClientCapabilities
	var version string
	_ = json.Unmarshal(req.Params.Meta[mcp.MetaKeyProtocolVersion], &version)
	_ = json.Unmarshal(req.Params.Meta[mcp.MetaKeyClientCapabilities], &caps)
	switch {
	case version != r.Header.Get(mcp.HeaderProtocolVersion):
		a.fail(mcp.HEADER_MISMATCH, "the MCP-Protocol-Version header and the _meta's protocolVersion must name the same version", nil)
		return true
	case r.Header.Get(mcp.HeaderMethod) != req.Method || r.Header.Get(mcp.HeaderName) != req.Params.TaskID:
		a.fail(mcp.HEADER_MISMATCH, "the Mcp-Method and Mcp-Name headers must name the request's method and taskId (SEP-2243)", nil)
		return true
	case !declaresTasks(&caps):
		a.fail(mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, req.Method+" needs the "+ExtensionTasks+" extension, which this request's _meta did not declare",
			map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionTasks: map[string]any{}}}})
		return true
	}
	peeked, ok := peekTask(req.Params.TaskID)
	if !strings.HasPrefix(req.Params.TaskID, taskHandlePrefix) {
		ok = false
	}
	t := srv.RemoteTool(peeked.Tool)
	if !ok || t == nil || !t.Backend.ServesTasks() {
		a.fail(mcp.INVALID_PARAMS, "Failed to retrieve the task: "+errTaskForged.Error(), nil)
		return true
	}
	remoteID, err := t.remote.relay.states.openTask(req.Params.TaskID, callerOf(r.Context()), t)
	if err != nil {
		a.fail(mcp.INVALID_PARAMS, "Failed to retrieve the task: "+err.Error(), nil)
		return true
	}
	relayed := relayedCapabilities(&caps, t.Backend.Relay)
	encoded, _ := json.Marshal(relayed)
	meta := &mcpclient.RequestMeta{ProtocolVersion: version, ClientCapabilities: withTasksExtension(encoded)}
	t.serveTask(a, r, srv, &req, remoteID, meta)
	return true
}

// serveTask runs req, about the remote's task remoteID, as the server runs a call of t,
// and answers it.
func (t *Tool) serveTask(a taskAnswer, r *http.Request, srv Server, req *taskRequest, remoteID string, meta *mcpclient.RequestMeta) {
	var answer json.RawMessage
	var remoteErr *mcpclient.RPCError
	ran := false
	result := srv.RunCall(r, t.Name, func(ctx context.Context) *mcp.CallToolResult {
		ran = true
		raw, client, err := t.forwardTask(ctx, req.Method, remoteID, req.Params.InputResponses, meta)
		if errors.As(err, &remoteErr) && client != nil {
			remoteErr = &mcpclient.RPCError{Code: remoteErr.Code, Message: client.Redact(remoteErr.Message), Data: remoteErr.Data}
			return mcp.NewToolResultError(MarkerRemoteError + remoteErr.Message)
		}
		if err != nil {
			remoteErr = nil
			return t.remote.callFailed(ctx, t, err)
		}
		if answer, err = t.taskAnswer(req.Method, raw, req.Params.TaskID, client); err != nil {
			answer = nil
			return mcp.NewToolResultError(MarkerRemoteError + err.Error())
		}
		return passedThrough
	})
	switch {
	case answer != nil:
		WriteResult(a.w, a.id, modernResult(answer, srv.ServerInfo()))
	case remoteErr != nil:
		var data any
		if len(remoteErr.Data) > 0 {
			data = remoteErr.Data
		}
		a.fail(remoteErr.Code, remoteErr.Message, data)
	case !ran:
		a.fail(mcp.INVALID_REQUEST, ResultText(result), nil)
	default:
		a.fail(mcp.INTERNAL_ERROR, ResultText(result), nil)
	}
}

// forwardTask sends method about the remote's task remoteID to t's remote, with the
// caller's inputResponses for tasks/update.
func (t *Tool) forwardTask(ctx context.Context, method, remoteID string, inputResponses json.RawMessage, meta *mcpclient.RequestMeta) (json.RawMessage, *mcpclient.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, t.Backend.Timeout.Duration)
	defer cancel()
	params := map[string]any{"taskId": remoteID}
	if mcp.MCPMethod(method) == mcpclient.MethodTasksUpdate && len(inputResponses) > 0 {
		params["inputResponses"] = inputResponses
	}
	return t.remote.withClient(ctx, "task", t.Name, func(ctx context.Context, c *mcpclient.Client) (json.RawMessage, error) {
		return c.Modern(mcpclient.RequestMeta{}).Request(ctx, method, params, meta)
	})
}

// taskAnswer is the remote's answer raw to method as the caller gets it: a task with
// handle for its taskId, a completed tool result that failed marked as remoteResult
// marks it; input requests only of the kinds the import relays.
func (t *Tool) taskAnswer(method string, raw json.RawMessage, handle string, client *mcpclient.Client) (json.RawMessage, error) {
	if mcp.MCPMethod(method) != mcpclient.MethodTasksGet {
		return raw, nil // an acknowledgement
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return nil, errors.New("the remote's answer to tasks/get is not a task")
	}
	members["taskId"], _ = json.Marshal(handle)
	var status string
	_ = json.Unmarshal(members["status"], &status)
	switch status {
	case statusInputRequired:
		requests, err := t.taskInputRequests(members["inputRequests"])
		if err != nil {
			return nil, err
		}
		members["inputRequests"] = requests
	case statusCompleted:
		if failed, ok := failedToolResult(members["result"], client); ok {
			members["result"] = failed
		}
	}
	return json.Marshal(members)
}

// taskInputRequests are the input requests a task asks of its caller as the caller
// gets them: refused unless the import relays each one's kind, and a sampling request
// with includeContext "none", as askCaller passes an input-required result's on.
func (t *Tool) taskInputRequests(raw json.RawMessage) (json.RawMessage, error) {
	var requests map[string]json.RawMessage
	if err := json.Unmarshal(raw, &requests); err != nil {
		return nil, fmt.Errorf("the remote's task asks for input the gateway cannot pass on: %s", clip.Line(err.Error(), 200))
	}
	for key, rawRequest := range requests {
		var input mcp.InputRequest
		if err := json.Unmarshal(rawRequest, &input); err != nil {
			return nil, fmt.Errorf("the remote's task asks for input the gateway cannot pass on: %s", clip.Line(err.Error(), 200))
		}
		if kind := relayedMethods[string(input.Method)]; kind == "" || !slices.Contains(t.Backend.Relay, kind) {
			return nil, errors.New(t.unrelayed(string(input.Method)).Message)
		}
		if input.Sampling == nil {
			continue // passed on as the remote sent it
		}
		input.Sampling.IncludeContext = "none"
		encoded, err := json.Marshal(input)
		if err != nil {
			return nil, err
		}
		requests[key] = encoded
	}
	return json.Marshal(requests)
}

// failedToolResult is a task's result raw marked as remoteResult marks a failed one;
// false when it did not fail (it then passes as sent).
func failedToolResult(raw json.RawMessage, client *mcpclient.Client) (json.RawMessage, bool) {
	var head struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(raw, &head) != nil || !head.IsError {
		return nil, false
	}
	marked, err := json.Marshal(remoteResult(raw, client))
	return marked, err == nil
}

// ResultText is the text of a tool result, its text contents joined by newlines.
func ResultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if text, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, text.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// taskAnswer writes the JSON-RPC error answering a request about a task.
type taskAnswer struct {
	w  http.ResponseWriter
	id json.RawMessage
}

// fail answers with the JSON-RPC error code, message and data (nil for none); HTTP 400
// for a missing capability and for headers that do not match the body, as SEP-2575
// and SEP-2243 answer them.
func (a taskAnswer) fail(code int, message string, data any) {
	details := map[string]any{"code": code, "message": message}
	if data != nil {
		details["data"] = data
	}
	out, err := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": a.id, "error": details})
	if err != nil {
		return
	}
	status := http.StatusOK
	if code == mcp.MISSING_REQUIRED_CLIENT_CAPABILITY || code == mcp.HEADER_MISMATCH {
		status = http.StatusBadRequest
	}
	a.w.Header().Set("Content-Type", "application/json")
	a.w.WriteHeader(status)
	_, _ = a.w.Write(out)
}
