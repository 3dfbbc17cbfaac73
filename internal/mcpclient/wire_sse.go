package mcpclient

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
)

// Event is one dispatched server-sent event.
type Event struct {
	Type, Data, ID string
}

// IsMessage reports whether e carries a JSON-RPC message: its type is "message" (or
// unset) and it has data other than white space.
func (e Event) IsMessage() bool {
	return (e.Type == "" || e.Type == "message") && strings.TrimSpace(e.Data) != ""
}

// EventReader parses a text/event-stream; no line or event may exceed max bytes
// (ErrTooLarge).
type EventReader struct {
	br  *bufio.Reader
	max int64
	// lastID and retry are the stream's last event ID and reconnection delay, as
	// the fields set them (whether or not their event had data).
	lastID string
	retry  time.Duration
}

// NewEventReader reads the events of r, none of them (nor any line) over limit bytes.
func NewEventReader(r io.Reader, limit int64) *EventReader {
	return &EventReader{br: bufio.NewReaderSize(r, 32<<10), max: limit}
}

// LastID is the last event ID the stream set, "" for none.
func (s *EventReader) LastID() string { return s.lastID }

// Retry is the reconnection delay the stream set, 0 for none.
func (s *EventReader) Retry() time.Duration { return s.retry }

// ContinueOn reads a resumed stream r, keeping the last event ID, the retry delay
// and the limit.
func (s *EventReader) ContinueOn(r io.Reader) *EventReader {
	next := NewEventReader(r, s.max)
	next.lastID, next.retry = s.lastID, s.retry
	return next
}

// readLine returns one line without its end of line (LF or CRLF). A line cut short
// by the end of the stream is io.ErrUnexpectedEOF.
func (s *EventReader) readLine() (string, error) {
	var line []byte
	for {
		chunk, err := s.br.ReadSlice('\n')
		if int64(len(line)+len(chunk)) > s.max+16 {
			return "", ErrTooLarge
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				return "", io.ErrUnexpectedEOF
			}
			return "", err
		}
		break
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return string(line), nil
}

// Next returns the next event that has data. io.EOF: the stream ended cleanly between
// events; io.ErrUnexpectedEOF: it ended inside one; ErrTooLarge: a line or an event
// is over the limit. Any other error is the underlying reader's, as it returned it.
func (s *EventReader) Next() (Event, error) {
	var ev Event
	var data strings.Builder
	hasData, started := false, false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && started {
				err = io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		if line == "" {
			if hasData {
				ev.Data = data.String()
				return ev, nil
			}
			ev, started = Event{}, false
			continue
		}
		started = true
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Type = value
		case "id":
			if !strings.ContainsRune(value, 0) {
				ev.ID, s.lastID = value, value
			}
		case "retry":
			if ms, err := strconv.ParseUint(value, 10, 32); err == nil {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
			if int64(data.Len()) > s.max {
				return Event{}, ErrTooLarge
			}
		}
	}
}

// ResumeFunc reopens an answer's event stream after lastEventID (a GET with
// Last-Event-ID) and returns what to read on; closing it ends the resumed stream.
type ResumeFunc func(ctx context.Context, lastEventID string) (io.ReadCloser, error)

// AnswerStream reads the event stream that carries the answer to one request. A stream
// that ends cleanly before the answer, after an event with an id, is resumed as the
// 2025-11-25 transport describes (SEP-1699): after the server's retry delay (at most
// MaxRetryWait), through resume, at most MaxResumes times.
type AnswerStream struct {
	events  *EventReader
	resume  ResumeFunc
	resumed io.ReadCloser
	resumes int
}

// NewAnswerStream reads the events of body (the answer to a POST), none over limit
// bytes. The caller closes body; the AnswerStream closes what resume returned (Close).
func NewAnswerStream(body io.Reader, limit int64, resume ResumeFunc) *AnswerStream {
	return &AnswerStream{events: NewEventReader(body, limit), resume: resume}
}

// Next returns the next event that has data, resuming the stream when it ended. It
// returns io.EOF when the stream ended and cannot be resumed (no event id, or
// MaxResumes reached), ctx.Err() when ctx ended while waiting to resume, resume's
// error as it returned it, and otherwise the errors of EventReader.Next.
func (s *AnswerStream) Next(ctx context.Context) (Event, error) {
	for {
		ev, err := s.events.Next()
		if !errors.Is(err, io.EOF) {
			return ev, err
		}
		if s.events.LastID() == "" || s.resumes >= MaxResumes {
			return Event{}, io.EOF
		}
		s.resumes++
		if paused, ok := ctx.Value(streamPausedKey{}).(func(time.Duration)); ok {
			paused(s.events.Retry())
		}
		timer := time.NewTimer(min(s.events.Retry(), MaxRetryWait))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return Event{}, ctx.Err()
		}
		next, err := s.resume(ctx, s.events.LastID())
		if err != nil {
			return Event{}, err
		}
		if s.resumed != nil {
			_ = s.resumed.Close()
		}
		s.resumed = next
		s.events = s.events.ContinueOn(next)
	}
}

// Resumes is how often the stream was resumed.
func (s *AnswerStream) Resumes() int { return s.resumes }

// Close closes the resumed stream, if any.
func (s *AnswerStream) Close() {
	if s.resumed != nil {
		_ = s.resumed.Close()
		s.resumed = nil
	}
}

type streamPausedKey struct{}

// WithStreamPaused is ctx with paused called each time the server ends the event
// stream of an answer before the answer, to be resumed after retry (the server's
// delay, 0 when it gave none): a gateway then ends its own caller's stream the same
// way (SEP-1699 polling), so that the caller resumes from the gateway.
func WithStreamPaused(ctx context.Context, paused func(retry time.Duration)) context.Context {
	return context.WithValue(ctx, streamPausedKey{}, paused)
}
