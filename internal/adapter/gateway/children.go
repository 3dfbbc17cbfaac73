package gateway

import (
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// childRemotes are the remotes one remote makes for its callers (callers.go) or for
// its downstream sessions (sessions.go), keyed by caller identity or session id. Each
// shares its parent's connections but holds a session of its own. They are bounded
// (the least recently used goes first) and closed when unused for idle.
type childRemotes struct {
	parent *remote
	idle   time.Duration
	// keepListening keeps a child while a subscription listener holds a stream on its
	// session, however long no call used it.
	keepListening bool
	// counted, when set, is told how many children there are after one is added or the
	// idle ones are closed.
	counted func(n int)

	mu    sync.Mutex // serialises get-or-add of a child
	cache *lru.Cache[string, *remote]
	// sweeping starts closeIdle with the first child, so that a remote prepared and
	// never used (a reload that failed) leaves no goroutine behind.
	sweeping sync.Once
	stop     chan struct{}
	closed   bool
}

func newChildRemotes(parent *remote, size int, idle time.Duration) (*childRemotes, error) {
	cache, err := lru.NewWithEvict(size, func(_ string, r *remote) { r.close() })
	if err != nil {
		return nil, fmt.Errorf("bound of %d remotes: %w", size, err)
	}
	return &childRemotes{parent: parent, idle: idle, cache: cache, stop: make(chan struct{})}, nil
}

// remoteOf is the child of key, made on first use with the state init sets.
func (c *childRemotes) remoteOf(key string, init func(*callerState)) (*remote, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errRemoteClosed
	}
	// Marked used under c.mu, so that closeIdle never closes a remote a call just took.
	now := time.Now().UnixNano()
	if r, ok := c.cache.Get(key); ok {
		r.lastUsed.Store(now)
		return r, nil
	}
	c.sweeping.Do(func() { go c.closeIdle() })
	p := c.parent
	r := &remote{key: p.key, name: p.name, importRef: p.importRef, log: p.log, metrics: p.metrics, relay: p.relay,
		callerState: callerState{parent: p}}
	init(&r.callerState)
	r.lastUsed.Store(now)
	c.cache.Add(key, r)
	c.count()
	return r, nil
}

// existing is the child of key, if there is one.
func (c *childRemotes) existing(key string) *remote {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, _ := c.cache.Peek(key)
	return r
}

// remove closes the child of key, if there is one.
func (c *childRemotes) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cache.Remove(key)
}

// all are the children open now.
func (c *childRemotes) all() []*remote {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cache.Values()
}

// closeIdle closes, every quarter of the idle time, the children unused that long: a
// caller that stops calling, or a client that goes away without DELETE (its session
// is left to mcp-go's sweep, or to this).
func (c *childRemotes) closeIdle() {
	tick := time.NewTicker(max(c.idle/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case now := <-tick.C:
			c.mu.Lock()
			for _, key := range c.cache.Keys() {
				if r, ok := c.cache.Peek(key); ok && c.isIdle(r, now) {
					c.cache.Remove(key)
				}
			}
			c.mu.Unlock()
			c.count()
		}
	}
}

func (c *childRemotes) isIdle(r *remote, now time.Time) bool {
	if c.keepListening && r.listening.Load() != 0 {
		return false
	}
	return now.Sub(time.Unix(0, r.lastUsed.Load())) > c.idle
}

func (c *childRemotes) count() {
	if c.counted != nil {
		c.counted(c.cache.Len())
	}
}

// close closes every child and refuses new ones.
func (c *childRemotes) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	c.cache.Purge()
}
