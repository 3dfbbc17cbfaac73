package conformanceremote

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The Tasks extension (SEP-2663, io.modelcontextprotocol/tasks) of 2026-07-28, which
// mcp-go v1.2.1 does not have (it has the experimental tasks of 2025-11-25): the
// fixture serves it itself, before mcp-go, for requests of 2026-07-28 that declare the
// extension. The server decides which calls become tasks (the task tools below); a
// task is polled with tasks/get (its result, error or input requests inlined), answered
// with tasks/update and ended with tasks/cancel. Without the extension the optional
// task tools run synchronously (mcp-go's handlers) and the required ones are refused.

// TasksExtension names the extension in capabilities.extensions.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Task statuses.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

const (
	taskTTL          = 10 * time.Minute
	taskPollInterval = 200 * time.Millisecond
	// maxSyncCompute bounds slow_compute when it does not run as a task.
	maxSyncCompute = 2 * time.Second
)

type taskKey struct{}

// isTask says whether ctx is a task's.
func isTask(ctx context.Context) bool { return ctx.Value(taskKey{}) != nil }

// taskWork is what a task tool does once its call became a task: it ends with a tool
// result or a protocol error, asking its caller through ask on the way.
type taskWork func(ctx context.Context, args map[string]any, ask func(requests map[string]mcp.InputRequest) (mcp.InputResponses, error)) (*mcp.CallToolResult, error)

// taskTool is a tool whose calls may become tasks; required ones never run without.
type taskTool struct {
	required bool
	work     taskWork
}

// task is one task and what it came to.
type task struct {
	id                 string
	created, updated   time.Time
	status             string
	result             *mcp.CallToolResult
	failure            error
	pending            map[string]mcp.InputRequest
	answers            mcp.InputResponses
	answered, finished chan struct{} // answered is signalled on tasks/update; finished closed at the end
	cancel             context.CancelFunc
}

// tasks holds every task of the fixture.
type tasks struct {
	mu    sync.Mutex
	next  int
	byID  map[string]*task
	tools map[string]taskTool
}

// addTaskTools adds the task tools the tasks-* scenarios call, with mcp-go handlers
// for callers that do not use the extension.
func (r *Remote) addTaskTools() {
	r.tasks.tools = map[string]taskTool{
		"slow_compute":        {work: slowCompute},
		"failing_job":         {required: true, work: failingJob},
		"protocol_error_job":  {work: protocolErrorJob},
		"confirm_delete":      {work: confirmDelete},
		"multi_input":         {work: multiInput},
		"test_tool_with_task": {required: true, work: greetGatheredName},
	}
	s := r.mcp
	s.AddTool(mcp.NewTool("greet", mcp.WithDescription("Greets, at once (never a task)."), mcp.WithString("name", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("Hello, " + req.GetString("name", "") + "!"), nil
		})
	sync := func(name, description string, opts ...mcp.ToolOption) {
		work := r.tasks.tools[name].work
		s.AddTool(mcp.NewTool(name, append([]mcp.ToolOption{mcp.WithDescription(description)}, opts...)...),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				result, err := work(ctx, req.GetArguments(), func(map[string]mcp.InputRequest) (mcp.InputResponses, error) {
					return nil, fmt.Errorf("this tool asks its caller only as a task (%s)", TasksExtension)
				})
				if err != nil {
					// Run at once, a job's failure is the tool's.
					return mcp.NewToolResultError(err.Error()), nil
				}
				return result, nil
			})
	}
	sync("slow_compute", "Sleeps the given seconds, then answers; may become a task.", mcp.WithNumber("seconds"), mcp.WithString("label"))
	sync("failing_job", "Fails as a tool after a moment; always a task.")
	sync("protocol_error_job", "Crashes into a protocol error; may become a task.")
	sync("confirm_delete", "Asks to confirm deleting a file; may become a task.", mcp.WithString("filename"))
	sync("multi_input", "Asks two questions at once; may become a task.")
	sync("test_tool_with_task", "Asks a name (input-required), then greets it as a task.")
}

func slowCompute(ctx context.Context, args map[string]any, _ func(map[string]mcp.InputRequest) (mcp.InputResponses, error)) (*mcp.CallToolResult, error) {
	seconds, _ := args["seconds"].(float64)
	wait := time.Duration(seconds * float64(time.Second))
	if !isTask(ctx) {
		// Run at once (the caller did not declare the extension, or a gateway dropped
		// it), a long computation would only hold the caller until its timeout.
		wait = min(wait, maxSyncCompute)
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(wait):
	}
	return mcp.NewToolResultText(fmt.Sprintf("computed %v after %gs", args["label"], seconds)), nil
}

func failingJob(ctx context.Context, _ map[string]any, _ func(map[string]mcp.InputRequest) (mcp.InputResponses, error)) (*mcp.CallToolResult, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(200 * time.Millisecond):
	}
	return mcp.NewToolResultError("the job failed, as it always does"), nil
}

