package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapter/interleave"
	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// Answers let a stateless gateway ask a caller of protocol 2025-11-25 what a remote
// asks during its call, as a stateful one does on the caller's session.
//
// mcp-go sends a server's requests on a session (the stream of a GET, or of the POST
// that asked, routing the answer by the Mcp-Session-Id the caller sends with it), and
// a stateless server gives its callers no session. So the gateway writes the request
// on the call's own response stream itself (Ask), under an id nobody can guess, and
// takes the caller's answer, a POST of its own carrying that id, to the call that
// waits for it (Deliver), from that caller only.
//
// The route is this replica's: with more than one replica the answer may reach
// another, so the gateway asks only while it runs one (SetReplicas), and says so
// otherwise.
type Answers struct {
	replicas atomic.Int32
	mu       sync.Mutex
	waiting  map[string]*awaitedAnswer // by the id the caller was asked under
}

// awaitedAnswer is where the answer to one request goes.
type awaitedAnswer struct {
	caller string // admission.CallerKey of the asked caller
	answer chan remoteAnswer
}

// askedIDPrefix starts the ids a gateway asks its callers under.
const askedIDPrefix = "cantus-ask-"

// NewAnswers returns the routes of a server that runs one replica.
func NewAnswers() *Answers {
	a := &Answers{waiting: map[string]*awaitedAnswer{}}
	a.replicas.Store(1)
	return a
}

// SetReplicas records how many replicas serve; 0 counts as one. A nil a (a stateful
// server's) ignores it.
func (a *Answers) SetReplicas(n int32) {
	if a != nil {
		a.replicas.Store(max(n, 1))
	}
}

// routable is false when an answer could reach another replica than the one that asked.
func (a *Answers) routable() bool { return a != nil && a.replicas.Load() == 1 }

// Asks says whether body, the POST of r, is a call that may ask its caller (Ask): a
// tools/call of protocol 2025-11-25 or older, of a remote tool that relays.
func (a *Answers) Asks(r *http.Request, body []byte, srv Server) bool {
	if !a.routable() || modernProtocol(r) || !mayCall(body) {
		return false
	}
	var call request[struct {
		Name string `json:"name"`
	}]
	if !call.decode(body) || call.Method != string(mcp.MethodToolsCall) {
		return false
	}
	t := srv.RemoteTool(call.Params.Name)
	return t != nil && t.relays()
}

// Ask readies the call r, of caller (admission.CallerKey), to ask its caller on its
// response stream: serve it with the response and request returned.
func (a *Answers) Ask(w http.ResponseWriter, r *http.Request, caller string) (http.ResponseWriter, *http.Request) {
	// mcp-go sets its headers from goroutines of its own while the call asks from its
	// own: interleave keeps them apart, and each write whole.
	iw := interleave.New(w)
	return iw, r.WithContext(context.WithValue(r.Context(), askerKey{}, &asker{answers: a, w: iw, caller: caller}))
}

// Deliver takes body, a POST of caller (admission.CallerKey), to the call that waits
// for it when it answers a request Ask's call wrote, and reports whether it did so or
// refused it (both written to w); false, with nothing written, for any other body. An
// answer no call of this replica waits for, or from another caller than the one
// asked, is refused; so is one that is not a JSON-RPC result or error, for the remote.
func (a *Answers) Deliver(w http.ResponseWriter, body []byte, caller string) bool {
	var answer struct {
		ID     json.RawMessage        `json:"id"`
		Method string                 `json:"method"`
		Result json.RawMessage        `json:"result"`
		Error  *mcpclient.ErrorObject `json:"error"`
	}
	var id string
	if a == nil || json.Unmarshal(body, &answer) != nil || answer.Method != "" ||
		json.Unmarshal(answer.ID, &id) != nil || !strings.HasPrefix(id, askedIDPrefix) {
		return false
	}
	awaited := a.take(id, caller)
	if awaited == nil {
		writeAnswerRefusal(w, answer.ID, a.replicas.Load())
		return true
	}
	if answer.Error == nil && (len(answer.Result) == 0 || answer.Result[0] != '{') {
		answer.Error = &mcpclient.ErrorObject{Code: mcp.INVALID_REQUEST, Message: "cantus gateway: the caller's answer held neither a result object nor an error"}
	}
	awaited.answer <- remoteAnswer{result: answer.Result, err: answer.Error} // buffered for the one answer
	w.WriteHeader(http.StatusAccepted)
	return true
}

// expect records that the request asked under id waits for caller's answer.
func (a *Answers) expect(id, caller string) *awaitedAnswer {
	awaited := &awaitedAnswer{caller: caller, answer: make(chan remoteAnswer, 1)}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waiting[id] = awaited
	return awaited
}

// take removes what waits for id, when caller is the one asked: one answer per request.
func (a *Answers) take(id, caller string) *awaitedAnswer {
	a.mu.Lock()
	defer a.mu.Unlock()
	awaited := a.waiting[id]
	if awaited == nil || awaited.caller != caller {
		return nil
	}
	delete(a.waiting, id)
	return awaited
}

func (a *Answers) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.waiting, id)
}

