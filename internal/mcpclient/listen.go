package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// ListChangedSuffix ends the method of every notification that says a list changed:
// notifications/tools/list_changed, …/prompts/list_changed, …/resources/list_changed.
const ListChangedSuffix = "/list_changed"

// MethodResourceUpdated is the notification a server sends about a resource the
// session subscribed to.
const MethodResourceUpdated = "notifications/resources/updated"

// WatchListChanges calls changed with the method of every list_changed notification
// the server at opts sends, until ctx ends (nil) or the stream they come on ends (the
// error says why); see Client.WatchListChanges.
func WatchListChanges(ctx context.Context, opts Options, modern bool, changed func(method string)) error {
	co := opts.clientOptions(0)
	co.ConnectTimeout = handshakeBudget(ctx, opts.Timeout)
	c, err := New(co)
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	return c.WatchListChanges(ctx, modern, changed)
}

// WatchListChanges calls changed with the method of every list_changed notification
// the server sends, until ctx ends (nil) or the stream they come on ends (the error
// says why; SendsNoListChanges tells a server that never sends them). In protocol
// 2026-07-28 (modern) they come on a subscriptions/listen request; else on a session
// of the client's own: its GET stream over streamable HTTP (a stateless server has
// none) or its stream over SSE.
func (c *Client) WatchListChanges(ctx context.Context, modern bool, changed func(method string)) error {
	notify := func(m Message) {
		if strings.HasSuffix(m.Method, ListChangedSuffix) {
			changed(m.Method)
		}
	}
	if modern {
		return c.Modern(RequestMeta{}).ListenForListChanges(ctx, notify)
	}
	s, err := c.Connect(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Listen(ctx, nil, notify)
}

// ErrNoSession says a streamable HTTP server gave no session, so it has no stream to
// send notifications on.
var ErrNoSession = errors.New("the server keeps no session (stateless), so it sends no notifications outside a request")

// ErrNoStream says a streamable HTTP server answered the session's GET stream with 405:
// it sends no notifications outside a request.
var ErrNoStream = errors.New("the server offers no stream for notifications")

// HasStream says whether the server can send this session notifications outside a
// request: over SSE always, over streamable HTTP when it gave a session (its GET
// stream may still be refused; Listen says so).
func (s *Session) HasStream() bool { return s.sseEndpoint != nil || s.id != "" }

// Listen hands every notification the server sends outside a request (the session's
// GET stream over streamable HTTP, the session's stream over SSE) to notify, until ctx
// ends (nil) or the stream does (the error says why; over streamable HTTP a session the
// server forgot is an *Error with SessionLost). The server's pings are answered, its
// other requests refused. notify runs on the reading goroutine, one message at a time.
// opened, when set, is called once the stream is open: what the server sends from then
// on reaches notify.
func (s *Session) Listen(ctx context.Context, opened func(), notify func(Message)) error {
	if s.sseEndpoint != nil {
		if opened != nil {
			opened()
		}
		return s.listenOnSSE(ctx, notify)
	}
	return s.readGETStream(ctx, opened, func(m Message) {
		if isNotification(m) {
			notify(m)
			return
		}
		s.answerServer(m)
	})
}

// ListenForListChanges asks a server of protocol 2026-07-28 for the notifications
// that its tools, prompts or resources list changed (subscriptions/listen) and hands
// every notification on the request's stream to notify, the acknowledgement first,
// until ctx ends (nil) or the server ends the stream (the error says why; a server
// without the method answers an *RPCError). The server's requests on the stream are
// refused. notify runs on the reading goroutine, one message at a time.
func (s *Session) ListenForListChanges(ctx context.Context, notify func(Message)) error {
	if s.modern == nil {
		return &Error{Reason: ReasonInvalidConfig, Detail: "subscriptions/listen is sent in protocol " + EraModern + " only", NotProcessed: true}
	}
	params := map[string]any{"notifications": map[string]bool{
		"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true,
	}}
	_, err := s.requestAsking(ctx, MethodSubscriptionsListen, params, notify, nil, nil)
	switch {
	case ctx.Err() != nil:
		return nil
	case err == nil:
		return errListenAnswered
	}
	return err
}

// SendsNoListChanges says whether err, from WatchListChanges or a listen, shows that
// the server sends no list changes that way: a 2025-11-25 server without sessions or
// without a GET stream, or a server without subscriptions/listen. Watching it again
// would fail again.
func SendsNoListChanges(err error) bool {
	var rpc *RPCError
	return errors.Is(err, ErrNoSession) || errors.Is(err, ErrNoStream) ||
		(errors.As(err, &rpc) && rpc.Code == mcp.METHOD_NOT_FOUND)
}

// MethodSubscriptionsListen opens a stream of notifications in protocol 2026-07-28.
const MethodSubscriptionsListen = "subscriptions/listen"

// errListenAnswered says a server answered subscriptions/listen, which ends the stream
// its notifications come on.
var errListenAnswered = errors.New("the server answered subscriptions/listen, ending its notification stream")

// Subscribe asks the server for notifications/resources/updated about uri on this
// session (resources/subscribe). Errors are *RPCError (the server refused) or *Error.
func (s *Session) Subscribe(ctx context.Context, uri string) error {
	_, err := s.request(ctx, "resources/subscribe", map[string]string{"uri": uri}, nil)
	return err
}

// Unsubscribe ends a subscription Subscribe made (resources/unsubscribe).
func (s *Session) Unsubscribe(ctx context.Context, uri string) error {
	_, err := s.request(ctx, "resources/unsubscribe", map[string]string{"uri": uri}, nil)
	return err
}

// Ping asks the server whether it still knows the session: a streamable HTTP server
// may open a GET stream for a session id it does not know (mcp-go does), but it
// refuses a request on one, with an *Error whose SessionLost is set.
func (s *Session) Ping(ctx context.Context) error {
	_, err := s.request(ctx, "ping", nil, nil)
	return err
}

// UpdatedURI is the uri of a notifications/resources/updated; "" for any other message
// or one without a uri.
func UpdatedURI(m Message) string {
	if m.Method != MethodResourceUpdated {
		return ""
	}
	var params struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(m.Params, &params) != nil {
		return ""
	}
	return params.URI
}

// listenOnSSE hands the notifications of the session's SSE stream to notify until ctx
// ends or the stream does. One listener at a time: a second replaces the first.
func (s *Session) listenOnSSE(ctx context.Context, notify func(Message)) error {
	s.mu.Lock()
	s.onNotification = notify
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.onNotification = nil
		s.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return nil
	case <-s.lost:
		return s.lostErr
	}
}

// readGETStream opens the session's GET stream (streamable HTTP) and hands each message
// on it to handle until ctx ends (nil) or the stream does; opened, when set, is called
// once it is open.
func (s *Session) readGETStream(ctx context.Context, opened func(), handle func(Message)) error {
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
		return fmt.Errorf("GET %s answered 405: %w", Path(s.endpoint), ErrNoStream)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return s.c.statusError(resp, "the session's GET stream", s.id)
	}
	if opened != nil {
		opened()
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

// notifyListener hands a notification of the SSE stream to the listener, if any.
func (s *Session) notifyListener(m Message) {
	if !isNotification(m) {
		return
	}
	s.mu.Lock()
	notify := s.onNotification
	s.mu.Unlock()
	if notify != nil {
		notify(m)
	}
}
