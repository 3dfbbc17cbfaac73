package taskremote

import (
	"encoding/json"
	"maps"
	"time"
)

// The tools the tasks-* scenarios of @modelcontextprotocol/conformance call, served as
// their descriptions ask (read from the scenarios; no code of theirs):
//   - greet {name}: sync only, "Hello, <name>!";
//   - slow_compute {seconds, label}: a task that completes after seconds (or at once,
//     synchronously, for a call that did not declare the extension);
//   - failing_job: runs only as a task (-32021 otherwise); completes with a tool
//     error after a moment;
//   - protocol_error_job: a task that fails with a JSON-RPC error;
//   - confirm_delete {filename}: a task that asks one elicitation, then completes;
//   - multi_input: a task that asks two elicitations at once and completes once both
//     are answered, in one tasks/update or more;
//   - test_tool_with_task: runs only as a task; first answers input_required asking
//     user_name (SEP-2322), then, called again with the answer, creates a task whose
//     result names it.
const (
	ToolGreet        = "greet"
	ToolSlowCompute  = "slow_compute"
	ToolFailingJob   = "failing_job"
	ToolProtocolJob  = "protocol_error_job"
	ToolConfirm      = "confirm_delete"
	ToolMultiInput   = "multi_input"
	ToolMRTRWithTask = "test_tool_with_task"
	// settleAfter is how long the failing and erring jobs work before they end.
	settleAfter = 300 * time.Millisecond
)

// ConformanceTools are the names of the tools above.
func ConformanceTools() []string {
	return []string{ToolGreet, ToolSlowCompute, ToolFailingJob, ToolProtocolJob, ToolConfirm, ToolMultiInput, ToolMRTRWithTask}
}

func conformanceToolList() []any {
	object := func(props map[string]any) map[string]any {
		return map[string]any{"type": "object", "properties": props}
	}
	str := map[string]any{"type": "string"}
	return []any{
		map[string]any{"name": ToolGreet, "description": "says hello", "inputSchema": object(map[string]any{"name": str})},
		map[string]any{"name": ToolSlowCompute, "description": "computes for a while", "execution": map[string]any{"taskSupport": "optional"},
			"inputSchema": object(map[string]any{"seconds": map[string]any{"type": "number"}, "label": str})},
		map[string]any{"name": ToolFailingJob, "description": "fails", "execution": map[string]any{"taskSupport": "required"}, "inputSchema": object(nil)},
		map[string]any{"name": ToolProtocolJob, "description": "crashes", "execution": map[string]any{"taskSupport": "optional"}, "inputSchema": object(nil)},
		map[string]any{"name": ToolConfirm, "description": "asks before deleting", "execution": map[string]any{"taskSupport": "optional"},
			"inputSchema": object(map[string]any{"filename": str})},
		map[string]any{"name": ToolMultiInput, "description": "asks two things", "execution": map[string]any{"taskSupport": "optional"}, "inputSchema": object(nil)},
		map[string]any{"name": ToolMRTRWithTask, "description": "asks, then works as a task", "execution": map[string]any{"taskSupport": "required"},
			"inputSchema": object(nil)},
	}
}

// elicitation is an elicitation/create input request asking message for a name.
func elicitation(message string) map[string]any {
	return map[string]any{"method": "elicitation/create", "params": map[string]any{"mode": "form", "message": message,
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}
}

func textResult(text string, isError bool) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": isError}
}

// syncResult is a tool result answered at once.
func syncResult(text string) map[string]any {
	out := textResult(text, false)
	out["resultType"] = "complete"
	return out
}

