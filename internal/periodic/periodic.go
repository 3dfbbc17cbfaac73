// Package periodic runs work at a fixed interval until a context ends: the loop that
// the adapter's config watch and the operator's key refresh, revocation sweep and token
// renewals share. It imports only the standard library, so both planes may link it.
package periodic

import (
	"context"
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
