package callercred

import (
	"fmt"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultCacheSize bounds a cache made without a size.
const DefaultCacheSize = 10000

// Cache holds exchanged tokens, least recently used first out. Several exchangers (one
// per import) may share one, so that the bound holds for a whole gateway.
type Cache struct {
	lru       *lru.Cache[cacheKey, *entry]
	metrics   *Metrics
	evictions atomic.Uint64
}

// cacheKey is a caller under an exchange configuration (token endpoint, client,
// audience, resource, scopes; see Exchanger.scope). The scope string is shared by all
// of an exchanger's entries, so it costs a string header per entry, not a copy.
type cacheKey struct {
	scope  string
	caller string
}

// entry is an exchanged token and when the cache stops using it (unix nanoseconds on
// the exchanger's clock).
type entry struct {
	token   string
	expires int64
}

// NewCache makes a cache of at most size tokens (DefaultCacheSize when size <= 0).
// metrics, when not nil, receives the cache's size and evictions.
func NewCache(size int, metrics *Metrics) (*Cache, error) {
	if size <= 0 {
		size = DefaultCacheSize
	}
	l, err := lru.New[cacheKey, *entry](size)
	if err != nil {
		return nil, fmt.Errorf("token cache: %w", err)
	}
	return &Cache{lru: l, metrics: metrics}, nil
}

// Len is the number of tokens held.
func (c *Cache) Len() int { return c.lru.Len() }

// Evictions counts tokens dropped to make room for others.
func (c *Cache) Evictions() uint64 { return c.evictions.Load() }

func (c *Cache) get(k cacheKey) (*entry, bool) { return c.lru.Get(k) }

func (c *Cache) add(k cacheKey, e *entry) {
	if c.lru.Add(k, e) {
		c.evictions.Add(1)
		c.metrics.evicted()
	}
	c.metrics.setCached(c.lru.Len())
}

func (c *Cache) remove(k cacheKey) {
	if c.lru.Remove(k) {
		c.metrics.setCached(c.lru.Len())
	}
}

// ForgetCaller drops every token of the caller, under any exchange configuration: for
// a revoked caller. It walks the cache, which revocations are rare enough to afford.
func (c *Cache) ForgetCaller(caller string) int {
	n := 0
	for _, k := range c.lru.Keys() {
		if k.caller == caller && c.lru.Remove(k) {
			n++
		}
	}
	if n > 0 {
		c.metrics.setCached(c.lru.Len())
	}
	return n
}
