package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A remote that serves protocol 2026-07-28 (RemoteBackend.Eras) is spoken to in it by
// the callers of that era, and by callers of older eras when it serves no other: each
// call is a stateless request carrying its own _meta — the caller's protocol version
// and log level, the caller's capabilities that the import relays, and the gateway's
// clientInfo — and the headers of SEP-2243. Callers of 2025-11-25 keep the pooled
// session of that era where the remote serves it; a remote of 2025-11-25 only gets
// every caller translated into it, as before.
//
// What the remote asks for while it serves such a call comes as an input-required
// result (SEP-2322): its input requests go to the caller with a requestState of the
// gateway's own (requeststate.go), and the caller's retry goes to the remote with the
// remote's state. A caller of 2025-11-25 on a stateful gateway is asked on its
// session (mcp-go does it for a result like that, and calls again with the answers);
// a stateless gateway of one replica asks it on its call's stream and calls the remote
// again itself (answers.go).

// upstreamModern says whether the call of ctx goes to the remote in protocol
// 2026-07-28: the caller speaks it and the remote serves it, or the remote serves
// nothing else.
func (t *Tool) upstreamModern(ctx context.Context) bool { return upstreamModern(ctx, t.Backend) }

// relaysOnlyModern says whether a relaying call of an older caller goes to the remote in
// 2026-07-28 although the remote serves the caller's era too: when the remote's
// 2025-11-25 session has no id (a stateless server, as every dual-era mcp-go server
// is), the answer to a request it sends on a call's stream could not find its way back
// to it, while an input-required result of 2026-07-28 needs no session (the gateway
// asks the caller on its own session, where it can).
func (t *Tool) relaysOnlyModern(ctx context.Context) bool {
	if !t.relays() || !t.Backend.ServesModern() || server.IsModernRequest(ctx) || t.remote.callers != nil {
		return false
	}
	conn, err := t.remote.acquire(ctx)
	if err != nil {
		return false // the legacy path reports it
	}
	defer t.remote.release(conn)
	return conn.sess.ID() == ""
}

func upstreamModern(ctx context.Context, b *adapterconfig.RemoteBackend) bool {
	if !b.ServesModern() {
		return false
	}
	return server.IsModernRequest(ctx) || !b.ServesLegacy()
}

// callModern forwards a call of protocol 2026-07-28, or its retry with the answers to
// what the remote asked.
func (t *Tool) callModern(ctx context.Context, req mcp.CallToolRequest, args []byte) *mcp.CallToolResult {
	caller := callerOf(ctx)
	opts := mcpclient.CallOptions{Meta: upstreamMeta(ctx, t.Backend.Relay)}
	if state := req.Params.RequestState; state != "" {
		remoteState, err := t.remote.relay.states.open(state, caller, t)
		if err != nil {
			return refusedRequestState(ctx, err)
		}
		opts.RequestState = remoteState
	}
	// Answers go upstream with or without a state: a remote may ask without one.
	if len(req.Params.InputResponses) > 0 {
		raw, err := json.Marshal(req.Params.InputResponses)
		if err != nil {
			return mcp.NewToolResultError(MarkerInputRefused + "the inputResponses are not JSON: " + clip.Line(err.Error(), 200))
		}
		opts.InputResponses = raw
	}
	progressToken := progressTokenOf(req)
	fwd := forwardNotifications(ctx, progressToken)
	defer fwd.flush()
	opts.Progress, opts.Notify = progressToken != nil, fwd.notify()
	opts.Meta.ParamHeaders = t.paramHeaders(args)
	t.declareTasksUpstream(ctx, opts.Meta)
	raw, client, failed := t.remote.forwardModern(ctx, t, args, opts)
	// An older caller of a stateless server answers on its call's stream, and the call
	// goes on here; any other caller answers with a call of its own (askCaller).
	for round := 0; failed == nil && inputRequired(raw) && t.asksOnStream(ctx); round++ {
		if round == maxStreamInputRounds {
			return mcp.NewToolResultError(fmt.Sprintf("%sthe remote asked for input more than %d times", MarkerCallFailed, maxStreamInputRounds))
		}
		if opts.RequestState, opts.InputResponses, failed = t.answerOnStream(ctx, raw); failed == nil {
			raw, client, failed = t.remote.forwardModern(ctx, t, args, opts)
		}
	}
	if failed != nil {
		if failed == errNotModern && opts.RequestState == "" && t.Backend.ServesLegacy() {
			// The remote stopped serving 2026-07-28 since its handshake, and refused the
			// call before acting on it: its other era serves until the next handshake.
			t.remote.log.Info("the remote refused protocol 2026-07-28; calling it in 2025-11-25", "tool", t.Name)
			return t.callLegacy(ctx, req, args)
		}
		return failed
	}
	if inputRequired(raw) {
		return t.askCaller(ctx, raw, caller)
	}
	if taskCreated(raw) {
		return t.answerTask(ctx, raw, opts.Meta)
	}
	res := remoteResult(raw, client)
	if res.Meta != nil {
		// The result is the gateway's: mcp-go names the gateway in its place.
		delete(res.Meta.AdditionalFields, mcp.MetaKeyServerInfo)
	}
	return res
}

