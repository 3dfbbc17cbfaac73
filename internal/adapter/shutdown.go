package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/mark3labs/mcp-go/mcp"
)

// maxMCPRequestBytes bounds a JSON-RPC message; tool arguments are small, and an
// unbounded body would let one client exhaust the pod's memory.
const maxMCPRequestBytes = 16 << 20

// sseAnswerSettle is how long shutdown waits, after the last call returned, before
// closing sse streams: on that transport the answer is queued for the stream after the
// handler returns, and closing the stream at once could drop it.
const sseAnswerSettle = 200 * time.Millisecond

// callGate counts the MCP requests and tool calls in flight and, once shutdown stops
// admitting, refuses new ones. Admission and counting share one lock so that a request
// cannot slip in between "refusing" and "nothing in flight".
type callGate struct {
	mu       sync.Mutex
	refusing bool
	active   int
	idle     chan struct{} // closed while active == 0
}

func newCallGate() *callGate {
	idle := make(chan struct{})
	close(idle)
	return &callGate{idle: idle}
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
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refusing {
		return nil, false
	}
	return g.enterLocked(), true
}

// track counts work that was already admitted, such as a call that arrived on an open
// sse stream, and so must be waited for even while refusing.
func (g *callGate) track() *admission {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.enterLocked()
}

func (g *callGate) enterLocked() *admission {
	if g.active == 0 {
		g.idle = make(chan struct{})
	}
	g.active++
	return &admission{gate: g, refs: 1}
}

func (g *callGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active--
	if g.active == 0 {
		close(g.idle)
	}
}

type admissionKey struct{}

// holdCall keeps shutdown waiting until the tool call finishes; release must be called.
func (s *Server) holdCall(ctx context.Context) (release func()) {
	if a, ok := ctx.Value(admissionKey{}).(*admission); ok && a.retain() {
		return a.release
	}
	return s.gate.track().release
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
func (s *Server) gateMCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			// Ending a session frees state; there is no reason to refuse it.
			next.ServeHTTP(w, r)
			return
		}
		var head jsonRPCHead
		if r.Method == http.MethodPost {
			var err error
			if head, err = peekJSONRPC(w, r); err != nil {
				http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
		}
		if opensStream(r, head) {
			if s.gate.isRefusing() {
				writeRefusal(w, head.ID)
				return
			}
			next.ServeHTTP(w, r.WithContext(s.streamContext(r.Context())))
			return
		}
		a, admitted := s.gate.admit()
		if !admitted {
			writeRefusal(w, head.ID)
			return
		}
		defer a.release()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), admissionKey{}, a)))
	})
}

// opensStream reports requests that stay open for as long as the client listens; they
// are not calls, and waiting for them would always exhaust the shutdown grace.
func opensStream(r *http.Request, head jsonRPCHead) bool {
	return r.Method == http.MethodGet || head.Method == string(mcp.MethodSubscriptionsListen)
}

// streamContext ends with parent or when shutdown ends the streams.
func (s *Server) streamContext(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.streamsCtx, cancel)
	context.AfterFunc(ctx, func() { stop() })
	return ctx
}

// peekJSONRPC reads the body to learn the message's method and id, and puts the body
// back for the MCP handler.
func peekJSONRPC(w http.ResponseWriter, r *http.Request) (jsonRPCHead, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxMCPRequestBytes))
	if err != nil {
		return jsonRPCHead{}, fmt.Errorf("read request body: %w", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var head jsonRPCHead
	// A body that does not parse is left for the MCP handler to answer; it counts as
	// a call meanwhile.
	_ = json.Unmarshal(body, &head)
	return head, nil
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

// Serve serves on ln until ctx is cancelled, then shuts down gracefully: readiness
// fails first, new calls are still taken for the drain delay, then refused while the
// calls in flight finish, all within the shutdown grace. It returns nil after a clean
// shutdown. A Server serves once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if !s.serving.CompareAndSwap(false, true) {
		return errors.New("adapter server is already serving: a Server serves once")
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// Calls must outlive ctx: its cancellation starts a graceful shutdown, it does
		// not abort what is in flight.
		BaseContext: func(net.Listener) context.Context { return context.Background() },
		ErrorLog:    slog.NewLogLogger(logr.ToSlogHandler(s.log.WithName("http")), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s.log.Info("serving", "address", ln.Addr().String(), "transport", s.cfg.Transport,
		"stateless", s.cfg.Stateless, "tools", len(s.tools))

	select {
	case err := <-served:
		s.endStreams()
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	return s.shutdown(srv, served)
}

func (s *Server) shutdown(srv *http.Server, served <-chan error) error {
	began := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), began.Add(s.opts.shutdownGrace))
	defer cancel()

	s.shuttingDown.Store(true)
	// From now on every response says Connection: close, so clients reconnect through
	// the Service and reach a ready replica.
	srv.SetKeepAlivesEnabled(false)
	s.log.Info("shutdown began, readiness failing", "drainDelay", s.opts.drainDelay.String(),
		"shutdownGrace", s.opts.shutdownGrace.String(), "inFlight", s.gate.inFlight())

	sleep(ctx, s.opts.drainDelay)
	s.gate.refuseNew()
	s.log.Info("refusing new calls, waiting for calls in flight", "inFlight", s.gate.inFlight())

	waitErr := s.waitCallsAnswered(ctx)
	stranded := s.gate.inFlight()
	s.endStreams()
	if s.sse != nil {
		s.sse.CloseSessions()
	}
	if err := srv.Shutdown(ctx); err != nil {
		s.log.Info("closing connections that did not finish within the shutdown grace", "reason", err.Error())
		_ = srv.Close()
	}
	<-served
	s.backend.CloseIdleConnections()

	if waitErr != nil {
		return fmt.Errorf("shutdown grace %s expired with %d calls in flight: %w", s.opts.shutdownGrace, stranded, waitErr)
	}
	s.log.Info("shutdown complete", "took", time.Since(began).Round(time.Millisecond).String())
	return nil
}

// waitCallsAnswered returns when no call is in flight and, on the sse transport, the
// answers had time to reach their streams.
func (s *Server) waitCallsAnswered(ctx context.Context) error {
	for {
		if err := s.gate.waitIdle(ctx); err != nil {
			return err
		}
		if s.sse == nil {
			return nil
		}
		// An sse call starts after its POST was answered, so one admitted just before
		// refusing may only now be starting: settle, then look again.
		sleep(ctx, sseAnswerSettle)
		if s.gate.inFlight() == 0 {
			return nil
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
