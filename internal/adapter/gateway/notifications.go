package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/wake"
)

// Notifications a remote sends about a forwarded call reach the client who made it:
// progress under the client's own progress token (the remote saw the gateway's), and
// log messages as sent. The client's notifications/cancelled needs nothing here:
// mcp-go cancels the call's context, and the remote session then tells the remote.

// progressTokenOf is the progress token the client sent with the call, nil for none.
func progressTokenOf(req mcp.CallToolRequest) mcp.ProgressToken {
	if req.Params.Meta == nil {
		return nil
	}
	return req.Params.Meta.ProgressToken
}

// notificationsFlushWait bounds how long a forwarded call waits for the notifications
// it passed on to be written before its answer (see EventWatch).
const notificationsFlushWait = 2 * time.Second

// forwarder passes the remote's notifications about one call on to the client.
type forwarder struct {
	ctx           context.Context
	srv           *server.MCPServer
	progressToken mcp.ProgressToken
	watch         *EventWatch // nil but over streamable HTTP
}

// forwardNotifications returns the forwarder of the call of ctx; nil when ctx has no
// MCP client to send to.
func forwardNotifications(ctx context.Context, progressToken mcp.ProgressToken) *forwarder {
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return nil
	}
	return &forwarder{ctx: ctx, srv: srv, progressToken: progressToken, watch: eventWatchOf(ctx)}
}

// notify is mcpclient.CallOptions.Notify, nil for a nil forwarder. The remote's
// notifications arrive one at a time, on the goroutine of the call (streamable HTTP)
// or of the session's stream (SSE).
func (f *forwarder) notify() func(mcpclient.Message) {
	if f == nil {
		return nil
	}
	return f.forward
}

func (f *forwarder) forward(m mcpclient.Message) {
	switch m.Method {
	case string(mcp.MethodNotificationProgress):
		params := paramsOf(m)
		if f.progressToken == nil || params == nil {
			return
		}
		params["progressToken"] = f.progressToken
		f.send(m.Method, params)
	case string(mcp.MethodNotificationMessage):
		// The remote chose the level for a session's caller; the gateway does not
		// filter again. A caller of 2026-07-28 asks per request (SEP-2575).
		if params := paramsOf(m); params != nil && f.logWanted(params) {
			f.send(m.Method, params)
		}
	}
}

// logWanted is false for a log message the request of protocol 2026-07-28 did not ask
// for: it named no log level, or one above the message's.
func (f *forwarder) logWanted(params map[string]any) bool {
	info := server.RequestProtocolInfoFromContext(f.ctx)
	if info == nil || !info.Modern {
		return true
	}
	level, _ := params["level"].(string)
	return info.LogLevel != "" && mcp.LoggingLevel(level).ShouldSendTo(info.LogLevel)
}

func (f *forwarder) send(method string, params map[string]any) {
	if f.srv.SendNotificationToClient(f.ctx, method, params) == nil {
		f.watch.sent()
	}
}

// flush waits until the notifications passed on are written to the client, at most
// notificationsFlushWait.
func (f *forwarder) flush() {
	if f != nil {
		f.watch.waitWritten(notificationsFlushWait)
	}
}

type eventWatchKey struct{}

// EventWatch counts the notifications a call passed to mcp-go and those written to the
// call's response (streamable HTTP). mcp-go writes them from a goroutine of its own
// and, when the call's answer comes while that goroutine holds a notification not yet
// written, drops it; so a forwarded call returns only once what it passed on is
// written (the remote's last progress often arrives just before its answer).
//
// The server wraps the response of a POST that may carry a forwarded call in one
// (WatchEvents) and hands it to the call's context (WithEventWatch).
type EventWatch struct {
	http.ResponseWriter
	mu      sync.Mutex
	queued  int
	written int
	changed wake.Cond // broadcast when written grows
	// failure, when set, is the JSON-RPC error (and its HTTP status), or the raw
	// result, that answers the call instead of the result mcp-go writes: a tool
	// handler can only return a CallToolResult, and protocol 2026-07-28 wants some
	// failures as errors and some answers in other shapes (a task, tasks.go).
	failure *answerFailure
}

// answerFailure is what a call answers with in place of mcp-go's answer
// (EventWatch.failure): an error, or a result.
type answerFailure struct {
	status int
	error  map[string]any
	// result, when set, answers instead of error: a JSON object, which gets the
	// _meta members of the result mcp-go wrote (the gateway's serverInfo).
	result json.RawMessage
}

// WatchEvents wraps the response w of a POST.
func WatchEvents(w http.ResponseWriter) *EventWatch { return &EventWatch{ResponseWriter: w} }

// WithEventWatch gives the call of ctx the watch of its response.
func WithEventWatch(ctx context.Context, w *EventWatch) context.Context {
	return context.WithValue(ctx, eventWatchKey{}, w)
}

// eventWatchOf is the watch of the call of ctx's response; nil but over streamable HTTP.
func eventWatchOf(ctx context.Context) *EventWatch {
	watch, _ := ctx.Value(eventWatchKey{}).(*EventWatch)
	return watch
}

// sent counts a notification handed to mcp-go; a nil watch ignores it.
func (w *EventWatch) sent() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.queued++
	w.mu.Unlock()
}

