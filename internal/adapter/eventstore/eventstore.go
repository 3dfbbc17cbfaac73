// Package eventstore keeps the events of a stateful server's SSE streams, so that a
// client whose connection broke resumes with Last-Event-ID and is sent what it missed
// (MCP 2025-11-25, Streamable HTTP, "Resumability and Redelivery"). mcp-go's own
// in-memory store keeps every event of a session until the session ends; a session a
// client abandons without DELETE would then grow without bound. This store is bounded:
// per session by events and bytes (the oldest go first), and in all by sessions (the
// least recently written goes first) and bytes.
package eventstore

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// Limits bound a Store. A zero field takes its default.
type Limits struct {
	// EventsPerSession and BytesPerSession bound what one session keeps; past them its
	// oldest events are dropped, and resuming from one of them is refused.
	EventsPerSession int
	BytesPerSession  int
	// Sessions and Bytes bound the store; past them the least recently written session
	// is dropped whole.
	Sessions int
	Bytes    int
}

// The default Limits: a client that reconnects within seconds misses a few events;
// these keep far more than that, and at most 64 MiB in all.
const (
	DefaultEventsPerSession = 1024
	DefaultBytesPerSession  = 1 << 20
	DefaultSessions         = 10000
	DefaultBytes            = 64 << 20
)

func (l Limits) withDefaults() Limits {
	if l.EventsPerSession <= 0 {
		l.EventsPerSession = DefaultEventsPerSession
	}
	if l.BytesPerSession <= 0 {
		l.BytesPerSession = DefaultBytesPerSession
	}
	if l.Sessions <= 0 {
		l.Sessions = DefaultSessions
	}
	if l.Bytes <= 0 {
		l.Bytes = DefaultBytes
	}
	return l
}

// Store is a bounded server.EventStore, safe for concurrent use.
type Store struct {
	limits Limits

	mu       sync.Mutex
	seq      uint64
	bytes    int
	sessions map[string]*list.Element // of *session, most recently written first
	order    *list.List
	// primed are the primings whose event waits for its stream, by event id.
	primed map[string]*Priming
}

var _ server.EventStore = (*Store)(nil)

// session is one session's events, oldest first, across all of its streams.
type session struct {
	id     string
	events []event
	bytes  int
}

type event struct {
	id      string
	stream  string
	message json.RawMessage
}

// New returns an empty Store bounded by limits.
func New(limits Limits) *Store {
	return &Store{limits: limits.withDefaults(), sessions: map[string]*list.Element{}, order: list.New(), primed: map[string]*Priming{}}
}

// StoreEvent records message as the next event of streamID and returns its id, unique
// in the store.
func (s *Store) StoreEvent(ctx context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.touch(sessionID)
	if p, ok := ctx.Value(primingKey{}).(*Priming); ok {
		s.bind(sess, p, streamID)
	}
	s.seq++
	ev := event{id: strconv.FormatUint(s.seq, 10), stream: streamID, message: append(json.RawMessage(nil), message...)}
	sess.events = append(sess.events, ev)
	sess.bytes += len(ev.message)
	s.bytes += len(ev.message)
	s.trimSession(sess)
	s.trimStore(sess)
	return ev.id, nil
}

// ReplayEventsAfter sends, in order, the events of lastEventID's stream stored after it,
// and returns that stream's id. An id this store no longer holds (dropped by a bound, or
// its session ended) is server.ErrUnknownEventID.
//
// The priming event of a POST whose answer has not been delivered yet (Prime) knows no
// stream yet: the replay waits until it does, the POST ends, or ctx ends.
func (s *Store) ReplayEventsAfter(ctx context.Context, sessionID, lastEventID string, send func(eventID string, message json.RawMessage) error) (string, error) {
	stream, tail, wait, err := s.after(sessionID, lastEventID)
	for wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		stream, tail, wait, err = s.after(sessionID, lastEventID)
	}
	if err != nil {
		return "", err
	}
	for _, ev := range tail {
		if err := send(ev.id, ev.message); err != nil {
			return "", err
		}
	}
	return stream, nil
}

// PurgeSession forgets every event of sessionID: the session ended.
func (s *Store) PurgeSession(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.sessions[sessionID]; ok {
		s.drop(el)
	}
	return nil
}

// Len returns the sessions held and their bytes, for metrics and tests.
func (s *Store) Len() (sessions, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions), s.bytes
}

