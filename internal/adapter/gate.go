package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/clip"
)

// maxMCPRequestBytes bounds a JSON-RPC message; tool arguments are small, and an
// unbounded body would let one client exhaust the pod's memory.
const maxMCPRequestBytes = 16 << 20

// gateMCP admits requests to the MCP endpoints: calls are counted so shutdown can wait
// for them, long-lived streams are tied to streamsCtx so shutdown can end them, and
// everything new is refused once shutdown stops admitting.
//
// A POST body is read here (bounded), its method and id read once the way mcp-go reads
// them (admission.ReadMessage), and handed on.
func (s *Server) gateMCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		var method string
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
			if gb, body, err = readBody(w, r, s.opts.readTimeout()); err != nil {
				admission.RefuseBody(w, err)
				return
			}
			msg := admission.ReadMessage(body)
			method = msg.Method
			if !msg.Request() && s.remotes.Answers().Deliver(w, body, admission.CallerKey(r)) {
				return // an older caller's answer to what a remote asked, on a stateless gateway
			}
			if s.overCallerRate(w, r, msg) {
				return
			}
			if s.auth.HasRules() {
				r = r.WithContext(admission.WithCELBudget(r.Context()))
			}
			if msg.Method == string(mcp.MethodSubscriptionsListen) {
				s.serveListen(w, r, gb, body, msg.ID, next)
				return
			}
			if defs := s.state.Load().definitionsFor(r); len(defs) > 0 && msg.Method == string(mcp.MethodToolsList) {
				lw := gateway.NewListAnswerWriter(w, defs)
				defer lw.Finish()
				w = lw
			}
			if cw := s.content.ListWriter(w, body); cw != nil {
				defer cw.Finish()
				w = cw
			}
		}
		if gb != nil {
			// The admission rides on the body to the call (see callContext), sparing
			// a copy of the request.
			if !s.gate.AdmitInto(&gb.admission) {
				admission.WriteRefusal(w, admission.ParseHead(body).ID)
				return
			}
			gb.admitted = true
			defer gb.admission.Release()
			if s.content.ServeRequest(w, r, body) {
				return
			}
			remote := s.state.Load().remote
			if remote && s.streamable != nil && gateway.ServeTask(w, r, body, (*gatewayServer)(s)) {
				return
			}
			if remote && s.streamable != nil && s.cfg.Stateless && gateway.PassThrough(w, r, body, (*gatewayServer)(s)) {
				return
			}
			if remote && s.streamable != nil {
				// A forwarded call may pass the remote's notifications on (see
				// gateway.EventWatch), and end its stream as the remote did (polling.go).
				serve := func(w http.ResponseWriter, r *http.Request) {
					gb.events = gateway.WatchEvents(w)
					next.ServeHTTP(gb.events, r)
				}
				switch pauses := (streamPauses{store: s.eventStore, log: s.log}); {
				case pauses.applies(r, method):
					pauses.serve(w, r, serve)
				case s.remotes.Answers().Asks(r, body, (*gatewayServer)(s)):
					serve(s.remotes.Answers().Ask(w, r, admission.CallerKey(r)))
				default:
					serve(w, r)
				}
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		a, admitted := s.gate.Admit()
		if !admitted {
			admission.WriteRefusal(w, admission.ParseHead(body).ID)
			return
		}
		defer a.Release()
		next.ServeHTTP(w, r.WithContext(admission.With(r.Context(), a)))
	})
}

// overCallerRate charges a request to its caller's budget (spec.limits.perCaller), one
// unit whatever its method, and answers 429 to one over it before it costs anything
// more. Notifications and responses are not requests and pass, as does everything
// without a per-caller limit.
func (s *Server) overCallerRate(w http.ResponseWriter, r *http.Request, msg admission.Message) bool {
	if s.callers == nil || !msg.Request() {
		return false
	}
	caller := admission.CallerKey(r)
	now := time.Now()
	ok, retryAfter := s.callers.Admit(caller, now)
	if ok {
		return false
	}
	s.metrics.observeRejection(admission.RejectedRateLimited)
	s.refusals.Note(s.log, caller, now, "refused a request over its caller's rate (spec.limits.perCaller)", "method", clip.Line(msg.Method, 60))
	admission.RefuseRateLimited(w, msg.ID, retryAfter)
	return true
}

// serveListen serves the subscriptions/listen stream whose body gb holds, unless its
// caller holds its share of the streams this pod keeps open already (or the pod all of
// them): then before its body is read any further.
func (s *Server) serveListen(w http.ResponseWriter, r *http.Request, gb *gatedBody, body []byte, id json.RawMessage, next http.Handler) {
	caller := admission.CallerKey(r)
	if why := s.listens.Take(caller); why != "" {
		s.refusals.Note(s.log, caller, time.Now(), "refused a subscriptions/listen stream over its caller's share", "why", why)
		admission.RefuseOverShare(w, id, why)
		return
	}
	defer s.listens.Give(caller)
	s.serveStream(w, r, s.subscriptions.ListenHandler(gb, body, next), body)
}

// requestContext is mcp-go's context hook: callContext, and on a server with remote
// tools the caller whose shares a relaying call counts against.
func (s *Server) requestContext(ctx context.Context, r *http.Request) context.Context {
	if s.state.Load().remote {
		ctx = gateway.WithCallerKey(ctx, admission.CallerKey(r))
		if s.declared != nil {
			ctx = gateway.WithDeclared(ctx, s.declared)
		}
		if id := presentedSessionID(r); id != "" && sessionsBound(&s.cfg) {
			// Its remote calls go on upstream sessions of this session's own.
			ctx = gateway.WithDownstreamSession(ctx, id)
		}
	}
	return callContext(ctx, r)
}

// callContext gives the call of an admitted POST its request's admission, which
// Gate.Hold joins.
func callContext(ctx context.Context, r *http.Request) context.Context {
	if gb, ok := r.Body.(*gatedBody); ok && gb.admitted {
		ctx = admission.With(ctx, &gb.admission)
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
	if s.gate.IsRefusing() {
		admission.WriteRefusal(w, admission.ParseHead(body).ID)
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
	err := admission.WithBodyDeadline(w, timeout, func() (err error) {
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

// readTimeout bounds reading one POST body.
func (o *options) readTimeout() time.Duration {
	if o.bodyReadTimeout > 0 {
		return o.bodyReadTimeout
	}
	return admission.DefaultBodyReadTimeout
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
	admission admission.Admission
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

// ServerInfo implements gateway.Server.
func (g *gatewayServer) ServerInfo() json.RawMessage {
	info, _ := json.Marshal(mcp.Implementation{Name: g.cfg.Server.Name, Version: g.cfg.Server.Version})
	return info
}

// definitionsFor are the imported tools' entries listed to the caller of r: those of
// protocol 2026-07-28 to a caller of that era (by its MCP-Protocol-Version, which
// mcp-go checks against the request's _meta).
func (set *toolSet) definitionsFor(r *http.Request) gateway.Definitions {
	if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		return set.modernDefs
	}
	return set.defs
}
