package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ListChangedSuffix ends the method of every notification that says a list changed:
// notifications/tools/list_changed, …/prompts/list_changed, …/resources/list_changed.
const ListChangedSuffix = "/list_changed"

// WatchListChanges opens a session with the server and calls changed with the method
// of every list_changed notification the server sends, until ctx ends (nil) or the
// session ends (the error says why). The server must keep sessions: over streamable
// HTTP the notifications come on the GET stream of the session, which a stateless
// server does not have (the error says so).
func WatchListChanges(ctx context.Context, opts Options, changed func(method string)) error {
	co := opts.clientOptions(0)
	co.ConnectTimeout = handshakeBudget(ctx, opts.Timeout)
	c, err := New(co)
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	s, err := c.Connect(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if s.sseEndpoint != nil {
		return s.listenOnSSE(ctx, changed)
	}
	return s.listenOnGETStream(ctx, changed)
}

// ErrNoSession says a streamable HTTP server gave no session, so it has no stream to
// send notifications on.
var ErrNoSession = errors.New("the server keeps no session (stateless), so it sends no list_changed notifications")

// listenOnSSE hands the list_changed notifications of the session's SSE stream to
// changed until ctx ends or the stream does.
func (s *Session) listenOnSSE(ctx context.Context, changed func(string)) error {
	s.mu.Lock()
	s.onListChanged = changed
	s.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil
	case <-s.lost:
		return s.lostErr
	}
}

// listenOnGETStream opens the session's GET stream (streamable HTTP) and reads it until
// ctx ends or it does, answering the server's pings.
func (s *Session) listenOnGETStream(ctx context.Context, changed func(string)) error {
	return s.readGETStream(ctx, func(m Message) {
		if isNotification(m) && strings.HasSuffix(m.Method, ListChangedSuffix) {
			changed(m.Method)
			return
		}
		s.answerServer(m)
	})
}

// readGETStream opens the session's GET stream (streamable HTTP) and hands each message
// on it to handle until ctx ends (nil) or the stream does.
func (s *Session) readGETStream(ctx context.Context, handle func(Message)) error {
	if s.id == "" {
		return ErrNoSession
	}
	resp, err := s.c.send(ctx, exchange{what: "the session's GET stream", method: http.MethodGet, url: s.endpoint, accept: ContentTypeSSE,
		session: s.id, protocol: s.ProtocolVersion()})
	if err != nil {
		return err
	}
	defer DrainAndClose(resp.Body)
	if resp.StatusCode == http.StatusMethodNotAllowed {
		return fmt.Errorf("GET %s answered 405: the server offers no stream for notifications", Path(s.endpoint))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return s.c.statusError(resp, "the session's GET stream", "")
	}
	events := NewEventReader(resp.Body, s.c.opts.MaxMessageBytes)
	for {
		ev, err := events.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("the GET stream %s ended", Path(s.endpoint))
			}
			return s.c.classify(ctx, err, "the session's GET stream")
		}
		if !ev.IsMessage() {
			continue
		}
		msgs, err := ParseMessages([]byte(ev.Data))
		if err != nil {
			continue
		}
		for _, m := range msgs {
			handle(m)
		}
	}
}

// notifyListChanged hands a list_changed notification of the SSE stream to the
// listener, if any.
func (s *Session) notifyListChanged(m Message) {
	if !isNotification(m) || !strings.HasSuffix(m.Method, ListChangedSuffix) {
		return
	}
	s.mu.Lock()
	changed := s.onListChanged
	s.mu.Unlock()
	if changed != nil {
		changed(m.Method)
	}
}
