package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A gateway's hot path is a tools/call it forwards. Through mcp-go's server it costs a
// session, a decode of the request into mcp types, a decode of the remote's answer and
// an encode of it again: as much work again as the remote's own. passThrough answers
// the common case itself, with the answer's bytes as the remote sent them; anything
// else (other methods, progress tokens, _meta, the sse transport, stateful sessions,
// protocol versions without sessions) goes to mcp-go as before. The call still gets
// everything the server gives every call (authorization, limits, metrics, audit) and
// its argument validation.
//
// A forwarded resources/read or prompts/get of imported content is answered the same
// way, by the adapter (answerImported) after its own authorization and audit of reads:
// the remote's result as sent, through WriteResult. For a large resource the cost is
// in the bytes, so mcpclient reads the answer into one buffer of its size and hands the
// result over as a slice of it, not decoded or copied again.

// Server is what PassThrough needs of the adapter's server.
type Server interface {
	// RemoteTool is the re-exported tool served as name; nil when name is not one.
	RemoteTool(name string) *Tool
	// RunCall runs one call of the tool name, made by the request r, as the server runs
	// every call (authorization, limits, metrics, audit), and returns its result.
	RunCall(r *http.Request, name string, run func(context.Context) *mcp.CallToolResult) *mcp.CallToolResult
	// ServerInfo is the server's name and version as a JSON Implementation, which a
	// result of protocol 2026-07-28 carries in its _meta.
	ServerInfo() json.RawMessage
}

// request is a JSON-RPC request the gateway answers itself, its params decoded into P.
type request[P any] struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  P               `json:"params"`
}

// decode reads body into req and says whether it is a JSON-RPC 2.0 request with an id
// the gateway can answer.
func (req *request[P]) decode(body []byte) bool {
	return json.Unmarshal(body, req) == nil && req.JSONRPC == mcp.JSONRPC_VERSION && ValidRequestID(req.ID)
}

// forwardableCall is a tools/call request as passThrough takes it.
type forwardableCall = request[struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      json.RawMessage `json:"_meta"`
}]

// PassThrough answers body, the POST of r, when it is a call of a remote tool that it
// can forward as is, and reports whether it did; when it did not, nothing is written.
// The server asks only where it applies: the streamable HTTP transport, stateless.
func PassThrough(w http.ResponseWriter, r *http.Request, body []byte, srv Server) bool {
	if !mayCall(body) || !JSONContentType(r.Header.Get("Content-Type")) {
		return false
	}
	modern := modernProtocol(r)
	if !modern && !legacyProtocol(r) {
		return false
	}
	var call forwardableCall
	if !call.decode(body) || call.Method != string(mcp.MethodToolsCall) {
		return false
	}
	var meta *mcpclient.RequestMeta
	if modern {
		if meta = plainModernCall(r, &call); meta == nil {
			return false
		}
	} else if len(call.Params.Meta) > 0 {
		return false
	}
	t := srv.RemoteTool(call.Params.Name)
	if t == nil || t.relays() {
		// A relaying call may end in an input-required result, which mcp-go shapes.
		return false
	}
	if modern && !t.passesModern || !modern && !t.Backend.ServesLegacy() {
		// Forwarded in the other era, or with more than this path checks: mcp-go serves it.
		return false
	}
	if modern && t.Backend.ServesTasks() && passesTasksDeclared(&call) {
		// Declared upstream: the remote may answer with a task (tasks.go).
		meta.ClientCapabilities = withTasksExtension(meta.ClientCapabilities)
	}
	out := &answerWriter{w: w, id: call.ID}
	if modern {
		out.serverInfo = srv.ServerInfo()
	}
	var passed json.RawMessage
	var failure *CallFailure // a caller who must connect is answered -32042
	result := srv.RunCall(r, t.Name, func(ctx context.Context) *mcp.CallToolResult {
		ctx, failure = WithCallFailure(ctx)
		req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: call.Params.Name, RawArguments: call.Params.Arguments}}
		var raw json.RawMessage
		var failed *mcp.CallToolResult
		if modern {
			raw, failed = t.forwardModernCall(ctx, req, meta)
		} else {
			raw, failed = t.forwardCall(ctx, req, out.notify)
		}
		if failed != nil {
			return failed
		}
		passed = raw
		return passedThrough
	})
	switch {
	case passed != nil:
		out.answer(passed)
	case failure != nil && failure.Err() != nil:
		out.answerError(failure.Err())
	default:
		out.answerResult(result)
	}
	return true
}