// after copies, under the lock, the events of lastEventID's stream that follow it; or,
// for a priming event that knows no stream yet, what to wait on before asking again.
func (s *Store) after(sessionID, lastEventID string) (string, []event, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.sessions[sessionID]
	if !ok {
		return "", nil, nil, fmt.Errorf("%w: %s", server.ErrUnknownEventID, lastEventID)
	}
	events := el.Value.(*session).events
	for i, ev := range events {
		if ev.id != lastEventID {
			continue
		}
		if p, waiting := s.primed[ev.id]; waiting {
			return "", nil, p.bound, nil
		}
		var tail []event
		for _, later := range events[i+1:] {
			if later.stream == ev.stream {
				tail = append(tail, later)
			}
		}
		return ev.stream, tail, nil, nil
	}
	return "", nil, nil, fmt.Errorf("%w: %s", server.ErrUnknownEventID, lastEventID)
}

// touch returns sessionID's events, made most recently written.
func (s *Store) touch(sessionID string) *session {
	if el, ok := s.sessions[sessionID]; ok {
		s.order.MoveToFront(el)
		return el.Value.(*session)
	}
	sess := &session{id: sessionID}
	s.sessions[sessionID] = s.order.PushFront(sess)
	return sess
}

// trimSession drops a session's oldest events past its bounds; its newest event stays
// whatever its size, so that the stream it belongs to can still be resumed after it.
func (s *Store) trimSession(sess *session) {
	for len(sess.events) > 1 && (len(sess.events) > s.limits.EventsPerSession || sess.bytes > s.limits.BytesPerSession) {
		n := len(sess.events[0].message)
		sess.bytes -= n
		s.bytes -= n
		// Cleared, so that the array's dropped head holds no message until append
		// moves the live events to a new one.
		sess.events[0] = event{}
		sess.events = sess.events[1:]
	}
}

// trimStore drops the least recently written sessions, but never keep, past the store's
// bounds.
func (s *Store) trimStore(keep *session) {
	for len(s.sessions) > s.limits.Sessions || s.bytes > s.limits.Bytes {
		oldest := s.order.Back()
		if oldest == nil || oldest.Value.(*session) == keep {
			return
		}
		s.drop(oldest)
	}
}

func (s *Store) drop(el *list.Element) {
	sess := el.Value.(*session)
	s.bytes -= sess.bytes
	delete(s.sessions, sess.id)
	s.order.Remove(el)
}

// ---- priming events ----

// Priming is a POST's place among the events of its session, so that the POST's event
// stream can be ended with a priming event (an id and no data, SEP-1699) before the
// server has delivered anything on it: a client that resumes from that id is sent what
// the stream delivers afterwards. The stream is the one whose events StoreEvent records
// with a ctx carrying the Priming (WithPriming).
type Priming struct {
	// Guarded by the Store's mu.
	stream  string // the POST's stream, once an event was recorded on it
	eventID string // the priming event waiting for stream
	bound   chan struct{}
	done    bool
}

type primingKey struct{}

// WithPriming is ctx whose recorded events are p's POST's.
func WithPriming(ctx context.Context, p *Priming) context.Context {
	return context.WithValue(ctx, primingKey{}, p)
}

// NewPriming returns the Priming of a POST that has recorded nothing yet.
func NewPriming() *Priming { return &Priming{bound: make(chan struct{})} }

// Prime records a priming event on p's stream in sessionID and returns its id. When p
// has recorded no event yet, its stream is bound by the next one; until then a resume
// from the id waits. "" when p's POST is done.
func (s *Store) Prime(sessionID string, p *Priming) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.done {
		return ""
	}
	sess := s.touch(sessionID)
	s.seq++
	ev := event{id: strconv.FormatUint(s.seq, 10), stream: p.stream}
	sess.events = append(sess.events, ev)
	s.trimSession(sess)
	if p.stream == "" && p.eventID == "" {
		p.eventID = ev.id
		s.primed[ev.id] = p
	}
	return ev.id
}

// Finish says p's POST is done: a priming event still waiting for its stream is
// dropped, and the resumes waiting on it find the id unknown.
func (s *Store) Finish(sessionID string, p *Priming) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.done = true
	if p.eventID == "" {
		return
	}
	delete(s.primed, p.eventID)
	if el, ok := s.sessions[sessionID]; ok {
		sess := el.Value.(*session)
		sess.events = slices.DeleteFunc(sess.events, func(ev event) bool { return ev.id == p.eventID })
	}
	p.eventID = ""
	close(p.bound)
}

// bind records that p's POST delivers on stream; a priming event waiting for it gets
// it, and the resumes waiting on it go on.
func (s *Store) bind(sess *session, p *Priming, stream string) {
	if p.stream == "" {
		p.stream = stream
	}
	if p.eventID == "" {
		return
	}
	for i := range sess.events {
		if sess.events[i].id == p.eventID {
			sess.events[i].stream = p.stream
		}
	}
	delete(s.primed, p.eventID)
	p.eventID = ""
	close(p.bound)
}