func protocolErrorJob(context.Context, map[string]any, func(map[string]mcp.InputRequest) (mcp.InputResponses, error)) (*mcp.CallToolResult, error) {
	return nil, fmt.Errorf("the job crashed")
}

func confirmDelete(_ context.Context, args map[string]any, ask func(map[string]mcp.InputRequest) (mcp.InputResponses, error)) (*mcp.CallToolResult, error) {
	answers, err := ask(map[string]mcp.InputRequest{"confirm": mcp.NewElicitationInputRequest(mcp.ElicitationParams{
		Message:         fmt.Sprintf("Delete %v?", args["filename"]),
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}}},
	})})
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultText(fmt.Sprintf("delete %v: %s", args["filename"], elicitedAction(answers, "confirm"))), nil
}

func multiInput(_ context.Context, _ map[string]any, ask func(map[string]mcp.InputRequest) (mcp.InputResponses, error)) (*mcp.CallToolResult, error) {
	question := func(message string) mcp.InputRequest {
		return mcp.NewElicitationInputRequest(mcp.ElicitationParams{Message: message, RequestedSchema: nameSchema("answer")})
	}
	answers, err := ask(map[string]mcp.InputRequest{"first": question("First question?"), "second": question("Second question?")})
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultText(fmt.Sprintf("first: %s; second: %s", elicitedAction(answers, "first"), elicitedAction(answers, "second"))), nil
}

// greetGatheredName is the task of test_tool_with_task, once its input-required round
// gathered the name (userNameOf).
func greetGatheredName(_ context.Context, args map[string]any, _ func(map[string]mcp.InputRequest) (mcp.InputResponses, error)) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultText(fmt.Sprintf("Hello, %v! (greeted as a task)", args["user_name"])), nil
}

func elicitedAction(answers mcp.InputResponses, key string) string {
	if a := server.ElicitationResponse(answers, key); a != nil {
		return string(a.Action)
	}
	return "unanswered"
}

// taskRequest is the part of a request of 2026-07-28 the task surface reads.
type taskRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name           string             `json:"name"`
		TaskID         string             `json:"taskId"`
		Arguments      map[string]any     `json:"arguments"`
		InputResponses mcp.InputResponses `json:"inputResponses"`
		Meta           struct {
			ProtocolVersion    string `json:"io.modelcontextprotocol/protocolVersion"`
			ClientCapabilities struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	} `json:"params"`
}

func (tr taskRequest) declaresTasks() bool {
	_, ok := tr.Params.Meta.ClientCapabilities.Extensions[TasksExtension]
	return ok
}

// serve answers the task surface of a request of 2026-07-28; false when it is not one.
func (ts *tasks) serve(w http.ResponseWriter, req *http.Request, body []byte) bool {
	var tr taskRequest
	if json.Unmarshal(body, &tr) != nil || tr.Params.Meta.ProtocolVersion == "" {
		return false
	}
	switch tr.Method {
	case "tasks/result", "tasks/list":
		writeErrorStatus(w, http.StatusNotFound, tr.ID, mcp.METHOD_NOT_FOUND, tr.Method+" was removed by the Tasks extension (SEP-2663)", nil)
	case "tasks/get", "tasks/update", "tasks/cancel":
		ts.serveTaskMethod(w, req, tr)
	case string(mcp.MethodToolsCall):
		return ts.serveCall(w, tr)
	default:
		return false
	}
	return true
}

var tasksRequired = map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}}

func (ts *tasks) serveTaskMethod(w http.ResponseWriter, req *http.Request, tr taskRequest) {
	if name := req.Header.Get(mcp.HeaderName); (name != "" && name != tr.Params.TaskID) || req.Header.Get(mcp.HeaderMethod) != tr.Method {
		writeErrorStatus(w, http.StatusBadRequest, tr.ID, mcp.HEADER_MISMATCH, "Mcp-Method and Mcp-Name must repeat the method and the taskId", nil)
		return
	}
	if !tr.declaresTasks() {
		writeErrorStatus(w, http.StatusBadRequest, tr.ID, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, tr.Method+" needs the "+TasksExtension+" extension", tasksRequired)
		return
	}
	t := ts.get(tr.Params.TaskID)
	if t == nil {
		writeErrorStatus(w, http.StatusBadRequest, tr.ID, mcp.INVALID_PARAMS, "no task "+tr.Params.TaskID, map[string]any{"taskId": tr.Params.TaskID})
		return
	}
	switch tr.Method {
	case "tasks/get":
		writeResult(w, tr.ID, ts.detailed(t))
	case "tasks/update":
		ts.update(t, tr.Params.InputResponses)
		writeResult(w, tr.ID, map[string]any{"resultType": "complete"})
	case "tasks/cancel":
		t.cancel()
		<-t.finished
		writeResult(w, tr.ID, map[string]any{"resultType": "complete"})
	}
}