// failWith makes the call of w answer with the JSON-RPC error code, message and data,
// and HTTP status when the answer is not an event stream; false for a nil watch.
func (w *EventWatch) failWith(status, code int, message string, data any) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failure = &answerFailure{status: status, error: map[string]any{"code": code, "message": message, "data": data}}
	return true
}

// answerWith makes the call of w answer with result, a JSON object, in place of the
// result mcp-go writes; false for a nil watch.
func (w *EventWatch) answerWith(result json.RawMessage) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failure = &answerFailure{status: http.StatusOK, result: result}
	return true
}

// WriteHeader sends the status of the answer, or the failure's when it replaces a JSON
// answer.
func (w *EventWatch) WriteHeader(status int) {
	w.mu.Lock()
	failure := w.failure
	w.mu.Unlock()
	if failure != nil && status == http.StatusOK && JSONContentType(w.Header().Get("Content-Type")) {
		status = failure.status
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write writes p and counts it when it is a notification event.
func (w *EventWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	failure := w.failure
	w.mu.Unlock()
	if failure != nil {
		if replaced, ok := failure.replace(p); ok {
			if _, err := w.ResponseWriter.Write(replaced); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	n, err := w.ResponseWriter.Write(p)
	if bytes.HasPrefix(p, []byte("event: message\ndata: ")) && bytes.Contains(p, []byte(`"method":"notifications/`)) {
		w.mu.Lock()
		w.written++
		w.changed.Broadcast()
		w.mu.Unlock()
	}
	return n, err
}

// Flush flushes the response.
func (w *EventWatch) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is the response w wraps, for http.ResponseController.
func (w *EventWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// waitWritten returns once every notification counted by sent is written, or after
// limit.
func (w *EventWatch) waitWritten(limit time.Duration) {
	if w == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	_ = w.changed.Wait(ctx, &w.mu, func() bool { return w.written >= w.queued }) // after limit, the call goes on regardless
}

// replace returns the failure's error in place of p when p is the call's answer: a
// JSON-RPC response, alone or as the data of an event; anything else is not replaced.
func (f *answerFailure) replace(p []byte) ([]byte, bool) {
	const eventPrefix = "event: message\ndata: "
	body, event := p, bytes.HasPrefix(p, []byte(eventPrefix))
	if event {
		body = bytes.TrimSuffix(bytes.TrimPrefix(p, []byte(eventPrefix)), []byte("\n\n"))
	}
	var answer struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(body, &answer) != nil || answer.Method != "" || len(answer.Result) == 0 || !ValidRequestID(answer.ID) {
		return nil, false
	}
	response := map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": answer.ID, "error": f.error}
	if f.result != nil {
		response = map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": answer.ID, "result": withMetaOf(f.result, answer.Result)}
	}
	out, err := json.Marshal(response)
	if err != nil {
		return nil, false
	}
	if event {
		return append(append([]byte(eventPrefix), out...), "\n\n"...), true
	}
	return append(out, '\n'), true
}

// withMetaOf is result with the _meta members of written (mcp-go's result, which names
// the gateway) added to its own, written's winning; result as it is when either is
// not an object.
func withMetaOf(result, written json.RawMessage) json.RawMessage {
	var members, writtenMembers map[string]json.RawMessage
	if json.Unmarshal(result, &members) != nil || members == nil || json.Unmarshal(written, &writtenMembers) != nil {
		return result
	}
	var meta, writtenMeta map[string]json.RawMessage
	if raw := members["_meta"]; len(raw) > 0 && json.Unmarshal(raw, &meta) != nil {
		return result
	}
	if raw := writtenMembers["_meta"]; len(raw) == 0 || json.Unmarshal(raw, &writtenMeta) != nil || len(writtenMeta) == 0 {
		return result
	}
	if meta == nil {
		meta = make(map[string]json.RawMessage, len(writtenMeta))
	}
	for key, value := range writtenMeta {
		meta[key] = value
	}
	encoded, err := json.Marshal(meta)
	if err != nil {
		return result
	}
	members["_meta"] = encoded
	out, err := json.Marshal(members)
	if err != nil {
		return result
	}
	return out
}

// missingCapability answers the call of ctx, made with protocol 2026-07-28, with a
// MissingRequiredClientCapabilityError (-32021, HTTP 400) naming kind, as SEP-2575
// asks of a server that needs a capability the client did not declare. The result
// returned stands for it where the answer cannot be replaced.
func missingCapability(ctx context.Context, kind string) *mcp.CallToolResult {
	message := fmt.Sprintf("the remote tool needs the %s capability, which this request's _meta did not declare", kind)
	data := map[string]any{"requiredCapabilities": map[string]any{kind: map[string]any{}}}
	eventWatchOf(ctx).failWith(http.StatusBadRequest, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, message, data)
	return mcp.NewToolResultError(MarkerCallFailed + message)
}

// paramsOf decodes a notification's params; nil when they are not an object.
func paramsOf(m mcpclient.Message) map[string]any {
	var params map[string]any
	if json.Unmarshal(m.Params, &params) != nil {
		return nil
	}
	return params
}
