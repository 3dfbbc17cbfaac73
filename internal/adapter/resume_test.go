package adapter

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// sseEvent is one event of an SSE stream.
type sseEvent struct{ id, data string }

// openEventStream opens the session's GET stream, resuming after lastEventID when set, and
// returns its events as they come; cancel closes the connection.
func openEventStream(t *testing.T, url, sessionID, lastEventID string) (events <-chan sseEvent, cancel func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(testkit.Context(t, testTimeout))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sessionID)
	req.Header.Set("Mcp-Protocol-Version", protocol20250618)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET stream: %s %s", resp.Status, body)
	}
	out := make(chan sseEvent, 16)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		r := bufio.NewReader(resp.Body)
		var ev sseEvent
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case strings.HasPrefix(line, "id:"):
				ev.id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
			case strings.HasPrefix(line, "data:"):
				ev.data += strings.TrimSpace(strings.TrimPrefix(line, "data:"))
			case line == "" && ev.data != "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	return out, cancel
}

func nextEvent(t *testing.T, events <-chan sseEvent, what string) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatalf("the stream ended before %s", what)
		}
		return ev
	case <-testkit.Context(t, testTimeout).Done():
		t.Fatalf("no event: %s", what)
	}
	return sseEvent{}
}

// TestResumedStreamIsSentWhatItMissed: a stateful server numbers the events of its
// streams, and a client whose GET stream broke resumes it with Last-Event-ID and is sent
// the notification it missed while it was away (2025-11-25, resumability).
func TestResumedStreamIsSentWhatItMissed(t *testing.T) {
	srv, err := NewServer(configWith(adapterconfig.TransportStreamableHTTP, false, templateTool("a", objectSchema, "A")))
	if err != nil {
		t.Fatal(err)
	}
	baseURL, streams := servedWithStreams(t, srv)
	url := baseURL + adapterconfig.PathMCP
	init := postRPC(t, url, nil, initializeMessage(protocol20250618))
	session := init.header.Get("Mcp-Session-Id")
	if session == "" {
		t.Fatalf("initialize gave no session (%d %s)", init.status, init.body)
	}
	headers := map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": protocol20250618}
	postRPC(t, url, headers, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	events, disconnect := openEventStream(t, url, session, "")
	testkit.Receive(t, testTimeout, "the GET stream to open", streams)
	if err := srv.Reload(configWith(adapterconfig.TransportStreamableHTTP, false, templateTool("a", objectSchema, "A"), templateTool("b", objectSchema, "B"))); err != nil {
		t.Fatal(err)
	}
	seen := nextEvent(t, events, "list_changed after a tool was added")
	if !strings.Contains(seen.data, "notifications/tools/list_changed") || seen.id == "" {
		t.Fatalf("first event %q (id %q), want list_changed with an event id", seen.data, seen.id)
	}
	disconnect()
	for range events { // the connection is gone
	}

	if err := srv.Reload(configWith(adapterconfig.TransportStreamableHTTP, false, templateTool("c", objectSchema, "C"))); err != nil {
		t.Fatal(err)
	}
	resumed, closeResumed := openEventStream(t, url, session, seen.id)
	defer closeResumed()
	missed := nextEvent(t, resumed, "the list_changed sent while the client was away")
	if !strings.Contains(missed.data, "notifications/tools/list_changed") || missed.id == "" || missed.id == seen.id {
		t.Fatalf("resumed with %q (id %q) after %q, want the missed list_changed with a new id", missed.data, missed.id, seen.id)
	}
}
