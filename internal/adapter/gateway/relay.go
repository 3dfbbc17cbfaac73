package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A remote may ask the caller something while it serves a forwarded call:
// elicitation/create, sampling/createMessage or roots/list. The gateway passes such a
// request to the caller whose call it is, and only when the tool's import relays that
// kind (RemoteBackend.Relay, which the remote session also declares as capabilities);
// any other is refused with an error that says why.
//
// The remote's call keeps running while the caller answers, so a relaying call runs
// apart from the caller's request (a waitingCall). Each request the remote sends
// becomes an input-required result (SEP-2322) holding it, with a requestState that
// names the waiting call:
//   - a caller of protocol 2026-07-28 answers by calling again with the answer;
//   - for an older caller on a stateful server, mcp-go asks it over its session and
//     calls again itself;
//   - a stateless server asks an older caller on the call's stream itself and takes
//     its answer back to the remote (answers.go), while it runs one replica: with
//     more, the answer could reach another replica, and the remote is told so.
//
// The requests come on the call's own stream from the remote (mcpclient's
// CallOptions.Ask), so one caller's call never receives another's.

// MarkerInputExpired starts the error result of a call that answers a request no call
// is waiting for any more.
const MarkerInputExpired = "mcp_input_expired: "

// maxWaitingCalls bounds the calls, over every remote of the adapter, that wait for
// their caller to answer; beyond it a remote's request is refused.
const maxWaitingCalls = adapterconfig.MaxRelayWaitingCalls

// relayedMethods maps the requests a remote may have relayed to the capability (and
// RemoteBackend.Relay entry) they need.
var relayedMethods = map[string]string{
	string(mcp.MethodElicitationCreate):     adapterconfig.RelayElicitation,
	string(mcp.MethodSamplingCreateMessage): adapterconfig.RelaySampling,
	string(mcp.MethodListRoots):             adapterconfig.RelayRoots,
}

// relaySettings are what every relaying call of a pool shares.
type relaySettings struct {
	// sessions is true for a stateful server, whose older callers can be asked on
	// their sessions; a stateless one asks them through answers.
	sessions bool
	answers  *Answers
	waiting  waitingCalls
	// states seals the requestStates of input-required results from remotes of
	// protocol 2026-07-28 (requeststate.go).
	states *stateSealer
	// logLevels are the log levels downstream sessions asked for, by session id
	// (sessions.go).
	logLevels *lru.Cache[string, string]
}

// waitingCalls are the calls waiting for their caller's answer, by requestState: at
// most maxWaitingCalls, and at most perCaller of them of one caller.
type waitingCalls struct {
	mu        sync.Mutex
	byState   map[string]*waitingCall
	perCaller int            // 0: ShareOf(maxWaitingCalls, DefaultCallerShare)
	held      map[string]int // by caller key
}

// LimitCallerShare lets one caller hold at most fraction of the pool's calls waiting
// for their callers (DefaultCallerShare unless called).
func (p *Pool) LimitCallerShare(fraction float64) {
	p.relay.waiting.mu.Lock()
	defer p.relay.waiting.mu.Unlock()
	p.relay.waiting.perCaller = ShareOf(maxWaitingCalls, fraction)
}

// waitingCall is one relaying call: the remote's call, running on its own, and what it
// asked that its caller has not answered yet.
type waitingCall struct {
	tool   *Tool
	caller string
	// share is the key its caller's share of the waiting calls is counted under.
	share  string
	cancel context.CancelFunc
	asked  chan *remoteRequest // the remote's requests, in order
	done   chan forwardOutcome // the remote's answer to the call
	round  atomic.Pointer[forwarder]

	parked   *remoteRequest // asked of the caller, not answered yet
	parkedAs string         // its key in the input-required result
	asks     int
}

// remoteRequest is one request of the remote, decoded, and where its answer goes.
type remoteRequest struct {
	kind   string
	input  mcp.InputRequest
	answer chan remoteAnswer
	// waiting ends when the remote's call stops waiting for the answer.
	waiting <-chan struct{}
}

type remoteAnswer struct {
	result json.RawMessage
	err    *mcpclient.ErrorObject
}

// forwardOutcome is forward's result.
type forwardOutcome struct {
	raw    json.RawMessage
	client *mcpclient.Client
	failed *mcp.CallToolResult
}

// refusal answers a remote's request the gateway will not pass on.
func refusal(format string, args ...any) *mcpclient.ErrorObject {
	return &mcpclient.ErrorObject{Code: mcp.INVALID_REQUEST, Message: "cantus gateway: " + fmt.Sprintf(format, args...)}
}