// paramToolOf is the remote's definition of the tool in protocol 2026-07-28 (its
// ModernDefinition where it has one) when its inputSchema marks an argument
// x-mcp-header (SEP-2243); nil otherwise, or when it does not parse.
func paramToolOf(b *adapterconfig.RemoteBackend) *mcp.Tool {
	def := modernDefinitionOf(b)
	if len(def) == 0 || !strings.Contains(string(def), "x-mcp-header") {
		return nil
	}
	var tool mcp.Tool
	if json.Unmarshal(def, &tool) != nil {
		return nil
	}
	tool.Name = b.RemoteName
	if len(mcp.ExtractParamHeaderBindings(&tool)) == 0 {
		return nil
	}
	return &tool
}

// modernDefinitionOf is the definition the remote lists the tool with in protocol
// 2026-07-28.
func modernDefinitionOf(b *adapterconfig.RemoteBackend) json.RawMessage {
	if len(b.ModernDefinition) > 0 {
		return b.ModernDefinition
	}
	return b.Definition
}

// paramHeaders are the Mcp-Param-* headers of a call of t with args in protocol
// 2026-07-28; nil when its remote marks no argument x-mcp-header.
func (t *Tool) paramHeaders(args []byte) map[string]string {
	if t.paramTool == nil {
		return nil
	}
	params, err := json.Marshal(map[string]json.RawMessage{"arguments": args})
	if err != nil {
		return nil
	}
	return mcp.GenerateParamHeaders(t.paramTool, params)
}

// upstreamMeta is the _meta of a call forwarded in protocol 2026-07-28: the caller's
// protocol version and log level (a caller of an older era asks as 2026-07-28 with
// no log level) and the capabilities it declared that relay lets the remote use.
func upstreamMeta(ctx context.Context, relay []string) *mcpclient.RequestMeta {
	meta := &mcpclient.RequestMeta{ProtocolVersion: adapterconfig.EraModern}
	var declared *mcp.ClientCapabilities
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		meta.ProtocolVersion, meta.LogLevel, declared = info.ProtocolVersion, string(info.LogLevel), info.ClientCapabilities
	} else if caps, ok := declaredFrom(ctx).capabilities(callerKeyOf(ctx)); ok {
		declared = &caps // a stateless server's older caller, as it last initialized
	} else if session, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		caps := session.GetClientCapabilities()
		declared = &caps
	}
	meta.ClientCapabilities, _ = json.Marshal(relayedCapabilities(declared, relay))
	return meta
}

// relayedCapabilities are the capabilities of declared that relay names.
func relayedCapabilities(declared *mcp.ClientCapabilities, relay []string) mcp.ClientCapabilities {
	var out mcp.ClientCapabilities
	if declared == nil {
		return out
	}
	if slices.Contains(relay, adapterconfig.RelayElicitation) {
		out.Elicitation = declared.Elicitation
	}
	if slices.Contains(relay, adapterconfig.RelaySampling) {
		out.Sampling = declared.Sampling
	}
	if slices.Contains(relay, adapterconfig.RelayRoots) {
		out.Roots = declared.Roots
	}
	return out
}

// inputRequired says whether raw is an input-required result.
func inputRequired(raw json.RawMessage) bool {
	var head struct {
		ResultType string `json:"resultType"`
	}
	return json.Unmarshal(raw, &head) == nil && head.ResultType == string(mcp.ResultTypeInputRequired)
}

