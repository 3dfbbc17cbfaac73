// Package interleave is a POST's response writer that the handler and the server
// around it both write to: the gateway asks a caller on its call's stream, a stateful
// server ends a stream for its client to poll. Each write goes out whole, one at a
// time, and the handler's headers are kept apart until it writes its status, so that
// the server never touches a header map the handler's goroutines write.
package interleave

import (
	"errors"
	"net/http"
	"sync"
)

// ErrEnded is what a write returns once the response has ended (End).
var ErrEnded = errors.New("the response stream has ended")

// Writer is an http.ResponseWriter for the handler, with WriteEvent and End for the
// server around it.
type Writer struct {
	out    http.ResponseWriter
	header http.Header // the handler's; copied to out's by its WriteHeader

	mu          sync.Mutex
	wroteHeader bool
	eventStream bool
	ended       bool
}

// New wraps out.
func New(out http.ResponseWriter) *Writer { return &Writer{out: out, header: http.Header{}} }

// Header is the handler's header map.
func (w *Writer) Header() http.Header { return w.header }

// WriteHeader sends status with the handler's headers, unless the response has begun
// (an event stream the server began, into which the handler then writes its events).
func (w *Writer) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(status)
}

func (w *Writer) writeHeaderLocked(status int) {
	if w.ended || w.wroteHeader {
		return
	}
	w.wroteHeader = true
	h := w.out.Header()
	for k, v := range w.header {
		h[k] = v
	}
	w.eventStream = h.Get("Content-Type") == "text/event-stream"
	w.out.WriteHeader(status)
}

// Write writes p whole; ErrEnded once the response has ended.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return 0, ErrEnded
	}
	w.writeHeaderLocked(http.StatusOK)
	return w.out.Write(p)
}

// Flush flushes what was written, unless the response has ended.
func (w *Writer) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.flushLocked()
	}
}

func (w *Writer) flushLocked() {
	if f, ok := w.out.(http.Flusher); ok {
		f.Flush()
	}
}

// WriteEvent writes event (its lines, ending with a blank one) and flushes it,
// beginning an event stream when nothing was written yet; end ends the response with
// it. It returns ErrNotEventStream, and writes nothing, when the handler began another
// kind of answer, and ErrEnded once the response has ended.
func (w *Writer) WriteEvent(event string, end bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.ended:
		return ErrEnded
	case w.wroteHeader && !w.eventStream:
		return ErrNotEventStream
	case !w.wroteHeader:
		h := w.out.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		w.out.WriteHeader(http.StatusOK)
		w.wroteHeader, w.eventStream = true, true
	}
	w.ended = end
	if _, err := w.out.Write([]byte(event)); err != nil {
		return err
	}
	w.flushLocked()
	return nil
}

// ErrNotEventStream is WriteEvent's answer when the handler answered other than with
// an event stream.
var ErrNotEventStream = errors.New("the response is not an event stream")

// End stops every later write: the request is over. It reports whether the response
// had ended already.
func (w *Writer) End() (already bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	already, w.ended = w.ended, true
	return already
}

// Unwrap is the response w wraps, for http.ResponseController.
func (w *Writer) Unwrap() http.ResponseWriter { return w.out }