// refuseUnrelayed is the Ask of a call whose tool relays nothing, or of a request kind
// it does not relay.
func (t *Tool) refuseUnrelayed(_ context.Context, m mcpclient.Message) (json.RawMessage, *mcpclient.ErrorObject) {
	t.countRelayed(m.Method, relayRefused)
	return nil, t.unrelayed(m.Method)
}

// countRelayed counts a request of method the tool's remote made of its caller.
func (t *Tool) countRelayed(method, outcome string) {
	t.remote.metrics.countRelayed(t.Backend.Import, method, outcome)
}

func (t *Tool) unrelayed(method string) *mcpclient.ErrorObject {
	if _, ok := relayedMethods[method]; !ok {
		return &mcpclient.ErrorObject{Code: mcp.METHOD_NOT_FOUND, Message: "cantus gateway: " + clip.Line(method, 60) + " is not a request a gateway passes to its callers"}
	}
	return refusal("%s is not passed to the callers of %q: the owner of this gateway has not enabled it for import %s (spec.imports[].relay)",
		method, t.Name, t.Backend.Import)
}

// relays is true when the tool's import lets the remote ask its callers something.
func (t *Tool) relays() bool { return len(t.Backend.Relay) > 0 }

// callRelaying forwards a call of a tool that relays the remote's requests, or goes on
// with the one req answers (its requestState).
func (t *Tool) callRelaying(ctx context.Context, req mcp.CallToolRequest, args []byte) *mcp.CallToolResult {
	caller := callerOf(ctx)
	if state := req.Params.RequestState; state != "" {
		wc := t.remote.relay.waiting.take(state, t, caller)
		if wc == nil {
			return mcp.NewToolResultError(MarkerInputExpired + "no call of " + t.Name + " waits for this answer: it ended, timed out, or started on another replica of this server. Call the tool again.")
		}
		if again := wc.answerParked(req.Params.InputResponses); again != nil {
			return again
		}
		return wc.await(ctx, req)
	}
	return t.startWaitingCall(ctx, req, args, caller).await(ctx, req)
}

// startWaitingCall starts the remote's call apart from ctx, which ends with the
// caller's request; the tool's timeout still bounds it.
func (t *Tool) startWaitingCall(ctx context.Context, req mcp.CallToolRequest, args []byte, caller string) *waitingCall {
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	wc := &waitingCall{tool: t, caller: caller, share: callerKeyOf(ctx), cancel: cancel, asked: make(chan *remoteRequest, 4), done: make(chan forwardOutcome, 1)}
	progressToken := progressTokenOf(req)
	// The first round's forwarder is in place before the remote can send anything, so
	// that no notification of the call's start is lost.
	wc.round.Store(forwardNotifications(ctx, progressToken))
	go func() {
		defer cancel()
		raw, client, failed := t.remote.forward(callCtx, t, args, mcpclient.CallOptions{Progress: progressToken != nil, Notify: wc.notify, Ask: wc.ask})
		t.remote.relay.waiting.drop(wc)
		wc.done <- forwardOutcome{raw: raw, client: client, failed: failed}
	}()
	return wc
}

// notify passes the remote's notifications on to the request of the round under way;
// between rounds there is none to pass them to.
func (wc *waitingCall) notify(m mcpclient.Message) {
	if fwd := wc.round.Load(); fwd != nil {
		fwd.forward(m)
	}
}

// ask is the remote call's CallOptions.Ask: it hands a relayed request to the round
// under way (or the next) and waits for the caller's answer.
func (wc *waitingCall) ask(ctx context.Context, m mcpclient.Message) (json.RawMessage, *mcpclient.ErrorObject) {
	kind, ok := relayedMethods[m.Method]
	if !ok || !slices.Contains(wc.tool.Backend.Relay, kind) {
		wc.tool.countRelayed(m.Method, relayRefused)
		return nil, wc.tool.unrelayed(m.Method)
	}
	envelope, err := json.Marshal(struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params,omitempty"`
	}{m.Method, m.Params})
	var input mcp.InputRequest
	if err == nil {
		err = json.Unmarshal(envelope, &input)
	}
	if err != nil {
		wc.tool.countRelayed(m.Method, relayRefused)
		return nil, &mcpclient.ErrorObject{Code: mcp.INVALID_PARAMS, Message: "cantus gateway: the params of " + m.Method + " are not valid: " + clip.Line(err.Error(), 200)}
	}
	if input.Sampling != nil {
		// A remote may not ask the caller's host for context from the caller's other
		// servers ("allServers"), nor from this gateway's other imports ("thisServer").
		// The params are typed here, so no other spelling of the key reaches the caller.
		input.Sampling.IncludeContext = "none"
	}
	q := &remoteRequest{kind: kind, input: input, answer: make(chan remoteAnswer, 1), waiting: ctx.Done()}
	select {
	case wc.asked <- q:
	case <-ctx.Done():
		return nil, refusal("the call ended before its caller could be asked")
	}
	select {
	case a := <-q.answer:
		return a.result, a.err
	case <-ctx.Done():
		return nil, refusal("the caller did not answer before the call ended")
	}
}