// askCaller turns the remote's input-required result into the gateway's: the same
// input requests, when the import relays each and the caller can be asked, and the
// remote's state sealed for this caller's retry of this tool.
func (t *Tool) askCaller(ctx context.Context, raw json.RawMessage, caller string) *mcp.CallToolResult {
	asked, refused := t.checkInput(ctx, raw)
	switch {
	case refused != nil && refused.missing != "":
		return missingCapability(ctx, refused.missing)
	case refused != nil:
		return mcp.NewToolResultError(refused.message)
	}
	state, err := t.remote.relay.states.seal(asked.RequestState, caller, t)
	if err != nil {
		return mcp.NewToolResultError(MarkerRemoteError + err.Error())
	}
	return &mcp.CallToolResult{
		Result:               mcp.Result{ResultType: mcp.ResultTypeInputRequired},
		MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: asked.InputRequests, RequestState: state},
	}
}

// checkInput is passOnInput for a call of t, counted in Metrics.relayed.
func (t *Tool) checkInput(ctx context.Context, raw json.RawMessage) (mcp.MultiRoundTripResult, *inputRefusal) {
	asked, refused := passOnInput(ctx, raw, t.Backend.Relay, func(method string) string { return t.unrelayed(method).Message }, t.callerCannotAnswer)
	t.remote.metrics.countInput(t.Backend.Import, asked, refused)
	return asked, refused
}

// countInput counts the input requests of a remote of import passed on to a caller
// (asked), or the one that kept them from it (refused).
func (m *Metrics) countInput(importRef string, asked mcp.MultiRoundTripResult, refused *inputRefusal) {
	if refused != nil {
		m.countRelayed(importRef, refused.method, relayRefused)
		return
	}
	for _, input := range asked.InputRequests {
		m.countRelayed(importRef, string(input.Method), relayAsked)
	}
}

// inputRefusal is why a remote's input-required result is not passed on: message
// begins with its marker; missing names the capability the caller did not declare,
// when that is why.
type inputRefusal struct{ message, missing, method string }

// passOnInput checks raw, a remote's input-required result, before it is passed on to
// the caller of ctx: each input request is of a kind the import relays (relay; else
// unrelayed says why) that the caller can answer (cannotAnswer). It returns the
// requests as the caller is to get them and the remote's state (not yet sealed).
func passOnInput(ctx context.Context, raw json.RawMessage, relay []string, unrelayed func(method string) string,
	cannotAnswer func(ctx context.Context, kind string) (*mcpclient.ErrorObject, bool)) (mcp.MultiRoundTripResult, *inputRefusal) {
	var asked struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if err := json.Unmarshal(raw, &asked); err != nil {
		return mcp.MultiRoundTripResult{}, &inputRefusal{message: MarkerRemoteError + "the remote's input-required result does not parse: " + clip.Line(err.Error(), 200)}
	}
	requests := make(mcp.InputRequests, len(asked.InputRequests))
	for key, rawRequest := range asked.InputRequests {
		var input mcp.InputRequest
		if err := json.Unmarshal(rawRequest, &input); err != nil {
			return mcp.MultiRoundTripResult{}, &inputRefusal{message: MarkerRemoteError + "the remote asked for input the gateway cannot pass on: " + clip.Line(err.Error(), 200)}
		}
		kind := relayedMethods[string(input.Method)]
		if !slices.Contains(relay, kind) {
			return mcp.MultiRoundTripResult{}, &inputRefusal{message: MarkerCallFailed + unrelayed(string(input.Method)), method: string(input.Method)}
		}
		if why, missing := cannotAnswer(ctx, kind); why != nil {
			refused := &inputRefusal{message: MarkerCallFailed + why.Message, method: string(input.Method)}
			if missing {
				refused.missing = kind
			}
			return mcp.MultiRoundTripResult{}, refused
		}
		if input.Sampling != nil {
			// As for a relayed request (relay.go): no context from the caller's other
			// servers, nor from this gateway's other imports.
			input.Sampling.IncludeContext = "none"
		}
		requests[key] = input
	}
	return mcp.MultiRoundTripResult{InputRequests: requests, RequestState: asked.RequestState}, nil
}

