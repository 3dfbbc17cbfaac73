package callercred

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// lookup is what an Exchanger and a Connector share: a caller's token served from the
// cache while it is fresh, otherwise obtained once for every concurrent miss of that
// caller, and counted.
type lookup struct {
	// scope is the part of every cache key that is not the caller.
	scope   string
	cache   *Cache
	now     func() time.Time
	timeout time.Duration
	flights singleflight.Group
	counted *lookupSeries

	hits, misses atomic.Uint64
}

// initLookup readies the lookup of an owner whose cache keys start with scope and whose
// metrics are labelled remote; o has its defaults (withDefaults). Without a shared
// cache the owner gets one of its own.
func (l *lookup) initLookup(scope, remote string, o Options) error {
	l.scope, l.timeout, l.now = scope, o.Timeout, o.Now
	l.counted = o.Metrics.lookupSeries(remote)
	l.cache = o.Cache
	if l.cache == nil {
		var err error
		if l.cache, err = NewCache(o.CacheSize, o.Metrics); err != nil {
			return err
		}
	}
	return nil
}

// token returns callerIdentity's fresh cached token, or the one obtain gives. obtain
// runs once for every call of this caller waiting on it, so no one call's context may
// cancel it: it gets a context of its own, bounded by the timeout; each waiter still
// leaves when its own ctx ends, with ctx's error (which the owner wraps).
func (l *lookup) token(ctx context.Context, callerIdentity string, obtain func(context.Context, cacheKey) (string, error)) (string, error) {
	key := cacheKey{scope: l.scope, caller: callerIdentity}
	if tok, ok := l.fresh(key); ok {
		l.hits.Add(1)
		l.counted.hit()
		return tok, nil
	}
	l.misses.Add(1)
	l.counted.miss()
	flight := l.flights.DoChan(callerIdentity, func() (any, error) {
		if tok, ok := l.fresh(key); ok {
			return tok, nil
		}
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		defer cancel()
		return obtain(octx, key)
	})
	select {
	case r := <-flight:
		if r.Err != nil {
			return "", r.Err
		}
		return r.Val.(string), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (l *lookup) fresh(key cacheKey) (string, bool) {
	ent, ok := l.cache.get(key)
	if !ok || l.now().UnixNano() >= ent.expires {
		return "", false
	}
	return ent.token, true
}

// forget drops callerIdentity's cached token.
func (l *lookup) forget(callerIdentity string) {
	l.cache.remove(cacheKey{scope: l.scope, caller: callerIdentity})
}