// await is one round of a relaying call, on the request req of the caller (ctx): it
// returns the remote's answer, or the input-required result asking the caller what the
// remote asked. The remote's notifications meanwhile go to req (progress under its
// progress token).
func (wc *waitingCall) await(ctx context.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
	t := wc.tool
	fwd := wc.round.Load() // the first round's, set when the call started
	if fwd == nil {
		fwd = forwardNotifications(ctx, progressTokenOf(req))
		wc.round.Store(fwd)
	}
	defer func() {
		wc.round.Store(nil)
		fwd.flush()
	}()
	for {
		select {
		case out := <-wc.done:
			if out.failed != nil {
				return out.failed
			}
			return remoteResult(out.raw, out.client)
		case q := <-wc.asked:
			method := string(q.input.Method)
			if why, missing := t.callerCannotAnswer(ctx, q.kind); why != nil {
				t.countRelayed(method, relayRefused)
				q.answer <- remoteAnswer{err: why}
				if missing {
					wc.cancel()
					return missingCapability(ctx, q.kind)
				}
				continue
			}
			if t.asksOnStream(ctx) {
				t.countRelayed(method, relayAsked)
				q.answer <- askOnStream(ctx, q.input, q.waiting)
				continue
			}
			result, why := wc.park(q)
			if result != nil {
				t.countRelayed(method, relayAsked)
				return result
			}
			t.countRelayed(method, relayRefused)
			q.answer <- remoteAnswer{err: refusal("%s", why)}
		case <-ctx.Done():
			wc.cancel()
			return mcp.NewToolResultError(MarkerCallFailed + "the caller stopped waiting")
		}
	}
}

// ListedTo says whether the caller of ctx is listed the tool: its remote lists it in
// the caller's era (or the caller is translated into the remote's), and the gateway
// can ask the caller what the remote lists it only to clients able to answer
// (Backend.Needs): a caller that could not be asked could not use the tool.
func (t *Tool) ListedTo(ctx context.Context) bool {
	if !t.Backend.ListedTo(CallerEra(ctx)) {
		return false
	}
	if len(t.Backend.Needs) > 0 && t.remote == nil {
		return false // not linked to its remote: nobody could be asked
	}
	for _, kind := range t.Backend.Needs {
		if why, _ := t.callerCannotAnswer(ctx, kind); why != nil {
			return false
		}
	}
	return true
}

// callerCannotAnswer says why the caller of ctx cannot be asked a request of kind, to
// answer the remote with; missing is true when the caller must be told it lacks the
// capability (protocol 2026-07-28: MissingRequiredClientCapabilityError).
func (t *Tool) callerCannotAnswer(ctx context.Context, kind string) (why *mcpclient.ErrorObject, missing bool) {
	if server.IsModernRequest(ctx) {
		return modernCallerCannotAnswer(ctx, kind)
	}
	if !t.remote.relay.sessions {
		return t.remote.relay.answers.cannotAsk(ctx, kind), false
	}
	session, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	if !ok {
		return refusal("the caller has no session to be asked on"), false
	}
	caps := session.GetClientCapabilities()
	if !declares(&caps, kind) {
		return refusal("the caller did not declare the %s capability", kind), false
	}
	return nil, false
}

// modernCallerCannotAnswer says why the caller of a request of protocol 2026-07-28
// cannot be asked for input of kind (it did not declare the capability in the
// request's _meta: missing), or nil when it can.
func modernCallerCannotAnswer(ctx context.Context, kind string) (why *mcpclient.ErrorObject, missing bool) {
	info := server.RequestProtocolInfoFromContext(ctx)
	if info == nil || !declares(info.ClientCapabilities, kind) {
		return refusal("the caller did not declare the %s capability", kind), true
	}
	return nil, false
}

