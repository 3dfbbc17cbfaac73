package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/clip"
)

// maxMCPRequestBytes bounds a JSON-RPC message; tool arguments are small, and an
// unbounded body would let one client exhaust the pod's memory.
const maxMCPRequestBytes = 16 << 20

// callGate counts the MCP requests and tool calls in flight and, once shutdown stops
// admitting, refuses new ones. Admission and counting share one lock so that a request
// cannot slip in between "refusing" and "nothing in flight".
type callGate struct {
	mu       sync.Mutex
	refusing bool
	active   int
	// idle is made by a waiter while active > 0, and closed (and dropped) when active
	// falls to 0; so a call that finds the gate idle makes no channel.
	idle chan struct{}
}

func newCallGate() *callGate {
	return &callGate{}
}

// admission is one unit of in-flight work holding the gate open. It is shared by a
// request and the tool call it carries, so that a call counts once.
type admission struct {
	gate *callGate
	mu   sync.Mutex
	refs int
}

// retain lets the tool call join its request's admission; false once the request has
// already finished (the sse transport answers the POST before the call runs).
func (a *admission) retain() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refs == 0 {
		return false
	}
	a.refs++
	return true
}

func (a *admission) release() {
	a.mu.Lock()
	a.refs--
	finished := a.refs == 0
	a.mu.Unlock()
	if finished {
		a.gate.leave()
	}
}

// admit counts a new request unless the gate is refusing.
func (g *callGate) admit() (*admission, bool) {
	a := new(admission)
	return a, g.admitInto(a)
}

// admitInto counts a new request as a unless the gate is refusing.
func (g *callGate) admitInto(a *admission) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refusing {
		return false
	}
	g.enterLocked(a)
	return true
}

// track counts work that was already admitted, such as a call that arrived on an open
// sse stream, and so must be waited for even while refusing.
func (g *callGate) track() *admission {
	a := new(admission)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.enterLocked(a)
	return a
}

func (g *callGate) enterLocked(a *admission) {
	g.active++
	a.gate, a.refs = g, 1
}

func (g *callGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active--
	if g.active == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

type admissionKey struct{}

// holdCall keeps shutdown waiting until the tool call finishes; its release must be
// called. (An *admission rather than a func: a method value would allocate per call.)
func (s *Server) holdCall(ctx context.Context) *admission {
	if a, ok := ctx.Value(admissionKey{}).(*admission); ok && a.retain() {
		return a
	}
	return s.gate.track()
}

func (g *callGate) refuseNew() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refusing = true
}

func (g *callGate) isRefusing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refusing
}

func (g *callGate) inFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active
}

// waitIdle returns when nothing is in flight, or ctx's error when it ends first.
func (g *callGate) waitIdle(ctx context.Context) error {
	for {
		g.mu.Lock()
		if g.active == 0 {
			g.mu.Unlock()
			return nil
		}
		if g.idle == nil {
			g.idle = make(chan struct{})
		}
		idle := g.idle
		g.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// jsonRPCHead is the part of a JSON-RPC message the gate needs to decide.
type jsonRPCHead struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method"`
}

// gateMCP admits requests to the MCP endpoints: calls are counted so shutdown can wait
// for them, long-lived streams are tied to streamsCtx so shutdown can end them, and
// everything new is refused once shutdown stops admitting.
//
// A POST body is read here (bounded), its method and id read once the way mcp-go reads
// them (readMessage), and handed on.
func (s *Server) gateMCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		var gb *gatedBody // a POST's
		switch r.Method {
		case http.MethodDelete:
			// Ending a session frees state; there is no reason to refuse it.
			next.ServeHTTP(w, r)
			return
		case http.MethodGet:
			s.serveStream(w, r, next, nil)
			return
		case http.MethodPost:
			var err error
			if gb, body, err = readBody(w, r, s.bodyReadTimeout()); err != nil {
				refuseBody(w, err)
				return
			}
			msg := readMessage(body)
			if s.overCallerRate(w, r, msg) {
				return
			}
			if s.auth.HasRules() {
				r = r.WithContext(withCELBudget(r.Context()))
			}
			if msg.Method == string(mcp.MethodSubscriptionsListen) {
				s.serveListen(w, r, gb, body, msg.ID, next)
				return
			}
			if defs := s.state.Load().defs; len(defs) > 0 && msg.Method == string(mcp.MethodToolsList) {
				lw := gateway.NewListAnswerWriter(w, defs)
				defer lw.Finish()
				w = lw
			}
			if cw := s.importedListWriter(w, body); cw != nil {
				defer cw.Finish()
				w = cw
			}
		}
		if gb != nil {
			// The admission rides on the body to the call (see callContext), sparing
			// a copy of the request.
			if !s.gate.admitInto(&gb.admission) {
				writeRefusal(w, parseHead(body).ID)
				return
			}
			gb.admitted = true
			defer gb.admission.release()
			if s.serveContentRequest(w, r, body) {
				return
			}
			remote := s.state.Load().remote
			if remote && s.streamable != nil && s.cfg.Stateless && gateway.PassThrough(w, r, body, (*gatewayServer)(s)) {
				return
			}
			if remote && s.streamable != nil {
				// A forwarded call may pass the remote's notifications on (see
				// gateway.EventWatch).
				gb.events = gateway.WatchEvents(w)
				w = gb.events
			}
			next.ServeHTTP(w, r)
			return
		}
		a, admitted := s.gate.admit()
		if !admitted {
			writeRefusal(w, parseHead(body).ID)
			return
		}
		defer a.release()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), admissionKey{}, a)))
	})
}