// errNotModern is forwardModern's failed result when the remote refused the protocol
// version (UnsupportedProtocolVersionError), before acting on the call.
var errNotModern = mcp.NewToolResultError(MarkerRemoteError + "the remote refused protocol " + adapterconfig.EraModern +
	", which its last handshake found it serving; the import's next handshake records what it serves now")

// forwardModern makes the call on the remote in protocol 2026-07-28, and returns its
// result as sent and the client that got it; or the failed result to answer
// (errNotModern when the remote refused the era).
func (r *remote) forwardModern(ctx context.Context, t *Tool, args []byte, opts mcpclient.CallOptions) (raw json.RawMessage, client *mcpclient.Client, failed *mcp.CallToolResult) {
	ctx, span := r.startForwardSpan(ctx, t)
	defer func() { endForwardSpan(span, failed, raw) }()
	ctx, cancel := context.WithTimeout(ctx, t.Backend.Timeout.Duration)
	defer cancel()
	raw, client, err := r.withClient(ctx, "tool", t.Name, func(ctx context.Context, c *mcpclient.Client) (json.RawMessage, error) {
		return c.Modern(mcpclient.RequestMeta{}).CallToolWith(ctx, t.Backend.RemoteName, args, opts)
	})
	var rpcErr *mcpclient.RPCError
	switch {
	case err == nil:
		return raw, client, nil
	case client != nil && errors.As(err, &rpcErr) && rpcErr.Code == mcp.UNSUPPORTED_PROTOCOL_VERSION:
		return nil, nil, errNotModern
	case client != nil && errors.As(err, &rpcErr) && rpcErr.Code == mcp.MISSING_REQUIRED_CLIENT_CAPABILITY:
		return nil, nil, remoteNeedsCapability(ctx, rpcErr, client)
	case client != nil && errors.As(err, &rpcErr):
		return nil, nil, mcp.NewToolResultError(MarkerRemoteError + rpcErr.Error())
	default:
		return nil, nil, r.callFailed(ctx, t, err)
	}
}

// withClient is withSession for a request of protocol 2026-07-28, which needs no
// session: do runs with the client in use (the caller's own for an import with
// callerCredentials), and is retried once as withSession retries.
func (r *remote) withClient(ctx context.Context, key, name string, do func(context.Context, *mcpclient.Client) (json.RawMessage, error)) (json.RawMessage, *mcpclient.Client, error) {
	r, err := r.forCaller(ctx)
	if err != nil {
		return nil, nil, err
	}
	for retried := false; ; retried = true {
		r.mu.Lock()
		client, closed := r.client, r.closed
		r.mu.Unlock()
		if closed {
			return nil, nil, errRemoteClosed
		}
		if client == nil {
			return nil, nil, fmt.Errorf("no client for the remote %s", r.name)
		}
		raw, err := do(ctx, client)
		if err == nil {
			return raw, client, nil
		}
		if answered, final := r.afterFailure(ctx, client, err, retried, key, name); final != nil {
			return nil, answered, final
		}
	}
}

// ---- the pass-through of 2026-07-28 calls ----

// modernProtocol is true for a request of protocol 2026-07-28 (by its header; the
// _meta must agree, plainModernCall).
func modernProtocol(r *http.Request) bool {
	v := r.Header.Get(mcp.HeaderProtocolVersion)
	return v != "" && mcp.IsValidProtocolVersion(v) && mcp.IsModernProtocol(v)
}

