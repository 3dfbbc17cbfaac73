package conformanceremote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// addModernTools adds the tools listed only in 2026-07-28: the input-required
// diagnostics of SEP-2322 and the diagnostic tools of server-stateless.
func (r *Remote) addModernTools() {
	s := r.mcp
	object := func(name, description string) mcp.Tool { return mcp.NewTool(name, mcp.WithDescription(description)) }
	// Refused before it runs without sampling (see refuseUndeclaredSampling); with it,
	// it succeeds.
	s.AddTool(object("test_missing_capability", "Needs the client's sampling capability."), text("Success"))
	s.AddTool(object("test_input_required_result_elicitation", "Asks the user's name, then greets them."), askName)
	s.AddTool(object("test_input_required_result_sampling", "Asks the client's model a question, then says what it answered."), askModel)
	s.AddTool(object("test_input_required_result_list_roots", "Asks the client's roots, then counts them."), askRoots)
	s.AddTool(object("test_input_required_result_request_state", "Asks for a confirmation, keeping its requestState."), askWithState)
	s.AddTool(object("test_input_required_result_multiple_inputs", "Asks a name, a greeting and the roots at once."), askThreeThings)
	s.AddTool(object("test_input_required_result_multi_round", "Asks two questions, one round each."), askTwoRounds)
	s.AddTool(object("test_input_required_result_tampered_state", "Asks for a confirmation under a signed requestState."), r.askWithSignedState)
	s.AddTool(object("test_input_required_result_capabilities", "Asks only what the client declared it can answer."), r.askWhatIsDeclared)
	s.AddTool(object("test_streaming_elicitation", "Answers on its response stream, asking nothing there."), reportThenAnswer)
	s.AddTool(object("test_logging_tool", "Logs a message, if the request asked for logs."), logOnce)
	s.AddTool(object("test_trigger_tool_change", "Tells listeners the tool list changed."), listChanged(mcp.MethodNotificationToolsListChanged))
	s.AddTool(object("test_trigger_prompt_change", "Tells listeners the prompt list changed."), listChanged(mcp.MethodNotificationPromptsListChanged))
}

func nameSchema(field string) map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{field: map[string]any{"type": "string"}}, "required": []string{field}}
}

func askName(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if answer := server.ElicitationResponse(req.Params.InputResponses, "user_name"); answer != nil {
		return mcp.NewToolResultText("Hello, " + answeredField(answer, "name") + "!"), nil
	}
	return server.NewInputRequestBuilder("").Elicit("user_name", mcp.ElicitationParams{Message: "What is your name?", RequestedSchema: nameSchema("name")}).ToolResult(), nil
}

func askModel(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if answer := server.SamplingResponse(req.Params.InputResponses, "sample_request"); answer != nil {
		return mcp.NewToolResultText("Sampling result: " + sampledText(answer)), nil
	}
	return server.NewInputRequestBuilder("").Sample("sample_request", samplePrompt("What is the capital of France?", 100)).ToolResult(), nil
}

func samplePrompt(prompt string, maxTokens int) mcp.CreateMessageParams {
	return mcp.CreateMessageParams{Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(prompt)}}, MaxTokens: maxTokens}
}

func askRoots(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if answer := server.RootsResponse(req.Params.InputResponses, "roots_request"); answer != nil {
		return mcp.NewToolResultText(fmt.Sprintf("Found %d root(s)", len(answer.Roots))), nil
	}
	return server.NewInputRequestBuilder("").Roots("roots_request").ToolResult(), nil
}

// stateOf decodes a requestState of plain JSON; nil when there is none or it is not.
func stateOf(req mcp.CallToolRequest) map[string]any {
	var state map[string]any
	if json.Unmarshal([]byte(req.Params.RequestState), &state) != nil {
		return nil
	}
	return state
}

func plainState(payload map[string]any) string {
	payload["nonce"] = nonce()
	data, _ := json.Marshal(payload)
	return string(data)
}

var confirmSchema = map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"}}

func askWithState(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	answer := server.ElicitationResponse(req.Params.InputResponses, "confirm")
	if state := stateOf(req); state["kind"] == "request-state" && answer != nil {
		if content, _ := answer.Content.(map[string]any); content["ok"] == true {
			return mcp.NewToolResultText("state-ok: requestState validated"), nil
		}
	}
	return server.NewInputRequestBuilder(plainState(map[string]any{"kind": "request-state"})).
		Elicit("confirm", mcp.ElicitationParams{Message: "Please confirm", RequestedSchema: confirmSchema}).ToolResult(), nil
}

