package adapter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/go-logr/logr"

	"github.com/cantus-dev/cantus-operator/internal/adapter/eventstore"
	"github.com/cantus-dev/cantus-operator/internal/adapter/interleave"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A remote of protocol 2025-11-25 may end the event stream of a call's answer before
// the answer, after an event with an id and a retry delay, and send the answer on the
// stream the client resumes with Last-Event-ID (SEP-1699 polling: it frees the
// connection while the tool runs). The gateway's client resumes upstream by itself
// (mcpclient.AnswerStream); a stateful gateway also ends its own caller's stream the
// same way, so that the caller sees what it would see from the remote: its POST stream
// ends after a priming event (an id, the remote's retry, no data), the call goes on,
// and the answer comes on the stream the caller resumes from that id (the session's
// event store). mcp-go has no way to end a POST's stream while its call runs, so the
// call is served on a writer of the adapter's own, detached from the request once the
// stream is ended.

// streamPauses serves the calls whose stream a remote's pause may end: on a stateful
// streamable HTTP server, whose event store keeps the answers for the resuming client.
type streamPauses struct {
	store *eventstore.Store // nil: nothing pauses
	log   logr.Logger
}

// applies says whether the POST r, of method, gets a stream a remote's pause
// can end: a call on a session of a stateful streamable HTTP gateway, whose answers
// the event store keeps.
func (p streamPauses) applies(r *http.Request, method string) bool {
	return p.store != nil && method == "tools/call" && r.Header.Get(headerSessionID) != ""
}

// serve serves a call through serve on a writer that a pause of the remote's
// stream ends with a priming event; the call then goes on detached from r, and its
// answer is kept in the event store for the resuming client.
func (p streamPauses) serve(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request)) {
	sessionID := r.Header.Get(headerSessionID)
	pw := &pausableWriter{Writer: interleave.New(w), paused: make(chan time.Duration, 1)}
	priming := eventstore.NewPriming()
	// Detached, so that the call outlives the request once its stream is ended; ended
	// with the request otherwise, as a call is.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	ctx = mcpclient.WithStreamPaused(eventstore.WithPriming(ctx, priming), pw.pause)
	done := make(chan struct{})
	var panicked any
	go func() {
		defer close(done)
		defer p.store.Finish(sessionID, priming)
		defer cancel()
		defer func() {
			// Handed to the request's goroutine, where net/http handles it as ever;
			// after a pause, the request is over and the panic is logged here.
			if v := recover(); v != nil {
				panicked = v
				if err, isErr := v.(error); pw.End() && (!isErr || !errors.Is(err, http.ErrAbortHandler)) {
					p.log.Error(fmt.Errorf("%v", v), "a call whose stream was ended to poll panicked", "stack", string(debug.Stack()))
				}
			}
		}()
		serve(pw, r.WithContext(ctx))
	}()
	select {
	case <-done:
	case <-r.Context().Done():
		cancel()
		pw.End()
		return
	case retry := <-pw.paused:
		if id := p.store.Prime(sessionID, priming); id != "" && pw.endWithPriming(id, retry) {
			return
		}
		// The call ended meanwhile, or its answer is no event stream: served whole.
		<-done
	}
	if panicked != nil {
		panic(panicked)
	}
}

// pausableWriter is a POST's response writer that can be ended while its handler
// still runs (interleave.Writer): the handler's writes then fail with
// interleave.ErrEnded, and mcp-go records its events in the event store only, for the
// resuming client.
type pausableWriter struct {
	*interleave.Writer
	paused chan time.Duration
}

// pause is called when the remote ended the answer's stream, to be resumed after
// retry: the first pause ends this stream too.
func (p *pausableWriter) pause(retry time.Duration) {
	select {
	case p.paused <- retry:
	default:
	}
}

// endWithPriming ends the stream after a priming event with id and retry; false, and
// nothing done, when the handler answers with JSON (which cannot be paused) or the
// stream has ended.
func (p *pausableWriter) endWithPriming(id string, retry time.Duration) bool {
	event := "id: " + id + "\n"
	if retry > 0 {
		event += fmt.Sprintf("retry: %d\n", retry.Milliseconds())
	}
	err := p.WriteEvent(event+"data: \n\n", true)
	return !errors.Is(err, interleave.ErrEnded) && !errors.Is(err, interleave.ErrNotEventStream)
}