// plainModernCall is the _meta to forward a call of protocol 2026-07-28 with, when the
// call is one the pass-through answers as mcp-go would: no Last-Event-ID, its
// Mcp-Method and Mcp-Name headers those of its body (spelled plainly), a _meta of the
// protocol version the header states, a capabilities object and optionally a
// clientInfo, and nothing else (no log level, progress token or trace context, no
// requestState). Anything else is nil, and mcp-go serves (or refuses) the call.
func plainModernCall(r *http.Request, call *forwardableCall) *mcpclient.RequestMeta {
	h := r.Header
	if h.Get(mcp.HeaderLastEventID) != "" || h.Get(mcp.HeaderMethod) != string(mcp.MethodToolsCall) ||
		h.Get(mcp.HeaderName) != call.Params.Name || call.Params.Name == "" || len(call.Params.Meta) == 0 {
		return nil
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(call.Params.Meta, &members) != nil {
		return nil
	}
	var version string
	var caps map[string]json.RawMessage
	for key, value := range members {
		switch key {
		case mcp.MetaKeyProtocolVersion:
			if json.Unmarshal(value, &version) != nil {
				return nil
			}
		case mcp.MetaKeyClientCapabilities:
			if json.Unmarshal(value, &caps) != nil || caps == nil {
				return nil
			}
		case mcp.MetaKeyClientInfo:
		default:
			return nil
		}
	}
	if version != h.Get(mcp.HeaderProtocolVersion) || caps == nil {
		return nil
	}
	return &mcpclient.RequestMeta{ProtocolVersion: version, ClientCapabilities: json.RawMessage("{}")}
}

// passesModernOf says whether a call of t in protocol 2026-07-28 can take the
// pass-through: its remote serves that era, and nothing about it needs more than the
// pass-through checks (x-mcp-header arguments, a caller's own credential, which may
// ask the caller to connect).
func passesModernOf(t *Tool) bool {
	return t.Backend.ServesModern() && t.paramTool == nil && t.Backend.CallerCredentials == nil &&
		!strings.Contains(string(modernDefinitionOf(t.Backend)), "x-mcp-header")
}

// forwardModernCall validates the call's arguments and forwards it in protocol
// 2026-07-28 with meta. A successful result the remote sent is returned as sent;
// anything else as the result to answer.
func (t *Tool) forwardModernCall(ctx context.Context, req mcp.CallToolRequest, meta *mcpclient.RequestMeta) (json.RawMessage, *mcp.CallToolResult) {
	args, refused := t.Arguments(req)
	if refused != nil {
		return nil, refused
	}
	raw, client, failed := t.remote.forwardModern(ctx, t, args, mcpclient.CallOptions{Meta: meta})
	switch {
	case failed == errNotModern && t.Backend.ServesLegacy():
		// As callModern does.
		t.remote.log.Info("the remote refused protocol 2026-07-28; calling it in 2025-11-25", "tool", t.Name)
		return t.forwardCall(ctx, req, nil)
	case failed != nil:
		return nil, failed
	case inputRequired(raw):
		// The import relays nothing (else mcp-go serves the call): refused.
		return nil, t.askCaller(ctx, raw, callerOf(ctx))
	case taskCreated(raw):
		task, err := t.handOverTask(ctx, raw, meta)
		if err != nil {
			return nil, mcp.NewToolResultError(MarkerRemoteError + err.Error())
		}
		return task, nil
	case !successfulToolResult(raw):
		return nil, remoteResult(raw, client)
	}
	return raw, nil
}

// modernResult is result with serverInfo in its _meta (in place of the remote's) and
// a resultType, as mcp-go shapes every result of protocol 2026-07-28; result as it is
// when it is not an object.
func modernResult(result, serverInfo json.RawMessage) json.RawMessage {
	var members map[string]json.RawMessage
	if json.Unmarshal(result, &members) != nil || members == nil {
		return result
	}
	meta := map[string]json.RawMessage{}
	if raw := members["_meta"]; len(raw) > 0 && json.Unmarshal(raw, &meta) != nil {
		return result
	}
	meta[mcp.MetaKeyServerInfo] = serverInfo
	encodedMeta, err := json.Marshal(meta)
	if err != nil {
		return result
	}
	members["_meta"] = encodedMeta
	if _, ok := members["resultType"]; !ok {
		members["resultType"] = json.RawMessage(`"` + string(mcp.ResultTypeComplete) + `"`)
	}
	out, err := json.Marshal(members)
	if err != nil {
		return result
	}
	return out
}

// refusedRequestState answers a retry whose requestState the gateway cannot open with
// a JSON-RPC invalid-params error (HTTP 400), as a server refuses a state it did not
// give: a complete result would read as the state accepted. The result returned stands
// for it where the answer cannot be replaced.
func refusedRequestState(ctx context.Context, err error) *mcp.CallToolResult {
	eventWatchOf(ctx).failWith(http.StatusBadRequest, mcp.INVALID_PARAMS, MarkerInputRefused+err.Error(), nil)
	return mcp.NewToolResultError(MarkerInputRefused + err.Error())
}