func declares(caps *mcp.ClientCapabilities, kind string) bool {
	if caps == nil {
		return false
	}
	switch kind {
	case adapterconfig.RelayElicitation:
		return caps.Elicitation != nil
	case adapterconfig.RelaySampling:
		return caps.Sampling != nil
	case adapterconfig.RelayRoots:
		return caps.Roots != nil
	}
	return false
}

// park keeps q for the caller's answer and returns the input-required result that asks
// for it; nil and why not when too many calls wait already, or too many of its caller's.
func (wc *waitingCall) park(q *remoteRequest) (*mcp.CallToolResult, string) {
	wc.asks++
	wc.parked, wc.parkedAs = q, fmt.Sprintf("%s-%d", q.kind, wc.asks)
	return wc.inputRequired()
}

// inputRequired registers the call under a new requestState and asks for what it
// parked; nil and why not when the pool of waiting calls refused it.
func (wc *waitingCall) inputRequired() (*mcp.CallToolResult, string) {
	state, why := wc.tool.remote.relay.waiting.put(wc)
	if why != "" {
		wc.parked = nil
		return nil, why
	}
	return &mcp.CallToolResult{
		Result:               mcp.Result{ResultType: mcp.ResultTypeInputRequired},
		MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: mcp.InputRequests{wc.parkedAs: wc.parked.input}, RequestState: state},
	}, ""
}

// answerParked hands the caller's answer to the remote; when it holds none for the
// parked request, it returns the result asking again.
func (wc *waitingCall) answerParked(responses mcp.InputResponses) *mcp.CallToolResult {
	answer, ok := responses[wc.parkedAs]
	if !ok {
		parked := wc.parked
		again, why := wc.inputRequired()
		if again != nil {
			return again
		}
		parked.answer <- remoteAnswer{err: refusal("%s", why)}
		return nil
	}
	raw, err := json.Marshal(answer)
	if err != nil || string(raw) == "null" {
		wc.parked.answer <- remoteAnswer{err: refusal("the caller's answer to %s is not a result", wc.parked.input.Method)}
	} else {
		wc.parked.answer <- remoteAnswer{result: raw}
	}
	wc.parked = nil
	return nil
}

// put registers wc under a new requestState, unless maxWaitingCalls wait already, or
// its caller's share of them; why says which.
func (w *waitingCalls) put(wc *waitingCall) (state, why string) {
	state = "cantus-relay." + randomToken(18)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.byState) >= maxWaitingCalls {
		return "", fmt.Sprintf("too many calls wait for their callers' answers (%d); try again later", maxWaitingCalls)
	}
	perCaller := w.perCaller
	if perCaller == 0 {
		perCaller = ShareOf(maxWaitingCalls, DefaultCallerShare)
	}
	if w.held[wc.share] >= perCaller {
		return "", fmt.Sprintf("this caller has %d calls waiting for its answers, the most one caller may of the %d this gateway keeps; answer or end one first",
			perCaller, maxWaitingCalls)
	}
	if w.byState == nil {
		w.byState, w.held = map[string]*waitingCall{}, map[string]int{}
	}
	w.byState[state] = wc
	w.held[wc.share]++
	return state, ""
}

// forgetLocked removes the call waiting under state.
func (w *waitingCalls) forgetLocked(state string) {
	wc := w.byState[state]
	if wc == nil {
		return
	}
	delete(w.byState, state)
	if w.held[wc.share]--; w.held[wc.share] <= 0 {
		delete(w.held, wc.share)
	}
}

// take removes and returns the call waiting under state, when it is a call of t by
// caller: a requestState is good for one answer, by the caller it was given to.
func (w *waitingCalls) take(state string, t *Tool, caller string) *waitingCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	wc := w.byState[state]
	if wc == nil || wc.tool.Name != t.Name || wc.tool.remote != t.remote || wc.caller != caller {
		return nil
	}
	w.forgetLocked(state)
	return wc
}

// drop forgets wc, whose remote call ended.
func (w *waitingCalls) drop(wc *waitingCall) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for state, other := range w.byState {
		if other == wc {
			w.forgetLocked(state)
		}
	}
}

// callerOf names the caller of ctx as authentication found it; "" when the server
// authenticates no one (then the requestState, 144 random bits, is all that binds).
func callerOf(ctx context.Context) string {
	if c, ok := access.CallerFrom(ctx); ok && c != nil {
		return c.String()
	}
	return ""
}