// writeAnswerRefusal answers a POST whose answer no call waits for. Whether the id
// was another caller's is not said.
func writeAnswerRefusal(w http.ResponseWriter, id json.RawMessage, replicas int32) {
	message := "cantus gateway: no call on this replica waits for this answer: it ended, or it was not asked of this caller"
	if replicas > 1 {
		message += fmt.Sprintf(", or it was asked on another of the gateway's %d replicas", replicas)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id,
		"error": map[string]any{"code": mcp.INVALID_REQUEST, "message": message}})
}

// cannotAsk says why a stateless gateway cannot ask the caller of ctx, of protocol
// 2025-11-25 or older, a request of kind; nil when it can.
func (a *Answers) cannotAsk(ctx context.Context, kind string) *mcpclient.ErrorObject {
	if !a.routable() {
		replicas := int32(0)
		if a != nil {
			replicas = a.replicas.Load()
		}
		return refusal("this gateway is stateless and runs %d replicas, so a caller of protocol %s cannot be asked (its answer could reach another replica): run it with one replica, serve it stateful, or call it with protocol 2026-07-28",
			replicas, clip.Line(server.RequestProtocolVersion(ctx), 40))
	}
	if !declaredFrom(ctx).declares(callerKeyOf(ctx), kind) {
		return refusal("the caller did not declare the %s capability when it last initialized with this replica", kind)
	}
	return nil
}

type askerKey struct{}

// asker asks the caller of one call on the call's response stream.
type asker struct {
	answers *Answers
	w       *interleave.Writer
	caller  string
}

// asksOnStream says whether the caller of ctx is asked what a remote asks on its
// call's stream (askOnStream): an older caller of a stateless server.
func (t *Tool) asksOnStream(ctx context.Context) bool {
	return !t.remote.relay.sessions && !server.IsModernRequest(ctx)
}

// askOnStream asks the caller of ctx, of a stateless server, input on its call's
// stream and returns its answer, for the remote; waiting, when not nil, ends when the
// remote's call stops waiting for it.
func askOnStream(ctx context.Context, input mcp.InputRequest, waiting <-chan struct{}) remoteAnswer {
	ask, _ := ctx.Value(askerKey{}).(*asker)
	if ask == nil {
		return remoteAnswer{err: refusal("the caller's call has no response stream to be asked on")}
	}
	id := askedIDPrefix + randomToken(16)
	request, err := jsonRPCRequest(id, input)
	if err != nil {
		return remoteAnswer{err: refusal("the request could not be passed on: %s", clip.Line(err.Error(), 200))}
	}
	awaited := ask.answers.expect(id, ask.caller)
	defer ask.answers.forget(id)
	if streamed, ok := server.ClientSessionFromContext(ctx).(server.SessionWithStreamableHTTPConfig); ok {
		// mcp-go then writes the call's answer as an event of the stream begun here.
		streamed.UpgradeToSSEWhenReceiveNotification()
	}
	if err := ask.w.WriteEvent("event: message\ndata: "+string(request)+"\n\n", false); err != nil {
		return remoteAnswer{err: refusal("the caller could not be asked: %s", clip.Line(err.Error(), 200))}
	}
	select {
	case answer := <-awaited.answer:
		return answer
	case <-ctx.Done():
		return remoteAnswer{err: refusal("the caller did not answer before its call ended")}
	case <-waiting:
		return remoteAnswer{err: refusal("the caller did not answer before the remote's call ended")}
	}
}

// maxStreamInputRounds bounds the rounds of input a remote of protocol 2026-07-28 may
// ask an older caller of a stateless server for in one call, as mcp-go bounds them on
// a session.
const maxStreamInputRounds = 10

// answerOnStream asks an older caller of a stateless server the input requests of
// raw, a remote's input-required result, on its call's stream, and returns what to
// call the remote again with: its state and the caller's answers. failed is the
// call's result when a request may not be passed on or the caller answered an error.
func (t *Tool) answerOnStream(ctx context.Context, raw json.RawMessage) (state string, answers json.RawMessage, failed *mcp.CallToolResult) {
	asked, refused := t.checkInput(ctx, raw)
	if refused != nil {
		return "", nil, mcp.NewToolResultError(refused.message)
	}
	responses := make(map[string]json.RawMessage, len(asked.InputRequests))
	for key, input := range asked.InputRequests {
		answer := askOnStream(ctx, input, nil)
		if answer.err != nil {
			return "", nil, mcp.NewToolResultError(MarkerCallFailed + answer.err.Message)
		}
		responses[key] = answer.result
	}
	encoded, err := json.Marshal(responses)
	if err != nil {
		return "", nil, mcp.NewToolResultError(MarkerCallFailed + "the caller's answers are not JSON: " + clip.Line(err.Error(), 200))
	}
	return asked.RequestState, encoded, nil
}

// jsonRPCRequest is input as a JSON-RPC request of id.
func jsonRPCRequest(id string, input mcp.InputRequest) ([]byte, error) {
	encoded, err := json.Marshal(input)
	if err != nil {
		return nil, err
	}
	var request map[string]json.RawMessage
	if err := json.Unmarshal(encoded, &request); err != nil {
		return nil, err
	}
	request["jsonrpc"], _ = json.Marshal(mcp.JSONRPC_VERSION) // strings always encode
	request["id"], _ = json.Marshal(id)
	return json.Marshal(request)
}

// randomToken is n random bytes, URL-safe.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}
