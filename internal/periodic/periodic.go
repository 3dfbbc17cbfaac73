// Package periodic runs work at a fixed interval until a context ends: the loop that
// the adapter's config watch and the operator's key refresh, revocation sweep and token
// renewals share; and work asked for in bursts, spaced out (Spaced), as the operator's
// and the gateway's watches of a remote's list changes do. It imports only the
// standard library, so both planes may link it.
package periodic

import (
	"context"
	"sync"
	"time"
)

// Run calls do every interval until ctx ends, and never after it has ended; the first
// call is one interval after Run is called. A call that overruns the interval delays the next one, and the ticks it
// missed are not made up. Run returns once ctx has ended and no call is running.
func Run(ctx context.Context, interval time.Duration, do func()) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			// A tick and the end may be ready at once, and select picks either.
			if ctx.Err() != nil {
				return
			}
			do()
		}
	}
}

// Spaced calls Do at most once per Gap however often it is signalled, and never loses
// the last signal: a Signal when Gap has passed since the last call calls Do at once
// (on a goroutine of its own); Signals within the gap fold into one call at its end.
type Spaced struct {
	Gap time.Duration
	Do  func()

	mu      sync.Mutex
	last    time.Time
	timer   *time.Timer
	stopped bool
}

// Signal asks for a call of Do.
func (s *Spaced) Signal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil || s.stopped {
		return // one is due already
	}
	s.timer = time.AfterFunc(max(0, s.Gap-time.Since(s.last)), s.fire)
}

func (s *Spaced) fire() {
	s.mu.Lock()
	s.timer, s.last = nil, time.Now()
	stopped := s.stopped
	s.mu.Unlock()
	if !stopped {
		s.Do()
	}
}

// Stop drops a call that is due and every later Signal.
func (s *Spaced) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}
