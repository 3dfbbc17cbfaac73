package periodic

import (
	"context"
	"testing"
	"time"
)

func TestRunCallsUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, time.Millisecond, func() {
			calls++
			if calls == 3 {
				cancel()
			}
		})
	}()
	<-done
	if calls != 3 {
		t.Fatalf("Run called do %d times after the context ended on the third call; want 3", calls)
	}
}

func TestRunReturnsAtOnceWhenTheContextHasEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Run(ctx, time.Hour, func() { t.Error("do was called after the context ended") })
}

// Signals within the gap fold into one call at its end: the first signal is served at
// once, a burst after it by exactly one more call, never by none.
func TestSpacedFoldsABurstIntoOneCallAndKeepsTheLast(t *testing.T) {
	calls := make(chan time.Time, 16)
	s := &Spaced{Gap: 50 * time.Millisecond, Do: func() { calls <- time.Now() }}
	defer s.Stop()
	s.Signal()
	first := <-calls
	for range 100 {
		s.Signal()
	}
	second := <-calls
	if gap := second.Sub(first); gap < s.Gap {
		t.Errorf("the call after the burst came %s after the first, want at least the gap %s", gap, s.Gap)
	}
	select {
	case at := <-calls:
		t.Fatalf("the burst made another call %s after its first, want one", at.Sub(second))
	case <-time.After(3 * s.Gap): // longer than any call the burst could still owe
	}
	// A Signal after Stop calls nothing either.
	s.Stop()
	s.Signal()
	select {
	case at := <-calls:
		t.Errorf("a call came %s after Stop", at.Sub(second))
	case <-time.After(3 * s.Gap): // longer than a Signal's call would take
	}
}
