package interleave

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The server's events and the handler's writes share a response: each goes out whole,
// in whatever order they come. Run with -race: the handler sets its headers from its
// goroutines while the server writes from another.
func TestWriter_InterleavesWholeEvents(t *testing.T) {
	out := httptest.NewRecorder()
	w := New(out)
	const each = 50
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range each {
			if err := w.WriteEvent(fmt.Sprintf("event: message\ndata: {\"id\":\"cantus-ask-%d\"}\n\n", i), false); err != nil {
				t.Errorf("WriteEvent: %v", err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range each {
			w.Header().Set("Content-Type", "text/event-stream") // as mcp-go does before each event
			w.WriteHeader(http.StatusOK)
			_, _ = fmt.Fprintf(w, "event: message\ndata: {\"method\":\"notifications/progress\",\"n\":%d}\n\n", i)
		}
	}()
	wg.Wait()
	events := strings.Split(strings.TrimSuffix(out.Body.String(), "\n\n"), "\n\n")
	if len(events) != 2*each {
		t.Fatalf("%d events written, want %d:\n%s", len(events), 2*each, out.Body.String())
	}
	for _, event := range events {
		if !strings.HasPrefix(event, "event: message\ndata: {") || !strings.HasSuffix(event, "}") || strings.Count(event, "\n") != 1 {
			t.Fatalf("an event was not written whole: %q", event)
		}
	}
}

// Whichever begins the response sets its kind: the server's event an event stream,
// which the handler's status and headers then do not replace; the handler's JSON answer
// its own, after which the server writes no event into it.
func TestWriter_TheFirstWriterSetsTheResponseKind(t *testing.T) {
	asked := httptest.NewRecorder()
	w := New(asked)
	if err := w.WriteEvent("event: message\ndata: {}\n\n", false); err != nil {
		t.Fatal(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	if got := asked.Header().Get("Content-Type"); asked.Code != http.StatusOK || got != "text/event-stream" {
		t.Errorf("event first: %d %q, want 200 text/event-stream", asked.Code, got)
	}

	answered := httptest.NewRecorder()
	w = New(answered)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if err := w.WriteEvent("event: message\ndata: {}\n\n", false); !errors.Is(err, ErrNotEventStream) {
		t.Errorf("an event after a JSON answer began: %v, want ErrNotEventStream", err)
	}
	if got := answered.Header().Get("Content-Type"); got != "application/json" || answered.Body.Len() != 0 {
		t.Errorf("JSON first: %q with %q written, want the handler's application/json and nothing else", got, answered.Body.String())
	}
}

// An event that ends the response ends it: the handler's later writes fail, and
// nothing more goes out.
func TestWriter_AnEndingEventStopsLaterWrites(t *testing.T) {
	out := httptest.NewRecorder()
	w := New(out)
	if err := w.WriteEvent("id: 1\ndata: \n\n", true); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("event: message\ndata: {}\n\n")); !errors.Is(err, ErrEnded) {
		t.Errorf("a write after the end: %v, want ErrEnded", err)
	}
	if err := w.WriteEvent("data: late\n\n", false); !errors.Is(err, ErrEnded) {
		t.Errorf("an event after the end: %v, want ErrEnded", err)
	}
	if !w.End() {
		t.Error("End after an ending event says the response had not ended")
	}
	if got := out.Body.String(); got != "id: 1\ndata: \n\n" {
		t.Errorf("written %q, want only the ending event", got)
	}
}
