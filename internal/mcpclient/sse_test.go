package mcpclient

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	t.Parallel()
	stream := ": comment\r\n" +
		"event: endpoint\r\ndata: /message?sessionId=1\r\n\r\n" +
		"id: 7\ndata: {\"a\":\ndata: 1}\n\n" +
		"event: ping\n\n" + // no data: not dispatched
		"data:no-space\n\n"
	r := newSSEReader(strings.NewReader(stream), 1<<10)
	want := []sseEvent{
		{event: "endpoint", data: "/message?sessionId=1"},
		{id: "7", data: "{\"a\":\n1}"},
		{data: "no-space"},
	}
	for i, w := range want {
		got, err := r.next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got != w {
			t.Errorf("event %d = %+v, want %+v", i, got, w)
		}
	}
	if _, err := r.next(); err != io.EOF {
		t.Errorf("after the last event: %v, want io.EOF", err)
	}

	if _, err := newSSEReader(strings.NewReader("data: {\"partial\""), 1<<10).next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("an event cut short: %v, want io.ErrUnexpectedEOF", err)
	}
	long := "data: " + strings.Repeat("x", 200) + "\n\n"
	if _, err := newSSEReader(strings.NewReader(long), 100).next(); !errors.Is(err, errTooLarge) {
		t.Errorf("an event over the limit: %v, want errTooLarge", err)
	}
	multi := strings.Repeat("data: "+strings.Repeat("y", 40)+"\n", 5) + "\n"
	if _, err := newSSEReader(strings.NewReader(multi), 100).next(); !errors.Is(err, errTooLarge) {
		t.Errorf("an event whose lines add up over the limit: %v, want errTooLarge", err)
	}
}