// passedThrough stands, for the server's metrics and audit, for a successful result that
// is answered as the remote sent it.
var passedThrough = &mcp.CallToolResult{}

// forwardCall validates the call's arguments and forwards it. A successful result the
// remote sent is returned as sent; anything else as the result to answer (a failed
// remote result marked and scrubbed as remoteResult does).
func (t *Tool) forwardCall(ctx context.Context, req mcp.CallToolRequest, notify func(mcpclient.Message)) (json.RawMessage, *mcp.CallToolResult) {
	args, refused := t.Arguments(req)
	if refused != nil {
		return nil, refused
	}
	raw, client, failed := t.remote.forward(ctx, t, args, mcpclient.CallOptions{Notify: notify, Ask: t.refuseUnrelayed})
	if failed != nil {
		return nil, failed
	}
	if !successfulToolResult(raw) {
		return nil, remoteResult(raw, client)
	}
	return raw, nil
}

// successfulToolResult says whether raw is a tool result that is not an error, the only
// kind passed through untouched.
func successfulToolResult(raw json.RawMessage) bool {
	var head struct {
		Content json.RawMessage `json:"content"`
		IsError bool            `json:"isError"`
	}
	return json.Unmarshal(raw, &head) == nil && !head.IsError && len(head.Content) > 0 && head.Content[0] == '['
}

// mayCall is false for a body that cannot be a tools/call request, so that most other
// messages are not parsed twice. It is a shortcut for speed and guards no security
// decision: a call it misses (spelled "tools\/call") goes through mcp-go to the same
// runCall, with the same authorization, limits and audit.
func mayCall(body []byte) bool {
	return bytes.Contains(body, []byte("tools/call"))
}

// legacyProtocol is true for a request of a negotiated protocol version that has
// sessions, the only ones whose answer passThrough knows how to shape.
func legacyProtocol(r *http.Request) bool {
	v := r.Header.Get(mcp.HeaderProtocolVersion)
	return v != "" && mcp.IsValidProtocolVersion(v) && !mcp.IsModernProtocol(v)
}