func askThreeThings(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	responses := req.Params.InputResponses
	name, greeting, roots := server.ElicitationResponse(responses, "user_name"), server.SamplingResponse(responses, "greeting"), server.RootsResponse(responses, "client_roots")
	if stateOf(req)["kind"] == "multiple-inputs" && name != nil && greeting != nil && roots != nil {
		return mcp.NewToolResultText(fmt.Sprintf("Name: %s; Greeting: %s; Roots: %d", answeredField(name, "name"), sampledText(greeting), len(roots.Roots))), nil
	}
	return server.NewInputRequestBuilder(plainState(map[string]any{"kind": "multiple-inputs"})).
		Elicit("user_name", mcp.ElicitationParams{Message: "What is your name?", RequestedSchema: nameSchema("name")}).
		Sample("greeting", samplePrompt("Generate a greeting", 50)).
		Roots("client_roots").ToolResult(), nil
}

func askTwoRounds(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	state := stateOf(req)
	step1, step2 := server.ElicitationResponse(req.Params.InputResponses, "step1"), server.ElicitationResponse(req.Params.InputResponses, "step2")
	switch {
	case state["round"] == float64(1) && step1 != nil:
		return server.NewInputRequestBuilder(plainState(map[string]any{"round": 2, "name": answeredField(step1, "name")})).
			Elicit("step2", mcp.ElicitationParams{Message: "Step 2: What is your favorite color?", RequestedSchema: nameSchema("color")}).ToolResult(), nil
	case state["round"] == float64(2) && step2 != nil:
		name, _ := state["name"].(string)
		return mcp.NewToolResultText(fmt.Sprintf("Multi-round complete for %s who likes %s", name, answeredField(step2, "color"))), nil
	}
	return server.NewInputRequestBuilder(plainState(map[string]any{"round": 1})).
		Elicit("step1", mcp.ElicitationParams{Message: "Step 1: What is your name?", RequestedSchema: nameSchema("name")}).ToolResult(), nil
}

// askWithSignedState refuses a requestState it did not sign (the HTTP layer answers
// that with -32602, see refuseTamperedState); a signed one with an answer completes.
func (r *Remote) askWithSignedState(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if req.Params.RequestState != "" {
		state := r.verify(req.Params.RequestState)
		if state == nil {
			return nil, fmt.Errorf("requestState integrity check failed")
		}
		if state["kind"] == "tamper-test" && server.ElicitationResponse(req.Params.InputResponses, "confirm") != nil {
			return mcp.NewToolResultText("integrity-ok: state verified"), nil
		}
	}
	return server.NewInputRequestBuilder(r.sign(map[string]any{"kind": "tamper-test", "nonce": nonce()})).
		Elicit("confirm", mcp.ElicitationParams{Message: "Please confirm", RequestedSchema: confirmSchema}).ToolResult(), nil
}

// askWhatIsDeclared asks for elicitation and sampling only as far as the request
// declared them.
func (r *Remote) askWhatIsDeclared(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if len(req.Params.InputResponses) > 0 {
		keys := make([]string, 0, len(req.Params.InputResponses))
		for k := range req.Params.InputResponses {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return mcp.NewToolResultText("capabilities-ok: received " + strings.Join(keys, ",")), nil
	}
	caps := declared(ctx)
	b := server.NewInputRequestBuilder(r.sign(map[string]any{"kind": "capabilities-test", "nonce": nonce()}))
	asked := false
	if caps != nil && caps.Elicitation != nil {
		b.Elicit("elicit_input", mcp.ElicitationParams{Message: "Elicitation input", RequestedSchema: nameSchema("value")})
		asked = true
	}
	if caps != nil && caps.Sampling != nil {
		b.Sample("sample_input", samplePrompt("Sample request", 50))
		asked = true
	}
	if !asked {
		return mcp.NewToolResultText("No supported capabilities declared"), nil
	}
	return b.ToolResult(), nil
}

// declared are the client capabilities the request declared (2026-07-28), nil if none.
func declared(ctx context.Context) *mcp.ClientCapabilities {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil {
		return info.ClientCapabilities
	}
	return nil
}

// reportThenAnswer sends a progress notification on the call's stream, then answers:
// the stream carries notifications about the call and never a request of its own.
func reportThenAnswer(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s := server.ServerFromContext(ctx)
	_ = s.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{"progressToken": "token-abc", "progress": 50, "total": 100})
	return mcp.NewToolResultText("Streaming complete"), nil
}

