package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/server"
)

func store(t *testing.T, s *Store, session, stream, msg string) string {
	t.Helper()
	id, err := s.StoreEvent(context.Background(), session, stream, json.RawMessage(msg))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func replay(s *Store, session, after string) (string, []string, error) {
	var got []string
	stream, err := s.ReplayEventsAfter(context.Background(), session, after, func(_ string, m json.RawMessage) error {
		got = append(got, string(m))
		return nil
	})
	return stream, got, err
}

// A resumed stream gets exactly the events of its own stream after the last one seen.
func TestReplayGivesTheStreamsLaterEventsInOrder(t *testing.T) {
	s := New(Limits{})
	first := store(t, s, "a", "get", `1`)
	store(t, s, "a", "post-7", `x`)
	store(t, s, "a", "get", `2`)
	store(t, s, "b", "get", `other session`)
	store(t, s, "a", "get", `3`)

	stream, got, err := replay(s, "a", first)
	if err != nil || stream != "get" || !slices.Equal(got, []string{"2", "3"}) {
		t.Fatalf("replay after %s = %q %v %v; want get [2 3] nil", first, stream, got, err)
	}
	if _, _, err := replay(s, "b", first); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("another session's event id: err %v, want ErrUnknownEventID", err)
	}
}

// A session a client abandons keeps at most its bound: the oldest events go, and
// resuming from one of them is refused rather than replaying a gap.
func TestASessionKeepsItsNewestEventsWithinItsBound(t *testing.T) {
	s := New(Limits{EventsPerSession: 3})
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = store(t, s, "a", "get", fmt.Sprint(i))
	}
	if _, _, err := replay(s, "a", ids[0]); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("resume from a dropped event: err %v, want ErrUnknownEventID", err)
	}
	if _, got, err := replay(s, "a", ids[2]); err != nil || !slices.Equal(got, []string{"3", "4"}) {
		t.Errorf("resume from a kept event: %v %v, want [3 4]", got, err)
	}

	s = New(Limits{BytesPerSession: 10})
	store(t, s, "a", "get", `"aaaa"`)
	store(t, s, "a", "get", `"bbbb"`)
	if _, bytes := s.Len(); bytes > 10 {
		t.Errorf("a session holds %d bytes, bound 10", bytes)
	}
	huge := store(t, s, "a", "get", `"an event larger than the whole bound"`)
	if _, got, err := replay(s, "a", huge); err != nil || len(got) != 0 {
		t.Errorf("the newest event is kept whatever its size: %v %v", got, err)
	}
}

// Many sessions cannot hold more than the store's bounds: the least recently written
// go first, and an ended session is forgotten at once.
func TestTheStoreDropsTheLeastRecentlyWrittenSessions(t *testing.T) {
	s := New(Limits{Sessions: 2, Bytes: 1 << 10})
	old := store(t, s, "old", "get", `1`)
	store(t, s, "mid", "get", `1`)
	store(t, s, "new", "get", `1`)
	if n, _ := s.Len(); n != 2 {
		t.Fatalf("%d sessions held, bound 2", n)
	}
	if _, _, err := replay(s, "old", old); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("the least recently written session is still held: %v", err)
	}
	if err := s.PurgeSession(context.Background(), "mid"); err != nil {
		t.Fatal(err)
	}
	if n, bytes := s.Len(); n != 1 || bytes != 1 {
		t.Errorf("after purge: %d sessions, %d bytes; want 1, 1", n, bytes)
	}

	s = New(Limits{Bytes: 100, BytesPerSession: 60})
	for i := range 10 {
		store(t, s, fmt.Sprint("s", i), "get", `"0123456789012345678901234567890123456789"`)
	}
	if _, bytes := s.Len(); bytes > 100 {
		t.Errorf("the store holds %d bytes, bound 100", bytes)
	}
}

// A priming event made before its POST recorded anything holds a resume until the
// POST's first event names the stream; the resume then gets that event. A priming of a
// POST that ends without an event is dropped, and a resume from it is refused.
func TestPrimingEventWaitsForItsStream(t *testing.T) {
	s := New(Limits{})
	p := NewPriming()
	id := s.Prime("sess", p)
	type result struct {
		stream string
		got    []string
		err    error
	}
	resumed := make(chan result, 1)
	go func() {
		stream, got, err := replay(s, "sess", id)
		resumed <- result{stream, got, err}
	}()
	select {
	case r := <-resumed:
		t.Fatalf("the resume returned %+v before the POST's stream was known", r)
	default:
	}
	if _, err := s.StoreEvent(WithPriming(context.Background(), p), "sess", "post-1", json.RawMessage(`{"answer":1}`)); err != nil {
		t.Fatal(err)
	}
	if r := <-resumed; r.err != nil || r.stream != "post-1" || !slices.Equal(r.got, []string{`{"answer":1}`}) {
		t.Errorf("the resume got %+v, want the POST's answer on stream post-1", r)
	}

	ended := NewPriming()
	id = s.Prime("sess", ended)
	s.Finish("sess", ended)
	if _, _, err := replay(s, "sess", id); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("a resume from the priming of a POST that recorded nothing: %v, want ErrUnknownEventID", err)
	}
	if again := s.Prime("sess", ended); again != "" {
		t.Errorf("a finished POST was primed again: %q", again)
	}
}
