package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// Notifications a remote sends about a forwarded call reach the client who made it:
// progress under the client's own progress token (the remote saw the gateway's), and
// log messages as sent. The client's notifications/cancelled needs nothing here:
// mcp-go cancels the call's context, and the remote session then tells the remote.

// progressTokenOf is the progress token the client sent with the call, nil for none.
func progressTokenOf(req mcp.CallToolRequest) mcp.ProgressToken {
	if req.Params.Meta == nil {
		return nil
	}
	return req.Params.Meta.ProgressToken
}

// notificationsFlushWait bounds how long a forwarded call waits for the notifications
// it passed on to be written before its answer (see EventWatch).
const notificationsFlushWait = 2 * time.Second

// forwarder passes the remote's notifications about one call on to the client.
type forwarder struct {
	ctx           context.Context
	srv           *server.MCPServer
	progressToken mcp.ProgressToken
	watch         *EventWatch // nil but over streamable HTTP
}

// forwardNotifications returns the forwarder of the call of ctx; nil when ctx has no
// MCP client to send to.
func forwardNotifications(ctx context.Context, progressToken mcp.ProgressToken) *forwarder {
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return nil
	}
	watch, _ := ctx.Value(eventWatchKey{}).(*EventWatch)
	return &forwarder{ctx: ctx, srv: srv, progressToken: progressToken, watch: watch}
}

// notify is mcpclient.CallOptions.Notify, nil for a nil forwarder. The remote's
// notifications arrive one at a time, on the goroutine of the call (streamable HTTP)
// or of the session's stream (SSE).
func (f *forwarder) notify() func(mcpclient.Message) {
	if f == nil {
		return nil
	}
	return f.forward
}

func (f *forwarder) forward(m mcpclient.Message) {
	switch m.Method {
	case string(mcp.MethodNotificationProgress):
		params := paramsOf(m)
		if f.progressToken == nil || params == nil {
			return
		}
		params["progressToken"] = f.progressToken
		f.send(m.Method, params)
	case string(mcp.MethodNotificationMessage):
		// The remote chose the level; the gateway does not filter again.
		if params := paramsOf(m); params != nil {
			f.send(m.Method, params)
		}
	}
}

func (f *forwarder) send(method string, params map[string]any) {
	if f.srv.SendNotificationToClient(f.ctx, method, params) == nil {
		f.watch.sent()
	}
}

// flush waits until the notifications passed on are written to the client, at most
// notificationsFlushWait.
func (f *forwarder) flush() {
	if f != nil {
		f.watch.waitWritten(notificationsFlushWait)
	}
}

type eventWatchKey struct{}

// EventWatch counts the notifications a call passed to mcp-go and those written to the
// call's response (streamable HTTP). mcp-go writes them from a goroutine of its own
// and, when the call's answer comes while that goroutine holds a notification not yet
// written, drops it; so a forwarded call returns only once what it passed on is
// written (the remote's last progress often arrives just before its answer).
//
// The server wraps the response of a POST that may carry a forwarded call in one
// (WatchEvents) and hands it to the call's context (WithEventWatch).
type EventWatch struct {
	http.ResponseWriter
	mu      sync.Mutex
	queued  int
	written int
	changed chan struct{} // closed and replaced when written grows
}

// WatchEvents wraps the response w of a POST.
func WatchEvents(w http.ResponseWriter) *EventWatch { return &EventWatch{ResponseWriter: w} }

// WithEventWatch gives the call of ctx the watch of its response.
func WithEventWatch(ctx context.Context, w *EventWatch) context.Context {
	return context.WithValue(ctx, eventWatchKey{}, w)
}

// sent counts a notification handed to mcp-go; a nil watch ignores it.
func (w *EventWatch) sent() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.queued++
	w.mu.Unlock()
}

// Write writes p and counts it when it is a notification event.
func (w *EventWatch) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if bytes.HasPrefix(p, []byte("event: message\ndata: ")) && bytes.Contains(p, []byte(`"method":"notifications/`)) {
		w.mu.Lock()
		w.written++
		if w.changed != nil {
			close(w.changed)
			w.changed = nil
		}
		w.mu.Unlock()
	}
	return n, err
}

// Flush flushes the response.
func (w *EventWatch) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is the response w wraps, for http.ResponseController.
func (w *EventWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// waitWritten returns once every notification counted by sent is written, or after
// limit.
func (w *EventWatch) waitWritten(limit time.Duration) {
	if w == nil {
		return
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		w.mu.Lock()
		if w.written >= w.queued {
			w.mu.Unlock()
			return
		}
		if w.changed == nil {
			w.changed = make(chan struct{})
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			return
		}
	}
}

// paramsOf decodes a notification's params; nil when they are not an object.
func paramsOf(m mcpclient.Message) map[string]any {
	var params map[string]any
	if json.Unmarshal(m.Params, &params) != nil {
		return nil
	}
	return params
}
