package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
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
			s.metrics.openStreams.Inc()
			defer s.metrics.openStreams.Dec()
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