// logOnce logs one message; mcp-go sends it only to a request that set a log level.
func logOnce(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s := server.ServerFromContext(ctx)
	_ = s.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(mcp.LoggingLevelInfo, "conformance-remote", "Diagnostic trace logging activated"))
	return mcp.NewToolResultText("Logging evaluated"), nil
}

func listChanged(method mcp.MCPMethod) server.ToolHandlerFunc {
	return func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		server.ServerFromContext(ctx).SendNotificationToAllClients(string(method), nil)
		return mcp.NewToolResultText("Mutation triggered"), nil
	}
}

// intercept answers, before mcp-go, what mcp-go cannot: the closing and resumed streams
// of test_reconnection (polling.go), the Tasks extension (tasks.go), and the refusals
// of 2026-07-28 whose JSON-RPC error mcp-go's handlers cannot shape (refuse). What
// mcp-go answers, it answers with its notifications counted (written.go).
func (r *Remote) intercept(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.reconnections.resume(w, req) {
			return
		}
		if req.Method != http.MethodPost {
			next.ServeHTTP(w, req)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		var c call
		if json.Unmarshal(body, &c) == nil && (r.reconnections.closeMidCall(w, req, c) || r.tasks.serve(w, req, body) || r.refuse(w, c)) {
			return
		}
		next.ServeHTTP(countNotifications(w, req))
	})
}

// call is the part of a request that intercept reads.
type call struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name         string `json:"name"`
		URI          string `json:"uri"`
		RequestState string `json:"requestState"`
		Meta         struct {
			ProtocolVersion    string                     `json:"io.modelcontextprotocol/protocolVersion"`
			ClientCapabilities map[string]json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	} `json:"params"`
}

// refuse answers -32021 with data.requiredCapabilities (a handler's error becomes
// -32603 without data), -32602 for an altered requestState, and -32602 with data.uri
// for a resource the fixture does not serve (SEP-2164); false for anything else.
func (r *Remote) refuse(w http.ResponseWriter, c call) bool {
	if c.Params.Meta.ProtocolVersion == "" {
		return false
	}
	if c.Method == string(mcp.MethodResourcesRead) && !r.serves(c.Params.URI) {
		writeError(w, c.ID, mcp.INVALID_PARAMS, "Resource not found", map[string]any{"uri": c.Params.URI})
		return true
	}
	if c.Method != string(mcp.MethodToolsCall) {
		return false
	}
	switch {
	case c.Params.Name == "test_missing_capability" && c.Params.Meta.ClientCapabilities["sampling"] == nil:
		writeError(w, c.ID, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, "MissingRequiredClientCapabilityError",
			map[string]any{"requiredCapabilities": map[string]any{"sampling": map[string]any{}}})
		return true
	case c.Params.Name == "test_input_required_result_tampered_state" && c.Params.RequestState != "" && r.verify(c.Params.RequestState) == nil:
		writeError(w, c.ID, mcp.INVALID_PARAMS, "requestState integrity check failed", nil)
		return true
	}
	return false
}

// serves says whether uri is a resource of the fixture or one of its template's.
func (r *Remote) serves(uri string) bool {
	if _, ok := r.mcp.ListResources()[uri]; ok {
		return true
	}
	return strings.HasPrefix(uri, "test://template/") && strings.HasSuffix(uri, "/data")
}

func writeError(w http.ResponseWriter, id json.RawMessage, code int, message string, data any) {
	writeErrorStatus(w, http.StatusBadRequest, id, code, message, data)
}

// writeErrorStatus answers a JSON-RPC error with an HTTP status, as 2026-07-28 wants.
func writeErrorStatus(w http.ResponseWriter, status int, id json.RawMessage, code int, message string, data any) {
	rpcErr := map[string]any{"code": code, "message": message}
	if data != nil {
		rpcErr["data"] = data
	}
	if len(id) == 0 || slices.Equal(id, []byte("null")) {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": rpcErr})
}
