package gateway

import (
	"context"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// One caller may hold at most a share of each pool a gateway keeps for all of them
// (the calls waiting for their callers' answers, the subscriptions at the remotes), so
// that one caller cannot fill a pool and starve the others.

// DefaultCallerShare is the part of a pool one caller may hold unless configured.
const DefaultCallerShare = adapterconfig.DefaultCallerShare

// ShareOf is how many of a pool of size one caller may hold at fraction (outside
// (0, 1]: DefaultCallerShare); at least 1.
func ShareOf(size int, fraction float64) int {
	if fraction <= 0 || fraction > 1 {
		fraction = DefaultCallerShare
	}
	return max(1, int(float64(size)*fraction))
}

type callerKeyKey struct{}

// WithCallerKey is ctx naming its caller by key, the one the caller's shares are
// counted under (the adapter's: the authenticated caller, or the client's address).
func WithCallerKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, callerKeyKey{}, key)
}

// callerKeyOf is the key WithCallerKey put in ctx; without one, the caller as
// authentication found it ("" for an anonymous one, so that all of those share one).
func callerKeyOf(ctx context.Context) string {
	if key, ok := ctx.Value(callerKeyKey{}).(string); ok {
		return key
	}
	return callerOf(ctx)
}