// serveCall makes a call of a task tool a task when the request declared the
// extension, refuses a required one when it did not, and leaves other calls to mcp-go.
func (ts *tasks) serveCall(w http.ResponseWriter, tr taskRequest) bool {
	tool, ok := ts.tools[tr.Params.Name]
	switch {
	case !ok:
		return false
	case !tr.declaresTasks() && tool.required:
		writeErrorStatus(w, http.StatusBadRequest, tr.ID, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, tr.Params.Name+" runs only as a task: declare "+TasksExtension, tasksRequired)
		return true
	case !tr.declaresTasks():
		return false
	}
	args := tr.Params.Arguments
	if tr.Params.Name == "test_tool_with_task" {
		// Round 1 gathers a name the input-required way; round 2 becomes the task.
		name := answeredField(server.ElicitationResponse(tr.Params.InputResponses, "user_name"), "name")
		if server.ElicitationResponse(tr.Params.InputResponses, "user_name") == nil {
			writeResult(w, tr.ID, server.NewInputRequestBuilder("").Elicit("user_name", mcp.ElicitationParams{Message: "What is your name?", RequestedSchema: nameSchema("name")}).ToolResult())
			return true
		}
		args = map[string]any{"user_name": name}
	}
	t := ts.start(tool.work, args)
	created := ts.envelope(t)
	created["resultType"] = "task"
	writeResult(w, tr.ID, created)
	return true
}

// start records a task, durably before its CreateTaskResult is sent, and runs it.
func (ts *tasks) start(work taskWork, args map[string]any) *task {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), taskKey{}, true))
	now := time.Now().UTC()
	ts.mu.Lock()
	ts.next++
	t := &task{id: fmt.Sprintf("task-%d-%s", ts.next, nonce()), created: now, updated: now, status: taskWorking, cancel: cancel,
		answered: make(chan struct{}, 1), finished: make(chan struct{})}
	if ts.byID == nil {
		ts.byID = map[string]*task{}
	}
	ts.byID[t.id] = t
	ts.mu.Unlock()
	go ts.run(ctx, t, work, args)
	return t
}

func (ts *tasks) run(ctx context.Context, t *task, work taskWork, args map[string]any) {
	defer close(t.finished)
	result, err := work(ctx, args, func(requests map[string]mcp.InputRequest) (mcp.InputResponses, error) {
		return ts.ask(ctx, t, requests)
	})
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t.updated = time.Now().UTC()
	switch {
	case err != nil && ctx.Err() != nil:
		t.status = taskCancelled
	case err != nil:
		t.status, t.failure = taskFailed, err
	default:
		t.status, t.result = taskCompleted, result
	}
	t.pending = nil
}

// ask parks t as input_required until every request is answered.
func (ts *tasks) ask(ctx context.Context, t *task, requests map[string]mcp.InputRequest) (mcp.InputResponses, error) {
	ts.mu.Lock()
	t.status, t.pending, t.answers, t.updated = taskInputRequired, requests, mcp.InputResponses{}, time.Now().UTC()
	ts.mu.Unlock()
	for {
		ts.mu.Lock()
		if len(t.pending) == 0 {
			answers := t.answers
			t.status, t.updated = taskWorking, time.Now().UTC()
			ts.mu.Unlock()
			return answers, nil
		}
		ts.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.answered:
		}
	}
}

// update takes the answers to t's pending requests; others are ignored.
func (ts *tasks) update(t *task, answers mcp.InputResponses) {
	ts.mu.Lock()
	for key, answer := range answers {
		if _, ok := t.pending[key]; ok {
			t.answers[key] = answer
			delete(t.pending, key)
		}
	}
	ts.mu.Unlock()
	select {
	case t.answered <- struct{}{}:
	default:
	}
}

func (ts *tasks) get(id string) *task {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.byID[id]
}

// envelope is the Task of t: its id, status, times and TTL.
func (ts *tasks) envelope(t *task) map[string]any {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return map[string]any{"taskId": t.id, "status": t.status, "createdAt": t.created.Format(time.RFC3339Nano),
		"lastUpdatedAt": t.updated.Format(time.RFC3339Nano), "ttlMs": taskTTL.Milliseconds(), "pollIntervalMs": taskPollInterval.Milliseconds()}
}

// detailed is tasks/get's DetailedTask: the envelope with the result, the error or the
// pending input requests inlined.
func (ts *tasks) detailed(t *task) map[string]any {
	out := ts.envelope(t)
	out["resultType"] = "complete"
	ts.mu.Lock()
	defer ts.mu.Unlock()
	switch t.status {
	case taskCompleted:
		out["result"] = t.result
	case taskFailed:
		out["error"] = map[string]any{"code": mcp.INTERNAL_ERROR, "message": t.failure.Error()}
	case taskInputRequired:
		out["inputRequests"] = t.pending
	}
	return out
}

func writeResult(w http.ResponseWriter, id json.RawMessage, result any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}