// ValidRequestID is true for a JSON-RPC request id, a string or a number; id is a JSON value
// as the decoder found it, so its first byte tells.
func ValidRequestID(id json.RawMessage) bool {
	return len(id) > 0 && (id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9'))
}

// JSONContentType is true for a Content-Type of application/json, with or without
// parameters (charset).
func JSONContentType(contentType string) bool {
	if contentType == "application/json" {
		return true
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == "application/json"
}

// answerWriter writes the answer to one passed-through call: application/json, or an
// event stream once the remote sent a log message during the call, in mcp-go's format.
type answerWriter struct {
	w  http.ResponseWriter
	id json.RawMessage
	// serverInfo, set for a call of protocol 2026-07-28, goes in every result's _meta
	// in place of the remote's, as mcp-go puts it there.
	serverInfo json.RawMessage

	mu       sync.Mutex
	streamed bool
	done     bool
}

// notify passes a log message about the call on, as the remote sent it. (Progress
// comes only to calls with a progress token, which mcp-go serves.) It may run on
// another goroutine than the call's: the remote's sse stream.
func (a *answerWriter) notify(m mcpclient.Message) {
	if m.Method != string(mcp.MethodNotificationMessage) {
		return
	}
	event, err := json.Marshal(mcpclient.Message{JSONRPC: mcp.JSONRPC_VERSION, Method: m.Method, Params: m.Params})
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done {
		return
	}
	a.stream()
	a.writeEvent(event)
}

func (a *answerWriter) stream() {
	if a.streamed {
		return
	}
	a.streamed = true
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	h.Set("Cache-Control", "no-cache")
	a.w.WriteHeader(http.StatusOK)
}

// writeEvent writes one event of mcp-go's event stream whose data is the concatenation
// of parts, and flushes it.
func (a *answerWriter) writeEvent(parts ...[]byte) {
	a.write([]byte("event: message\ndata: "))
	a.write(parts...)
	a.write([]byte("\n\n"))
	if f, ok := a.w.(http.Flusher); ok {
		f.Flush()
	}
}

// write writes parts one after the other: the response is buffered, so the remote's
// result is not copied into a message of its own first.
func (a *answerWriter) write(parts ...[]byte) {
	for _, p := range parts {
		_, _ = a.w.Write(p)
	}
}

// answerError writes the JSON-RPC error response err stands for: -32042 with its
// elicitations for a URLElicitationRequiredError, a remote's error as sent for a
// RemoteError (HTTP 400 for -32021 when not streamed), an internal error otherwise.
func (a *answerWriter) answerError(err error) {
	details := map[string]any{"code": mcp.INTERNAL_ERROR, "message": err.Error()}
	status := http.StatusOK
	var required mcp.URLElicitationRequiredError
	var remote *RemoteError
	switch {
	case errors.As(err, &required):
		rpc := required.JSONRPCError()
		details["code"], details["data"] = rpc.Error.Code, rpc.Error.Data
	case errors.As(err, &remote):
		details = remote.details()
		if remote.Code == mcp.MISSING_REQUIRED_CLIENT_CAPABILITY {
			status = http.StatusBadRequest
		}
	}
	response, marshalErr := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": a.id, "error": details})
	if marshalErr != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.done = true
	if a.streamed {
		a.writeEvent(response)
		return
	}
	a.w.Header().Set("Content-Type", "application/json")
	a.w.WriteHeader(status)
	a.write(response)
}

// answer writes the JSON-RPC response carrying result, which is valid JSON.
func (a *answerWriter) answer(result json.RawMessage) {
	if a.serverInfo != nil {
		result = modernResult(result, a.serverInfo)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.done = true
	if !a.streamed {
		WriteResult(a.w, a.id, result)
		return
	}
	// An event's data is one line: a remote's pretty-printed result would end the
	// event at its first newline and leave the rest as stray fields.
	var compact bytes.Buffer
	if json.Compact(&compact, result) == nil {
		result = compact.Bytes()
	}
	response := resultResponse(a.id, result)
	a.writeEvent(response[:]...)
}

// WriteResult answers request id with the JSON-RPC response whose result is result
// (valid JSON), as a remote sent it: not decoded and encoded again, so every byte of it
// reaches the client, and written in parts rather than copied into one message first.
// Forwarded calls and forwarded reads of imported resources and prompts are answered
// with it. The length is set so that a large result (a resource's contents) is not
// sent chunked.
func WriteResult(w http.ResponseWriter, id, result json.RawMessage) {
	response := resultResponse(id, result)
	n := 0
	for _, p := range response {
		n += len(p)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	for _, p := range response {
		_, _ = w.Write(p)
	}
}

// resultResponse is the JSON-RPC response to request id carrying result, in parts.
func resultResponse(id, result json.RawMessage) [5][]byte {
	return [5][]byte{[]byte(`{"jsonrpc":"2.0","id":`), id, []byte(`,"result":`), result, []byte("}")}
}

func (a *answerWriter) answerResult(result *mcp.CallToolResult) {
	raw, err := json.Marshal(result)
	if err != nil {
		raw, _ = json.Marshal(mcp.NewToolResultError(MarkerCallFailed + "the result could not be encoded: " + err.Error()))
	}
	a.answer(raw)
}
