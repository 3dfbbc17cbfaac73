// Package admission decides what the adapter lets in and counts what it let in: the
// call gate that shutdown closes, the call limits, each caller's request rate and share
// of the streams, the CEL budget of one request, and the auth filter in front of the MCP
// endpoints.
package admission

import (
	"context"
	"sync"

	"github.com/cantus-dev/cantus-operator/internal/wake"
)

// Gate counts the MCP requests and tool calls in flight and, once shutdown stops
// admitting, refuses new ones. Admission and counting share one lock so that a request
// cannot slip in between "refusing" and "nothing in flight".
type Gate struct {
	mu       sync.Mutex
	refusing bool
	active   int
	// idle wakes the waiters for active to fall to 0.
	idle wake.Cond
}

// NewGate is an open gate with nothing in flight.
func NewGate() *Gate {
	return &Gate{}
}

// Admission is one unit of in-flight work holding the gate open. It is shared by a
// Request and the tool call it carries, so that a call counts once.
type Admission struct {
	gate *Gate
	mu   sync.Mutex
	refs int
}

// Retain lets the tool call join its request's admission; false once the request has
// already finished (the sse transport answers the POST before the call runs).
func (a *Admission) Retain() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refs == 0 {
		return false
	}
	a.refs++
	return true
}

// Release ends the admission's share of its work; the last one leaves the gate.
func (a *Admission) Release() {
	a.mu.Lock()
	a.refs--
	finished := a.refs == 0
	a.mu.Unlock()
	if finished {
		a.gate.leave()
	}
}

// Admit counts a new request unless the gate is refusing.
func (g *Gate) Admit() (*Admission, bool) {
	a := new(Admission)
	return a, g.AdmitInto(a)
}

// AdmitInto counts a new request as a unless the gate is refusing.
func (g *Gate) AdmitInto(a *Admission) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refusing {
		return false
	}
	g.enterLocked(a)
	return true
}

// Track counts work that was already admitted, such as a call that arrived on an open
// sse stream, and so must be waited for even while refusing.
func (g *Gate) Track() *Admission {
	a := new(Admission)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.enterLocked(a)
	return a
}

func (g *Gate) enterLocked(a *Admission) {
	g.active++
	a.gate, a.refs = g, 1
}

func (g *Gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active--
	if g.active == 0 {
		g.idle.Broadcast()
	}
}

type admissionKey struct{}

// Hold keeps shutdown waiting until the tool call of ctx finishes; its Release must
// be called. The call joins its request's admission when ctx carries one (With), else
// it is tracked on its own. (An *Admission rather than a func: a method value would
// allocate per call.)
func (g *Gate) Hold(ctx context.Context) *Admission {
	if a, ok := From(ctx); ok && a.Retain() {
		return a
	}
	return g.Track()
}

// With is ctx carrying the admission of its request, which Hold joins.
func With(ctx context.Context, a *Admission) context.Context {
	return context.WithValue(ctx, admissionKey{}, a)
}

// From is the admission ctx carries, if any.
func From(ctx context.Context) (*Admission, bool) {
	a, ok := ctx.Value(admissionKey{}).(*Admission)
	return a, ok
}

// RefuseNew closes the gate to new work; work already admitted goes on.
func (g *Gate) RefuseNew() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refusing = true
}

// IsRefusing says whether the gate refuses new work.
func (g *Gate) IsRefusing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refusing
}

// InFlight is how much admitted work has not finished.
func (g *Gate) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active
}

// WaitIdle returns when nothing is in flight, or ctx's error when it ends first.
func (g *Gate) WaitIdle(ctx context.Context) error {
	return g.idle.Wait(ctx, &g.mu, func() bool { return g.active == 0 })
}