// callConformance serves a call of a conformance tool; handled is false for any other.
func (r *Remote) callConformance(m *message, declared bool) (result map[string]any, code int, text string, data any, handled bool) {
	args := m.Params.Arguments
	label, _ := args["label"].(string)
	switch m.Params.Name {
	case ToolGreet:
		name, _ := args["name"].(string)
		return syncResult("Hello, " + name + "!"), 0, "", nil, true
	case ToolSlowCompute:
		if !declared {
			return syncResult("computed " + label), 0, "", nil, true
		}
		seconds, _ := args["seconds"].(float64)
		return r.createKind(&task{kind: ToolSlowCompute, label: label, due: time.Now().Add(time.Duration(seconds * float64(time.Second)))}), 0, "", nil, true
	case ToolFailingJob, ToolMRTRWithTask:
		if !declared {
			return nil, -32021, "Missing required client capability", missing, true
		}
		if m.Params.Name == ToolMRTRWithTask {
			return r.mrtrRound(m), 0, "", nil, true
		}
		return r.createKind(&task{kind: ToolFailingJob, due: time.Now().Add(settleAfter)}), 0, "", nil, true
	case ToolProtocolJob:
		if !declared {
			return nil, -32603, "protocol_error_job runs as a task only", nil, true
		}
		return r.createKind(&task{kind: ToolProtocolJob, due: time.Now().Add(settleAfter)}), 0, "", nil, true
	case ToolConfirm:
		filename, _ := args["filename"].(string)
		if !declared {
			return nil, -32021, "Missing required client capability", missing, true
		}
		return r.createKind(&task{kind: ToolConfirm, label: filename, pending: map[string]any{"confirm": elicitation("Delete " + filename + "?")}}), 0, "", nil, true
	case ToolMultiInput:
		if !declared {
			return nil, -32021, "Missing required client capability", missing, true
		}
		return r.createKind(&task{kind: ToolMultiInput, pending: map[string]any{"first": elicitation("First?"), "second": elicitation("Second?")}}), 0, "", nil, true
	}
	return nil, 0, "", nil, false
}

// mrtrRound answers test_tool_with_task: input_required until the call brings the
// user_name answer, then a task.
func (r *Remote) mrtrRound(m *message) map[string]any {
	raw, ok := m.Params.InputResponses["user_name"]
	if !ok {
		return map[string]any{"resultType": "input_required", "inputRequests": map[string]any{"user_name": elicitation("Your name?")},
			"requestState": "asked-user-name"}
	}
	var answer struct {
		Content struct {
			Name string `json:"name"`
		} `json:"content"`
	}
	_ = json.Unmarshal(raw, &answer)
	return r.createKind(&task{kind: ToolMRTRWithTask, label: answer.Content.Name, due: time.Now()})
}

// createKind creates tk and answers its CreateTaskResult: working, whatever it does
// next (a task that asks does so from its first poll).
func (r *Remote) createKind(tk *task) map[string]any {
	tk.status, tk.createdAt = "working", time.Now().UTC().Format(time.RFC3339)
	out := r.store(tk)
	if len(tk.pending) > 0 {
		tk.status = "input_required"
	}
	return out
}

// settle moves a timed task on when its time has come.
func (tk *task) settle(now time.Time) {
	if tk.status != "working" || tk.kind == "" || tk.kind == ToolConfirm || tk.kind == ToolMultiInput || now.Before(tk.due) {
		return
	}
	switch tk.kind {
	case ToolSlowCompute:
		tk.status, tk.result = "completed", textResult("computed "+tk.label, false)
	case ToolFailingJob:
		tk.status, tk.result = "completed", textResult("failing_job failed, as it always does", true)
	case ToolProtocolJob:
		tk.status, tk.failure = "failed", map[string]any{"code": -32603, "message": "protocol_error_job crashed"}
	case ToolMRTRWithTask:
		tk.status, tk.result = "completed", textResult("Hello, "+tk.label+"!", false)
	}
}

// answer takes the caller's inputResponses for a task that asks: those of keys still
// pending, others ignored; once none is pending, the task completes.
func (tk *task) answer(responses map[string]json.RawMessage) {
	if tk.status != "input_required" {
		return
	}
	for key := range responses {
		delete(tk.pending, key)
	}
	if len(tk.pending) > 0 {
		return
	}
	text := "answered"
	if tk.kind == ToolConfirm {
		text = "deleted " + tk.label
	}
	tk.status, tk.result = "completed", textResult(text, false)
}

// conformanceView adds what a conformance tool's task holds in its status to out.
func (tk *task) conformanceView(out map[string]any) {
	switch tk.status {
	case "input_required":
		out["inputRequests"] = maps.Clone(tk.pending) // encoded once the lock is let go
	case "completed":
		out["result"] = tk.result
	case "failed":
		out["error"], out["statusMessage"] = tk.failure, "the job crashed"
	}
}