// refuseBody answers a POST whose body could not be read.
func refuseBody(w http.ResponseWriter, err error) {
	status := http.StatusRequestTimeout
	if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
		status = http.StatusRequestEntityTooLarge
	}
	http.Error(w, err.Error(), status)
}

// overCallerRate charges a request to its caller's budget (spec.limits.perCaller), one
// unit whatever its method, and answers 429 to one over it before it costs anything
// more. Notifications and responses are not requests and pass, as does everything
// without a per-caller limit.
func (s *Server) overCallerRate(w http.ResponseWriter, r *http.Request, msg rpcMessage) bool {
	if s.callers == nil || !msg.request() {
		return false
	}
	caller := callerKey(r)
	now := time.Now()
	ok, retryAfter := s.callers.admit(caller, now)
	if ok {
		return false
	}
	s.metrics.observeRejection(rejectedRateLimited)
	s.refusals.note(s.log, caller, now, "refused a request over its caller's rate (spec.limits.perCaller)", "method", clip.Line(msg.Method, 60))
	refuseRateLimited(w, msg.ID, retryAfter)
	return true
}

// rpcMessage is what the gate reads of a JSON-RPC message: as mcp-go's server reads it
// (server.MCPServer.HandleMessage), with encoding/json, so that keys match whatever
// their case, the last of duplicate keys wins, and escapes ("tools\/call") are
// decoded. The limits rest on this reading, never on the raw bytes.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	// parsed is false for a body encoding/json refuses (mcp-go answers it a parse
	// error).
	parsed bool
}

// readMessage reads the message body; a body that does not parse gives what was read
// of it before the error.
func readMessage(body []byte) rpcMessage {
	var m rpcMessage
	m.parsed = len(body) > 0 && json.Unmarshal(body, &m) == nil
	return m
}

// request says whether mcp-go may dispatch the message as a request: all but those its
// HandleMessage surely does not, notifications (no id, or null) and responses (a
// result). A body that does not parse counts as a request.
func (m rpcMessage) request() bool {
	if !m.parsed {
		return true
	}
	notification := isJSONNull(m.ID)
	response := !isJSONNull(m.Result)
	return !notification && !response
}

// isJSONNull says whether raw is absent or null, as an `any` field would decode it (nil).
func isJSONNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// serveListen serves the subscriptions/listen stream whose body gb holds, unless its
// caller holds its share of the streams this pod keeps open already (or the pod all of
// them): then before its body is read any further.
func (s *Server) serveListen(w http.ResponseWriter, r *http.Request, gb *gatedBody, body []byte, id json.RawMessage, next http.Handler) {
	caller := callerKey(r)
	if why := s.listens.take(caller); why != "" {
		s.refusals.note(s.log, caller, time.Now(), "refused a subscriptions/listen stream over its caller's share", "why", why)
		refuseOverShare(w, id, why)
		return
	}
	defer s.listens.give(caller)
	s.serveStream(w, r, s.listenHandler(gb, body, next), body)
}

// requestContext is mcp-go's context hook: callContext, and on a server with remote
// tools the caller whose shares a relaying call counts against.
func (s *Server) requestContext(ctx context.Context, r *http.Request) context.Context {
	if s.state.Load().remote {
		ctx = gateway.WithCallerKey(ctx, callerKey(r))
	}
	return callContext(ctx, r)
}

