package mcpclient

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestEventReader(t *testing.T) {
	t.Parallel()
	stream := ": comment\r\n" +
		"event: endpoint\r\ndata: /message?sessionId=1\r\n\r\n" +
		"id: 7\ndata: {\"a\":\ndata: 1}\n\n" +
		"event: ping\n\n" + // no data: not dispatched
		"retry: 250\n" +
		"data:no-space\n\n"
	r := NewEventReader(strings.NewReader(stream), 1<<10)
	want := []Event{
		{Type: "endpoint", Data: "/message?sessionId=1"},
		{ID: "7", Data: "{\"a\":\n1}"},
		{Data: "no-space"},
	}
	for i, w := range want {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got != w {
			t.Errorf("event %d = %+v, want %+v", i, got, w)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last event: %v, want io.EOF", err)
	}
	if r.LastID() != "7" || r.Retry() != 250*time.Millisecond {
		t.Errorf("LastID, Retry = %q, %s; want 7, 250ms", r.LastID(), r.Retry())
	}
	next := r.ContinueOn(strings.NewReader("data: x\n\n"))
	if next.LastID() != "7" || next.Retry() != 250*time.Millisecond {
		t.Errorf("ContinueOn lost LastID, Retry: %q, %s", next.LastID(), next.Retry())
	}

	if _, err := NewEventReader(strings.NewReader("data: {\"partial\""), 1<<10).Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("an event cut short: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := NewEventReader(strings.NewReader("id: 1\n"), 1<<10).Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a stream that ends inside an event: %v, want io.ErrUnexpectedEOF", err)
	}
	long := "data: " + strings.Repeat("x", 200) + "\n\n"
	if _, err := NewEventReader(strings.NewReader(long), 100).Next(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("an event over the limit: %v, want ErrTooLarge", err)
	}
	multi := strings.Repeat("data: "+strings.Repeat("y", 40)+"\n", 5) + "\n"
	if _, err := NewEventReader(strings.NewReader(multi), 100).Next(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("an event whose lines add up over the limit: %v, want ErrTooLarge", err)
	}
	comment := ": " + strings.Repeat("z", 200) + "\n"
	if _, err := NewEventReader(strings.NewReader(comment), 100).Next(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a line over the limit: %v, want ErrTooLarge", err)
	}
}

func TestEventIsMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ev   Event
		want bool
	}{
		{Event{Data: "{}"}, true},
		{Event{Type: "message", Data: "{}"}, true},
		{Event{Type: "endpoint", Data: "/m"}, false},
		{Event{Data: " \n "}, false},
	} {
		if got := tc.ev.IsMessage(); got != tc.want {
			t.Errorf("%+v.IsMessage() = %v, want %v", tc.ev, got, tc.want)
		}
	}
}

// closer records whether it was closed.
type closer struct {
	io.Reader
	closed bool
}

func (c *closer) Close() error { c.closed = true; return nil }

func TestAnswerStreamResumes(t *testing.T) {
	t.Parallel()
	var asked []string
	var opened []*closer
	resume := func(_ context.Context, lastID string) (io.ReadCloser, error) {
		asked = append(asked, lastID)
		c := &closer{Reader: strings.NewReader("id: b\n\n")}
		if len(asked) == 2 {
			c = &closer{Reader: strings.NewReader("data: answer\n\n")}
		}
		opened = append(opened, c)
		return c, nil
	}
	s := NewAnswerStream(strings.NewReader("id: a\nretry: 1\ndata: first\n\n"), 1<<10, resume)
	ctx := context.Background()
	ev, err := s.Next(ctx)
	if err != nil || ev.Data != "first" {
		t.Fatalf("first event = %+v, %v", ev, err)
	}
	ev, err = s.Next(ctx) // an id without data, then the end: resumed twice
	if err != nil || ev.Data != "answer" {
		t.Fatalf("event after resuming = %+v, %v", ev, err)
	}
	if strings.Join(asked, ",") != "a,b" || s.Resumes() != 2 {
		t.Errorf("resumed after %v (%d times), want a,b (2)", asked, s.Resumes())
	}
	if !opened[0].closed || opened[1].closed {
		t.Errorf("closed: %v, %v; want the replaced stream closed, the current one open", opened[0].closed, opened[1].closed)
	}
	// The last stream ends without an id of its own: the last one seen (b) resumes it,
	// and then MaxResumes is reached.
	if _, err := s.Next(ctx); !errors.Is(err, io.EOF) || strings.Join(asked, ",") != "a,b,b" {
		t.Fatalf("after the third resume: %v (resumed after %v), want io.EOF after a,b,b", err, asked)
	}
	s.Close()
	if !opened[2].closed {
		t.Error("Close left the resumed stream open")
	}
}

func TestAnswerStreamLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	never := func(context.Context, string) (io.ReadCloser, error) {
		t.Error("resumed a stream that has no event id")
		return nil, errors.New("no")
	}
	if _, err := NewAnswerStream(strings.NewReader("data: x\n\n"), 1<<10, never).Next(ctx); err != nil {
		t.Fatal(err)
	}
	s := NewAnswerStream(strings.NewReader(""), 1<<10, never)
	if _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("a stream without an id: %v, want io.EOF", err)
	}

	// Every resumed stream ends at once: MaxResumes resumes, then io.EOF.
	n := 0
	again := func(context.Context, string) (io.ReadCloser, error) {
		n++
		return io.NopCloser(strings.NewReader("")), nil
	}
	s = NewAnswerStream(strings.NewReader("id: 1\nretry: 0\n\n"), 1<<10, again)
	if _, err := s.Next(ctx); !errors.Is(err, io.EOF) || n != MaxResumes || s.Resumes() != MaxResumes {
		t.Errorf("got %v after %d resumes (Resumes %d), want io.EOF after %d", err, n, s.Resumes(), MaxResumes)
	}

	// resume's error comes back as it is.
	failed := errors.New("resume failed")
	s = NewAnswerStream(strings.NewReader("id: 1\n\n"), 1<<10, func(context.Context, string) (io.ReadCloser, error) { return nil, failed })
	if _, err := s.Next(ctx); !errors.Is(err, failed) {
		t.Errorf("a failed resume: %v, want %v", err, failed)
	}

	// The end of ctx while waiting the server's retry delay.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	s = NewAnswerStream(strings.NewReader("id: 1\nretry: 60000\n\n"), 1<<10, never)
	start := time.Now()
	if _, err := s.Next(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while waiting: %v, want context.Canceled", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("waited %s although ctx had ended", time.Since(start))
	}
}
