package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The gateway's questions and mcp-go's writes share a call's response: each goes out
// whole, in whatever order they come. Run with -race: mcp-go's headers are set from
// its goroutines while the gateway asks from the call's.
func TestAskingWriter_InterleavesWholeEventsOnTheStreamItBegan(t *testing.T) {
	out := httptest.NewRecorder()
	w := &askingWriter{out: out, header: http.Header{}}
	const each = 50
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range each {
			if err := w.writeEvent([]byte(fmt.Sprintf(`{"id":"cantus-ask-%d","method":"elicitation/create"}`, i))); err != nil {
				t.Errorf("writeEvent: %v", err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range each {
			w.Header().Set("Content-Type", "application/json") // what mcp-go sets for a JSON answer
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

// Whichever begins the response sets its type: the gateway's question an event stream,
// mcp-go's answer its own headers.
func TestAskingWriter_TheFirstWriterSetsTheResponseType(t *testing.T) {
	asked := httptest.NewRecorder()
	w := &askingWriter{out: asked, header: http.Header{}}
	if err := w.writeEvent([]byte(`{"id":"cantus-ask-1","method":"roots/list"}`)); err != nil {
		t.Fatal(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	if got := asked.Header().Get("Content-Type"); asked.Code != http.StatusOK || got != "text/event-stream" {
		t.Errorf("asked first: %d %q, want 200 text/event-stream", asked.Code, got)
	}

	answered := httptest.NewRecorder()
	w = &askingWriter{out: answered, header: http.Header{}}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if got := answered.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("answered first: %q, want mcp-go's application/json", got)
	}
}