// callContext gives the call of an admitted POST its request's admission, which
// holdCall joins.
func callContext(ctx context.Context, r *http.Request) context.Context {
	if gb, ok := r.Body.(*gatedBody); ok && gb.admitted {
		ctx = context.WithValue(ctx, admissionKey{}, &gb.admission)
		if gb.events != nil {
			ctx = gateway.WithEventWatch(ctx, gb.events)
		}
	}
	return ctx
}

// serveStream serves a request that stays open for as long as the client listens (GET,
// subscriptions/listen). Such requests are not calls, and waiting for them would always
// exhaust the shutdown grace: they are not counted, and shutdown ends them.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, next http.Handler, body []byte) {
	if s.gate.isRefusing() {
		writeRefusal(w, parseHead(body).ID)
		return
	}
	s.metrics.openStreams.Inc()
	defer s.metrics.openStreams.Dec()
	if s.sse != nil {
		// The answers to the POSTs of an sse session, tools/list among them, arrive here.
		w = gateway.StreamEventWriter{ResponseWriter: w, Definitions: func() gateway.Definitions { return s.state.Load().defs }}
	}
	next.ServeHTTP(w, r.WithContext(s.streamContext(r.Context())))
}

// parseHead parses the method and id of a JSON-RPC message. A body that does not parse
// (or none) gives the zero head; the MCP handler answers it, and it counts as a call
// meanwhile.
func parseHead(body []byte) jsonRPCHead {
	var head jsonRPCHead
	if len(body) > 0 {
		_ = json.Unmarshal(body, &head)
	}
	return head
}

// streamContext ends with parent or when shutdown ends the streams.
func (s *Server) streamContext(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.streamsCtx, cancel)
	context.AfterFunc(ctx, func() { stop() })
	return ctx
}

// readBody reads the body, bounded by maxMCPRequestBytes, and puts it back for the MCP
// handler.
func readBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) (*gatedBody, []byte, error) {
	if tb, ok := r.Body.(*tracedBody); ok && tb.Len() == len(tb.body) {
		// traceMCP read it already, to name its span.
		gb := new(gatedBody)
		gb.Reset(tb.body)
		r.Body = gb
		return gb, tb.body, nil
	}
	size := 512 // as io.ReadAll
	if n := r.ContentLength; n >= 0 && n < maxMCPRequestBytes {
		size = int(n) + 1 // room to see EOF without growing
	}
	var body []byte
	err := withBodyDeadline(w, timeout, func() (err error) {
		body, err = readAll(http.MaxBytesReader(w, r.Body, maxMCPRequestBytes), size)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read request body: %w", err)
	}
	gb := new(gatedBody)
	gb.Reset(body)
	r.Body = gb
	return gb, body, nil
}

func (s *Server) bodyReadTimeout() time.Duration {
	if s.opts.bodyReadTimeout > 0 {
		return s.opts.bodyReadTimeout
	}
	return defaultBodyReadTimeout
}

// readAll is io.ReadAll starting with a buffer of size bytes.
func readAll(r io.Reader, size int) ([]byte, error) {
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append grow it
		}
	}
}

// gatedBody is a POST body the gate read, handed on to the MCP handler, with the
// admission of its request (when admitted): one allocation for the body (io.NopCloser
// over a bytes.Reader takes two) and the admission, and none to copy the request.
type gatedBody struct {
	bytes.Reader
	admission admission
	admitted  bool
	events    *gateway.EventWatch
}

func (*gatedBody) Close() error { return nil }

// gatewayServer is the server as the gateway's pass-through sees it.
type gatewayServer Server

// RemoteTool implements gateway.Server.
func (g *gatewayServer) RemoteTool(name string) *gateway.Tool {
	if t := g.state.Load().byName[name]; t != nil {
		return t.gateway
	}
	return nil
}

// RunCall implements gateway.Server: the call joins the admission of its request.
func (g *gatewayServer) RunCall(r *http.Request, name string, run func(context.Context) *mcp.CallToolResult) *mcp.CallToolResult {
	return (*Server)(g).runCall((*Server)(g).requestContext(r.Context(), r), name, run)
}

// writeRefusal answers 503 with a JSON-RPC error, and closes the connection so the
// client's retry goes through the Service to a ready replica.
func writeRefusal(w http.ResponseWriter, id json.RawMessage) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      id,
		"error": map[string]any{
			"code":    -32000,
			"message": "server is shutting down: retry the request, another replica will take it",
		},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}
