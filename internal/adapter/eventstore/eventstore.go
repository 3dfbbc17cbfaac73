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
	return &Store{limits: limits.withDefaults(), sessions: map[string]*list.Element{}, order: list.New()}
}

// StoreEvent records message as the next event of streamID and returns its id, unique
// in the store.
func (s *Store) StoreEvent(_ context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	ev := event{id: strconv.FormatUint(s.seq, 10), stream: streamID, message: append(json.RawMessage(nil), message...)}
	sess := s.touch(sessionID)
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
func (s *Store) ReplayEventsAfter(_ context.Context, sessionID, lastEventID string, send func(eventID string, message json.RawMessage) error) (string, error) {
	stream, tail, err := s.after(sessionID, lastEventID)
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

// after copies, under the lock, the events of lastEventID's stream that follow it.
func (s *Store) after(sessionID, lastEventID string) (string, []event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.sessions[sessionID]
	if !ok {
		return "", nil, fmt.Errorf("%w: %s", server.ErrUnknownEventID, lastEventID)
	}
	events := el.Value.(*session).events
	for i, ev := range events {
		if ev.id != lastEventID {
			continue
		}
		var tail []event
		for _, later := range events[i+1:] {
			if later.stream == ev.stream {
				tail = append(tail, later)
			}
		}
		return ev.stream, tail, nil
	}
	return "", nil, fmt.Errorf("%w: %s", server.ErrUnknownEventID, lastEventID)
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
