package conformanceremote

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"time"
)

// mcp-go writes a request's notifications from a goroutine of its own, which drops one
// it still holds when the handler's answer is written, and a session's GET stream
// competes for them: a tool whose last notification comes just before its answer
// loses it now and then, and one may arrive late, on the other stream (mcp-go lists
// tools-call-with-logging and tools-call-with-progress as intermittent). The fixture
// counts the notifications written to each response, and its notifying tools send the
// next one, and answer, only once the last is out.

// notificationsWaitLimit bounds the wait, for a notification that went to another
// stream (the session's GET stream) and is never written to this response.
const notificationsWaitLimit = 2 * time.Second

// written counts the notifications written to one response.
type written struct {
	mu      sync.Mutex
	n       int
	changed chan struct{}
}

type writtenKey struct{}

// countingWriter is a response whose notification writes are counted.
type countingWriter struct {
	http.ResponseWriter
	count *written
}

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if bytes.Contains(p, []byte(`"method":"notifications/`)) {
		w.count.mu.Lock()
		w.count.n++
		if w.count.changed != nil {
			close(w.count.changed)
			w.count.changed = nil
		}
		w.count.mu.Unlock()
	}
	return n, err
}

// Flush keeps the response streamable: mcp-go answers with an event stream only when it can flush.
func (w countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// countNotifications wraps w and gives req's context its count.
func countNotifications(w http.ResponseWriter, req *http.Request) (http.ResponseWriter, *http.Request) {
	count := &written{}
	return countingWriter{ResponseWriter: w, count: count}, req.WithContext(context.WithValue(req.Context(), writtenKey{}, count))
}

// awaitWritten returns once n notifications are written to the response of ctx's
// request, or after notificationsWaitLimit.
func awaitWritten(ctx context.Context, n int) {
	count, _ := ctx.Value(writtenKey{}).(*written)
	if count == nil {
		return
	}
	limit := time.NewTimer(notificationsWaitLimit)
	defer limit.Stop()
	for {
		count.mu.Lock()
		if count.n >= n {
			count.mu.Unlock()
			return
		}
		if count.changed == nil {
			count.changed = make(chan struct{})
		}
		changed := count.changed
		count.mu.Unlock()
		select {
		case <-changed:
		case <-limit.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
