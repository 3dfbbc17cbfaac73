// Package wake holds the two ways goroutines wake each other here: a Signal wakes one
// worker and folds the pokes it missed into one wake-up; a Cond wakes every goroutine
// waiting for a condition guarded by a mutex, as sync.Cond does, but lets a waiter give
// up when its context ends. It imports only the standard library.
package wake

import (
	"context"
	"sync"
)

// Signal wakes one worker goroutine, which receives from it: a Poke never blocks, and
// the Pokes made while the worker is busy fold into one wake-up.
type Signal chan struct{}

// NewSignal is a Signal with room for the one wake-up.
func NewSignal() Signal { return make(Signal, 1) }

// Poke wakes the worker, now or when it next waits.
func (s Signal) Poke() {
	select {
	case s <- struct{}{}:
	default:
	}
}

// Cond wakes the goroutines waiting for a condition guarded by a mutex. The zero value
// is ready. Waiters make the channel they wait on, so a condition that holds at once
// costs no channel.
type Cond struct {
	changed chan struct{} // made by a waiter, closed and dropped by Broadcast
}

// Broadcast wakes every waiter to check the condition again; call it with the mutex
// held, after changing what the condition reads.
func (c *Cond) Broadcast() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// Wait returns nil once holds, called with mu held, reports true, or ctx's error when
// ctx ends first. Call it without mu held.
func (c *Cond) Wait(ctx context.Context, mu sync.Locker, holds func() bool) error {
	for {
		mu.Lock()
		if holds() {
			mu.Unlock()
			return nil
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		changed := c.changed
		mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
