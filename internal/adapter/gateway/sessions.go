package gateway

import (
	"context"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// On a stateful gateway every downstream session of protocol 2025-11-25 (or older)
// gets upstream sessions of its own, one per remote it uses, so that what a session
// holds at the remote (its log level, subscriptions, roots, anything the remote keeps
// per session) is never another downstream session's, and ending the downstream
// session (DELETE, or the transport dropping it) ends its upstream sessions (the
// client closes them, which sends DELETE). A session's remote shares its parent's
// client, connections and credentials: the parent is the import's remote, or the
// caller's own remote for an import with caller credentials. They are bounded per
// parent (the least recently used goes first) and closed when idle.

// Bounds of the downstream sessions' remotes, per parent remote.
const (
	maxSessionRemotes  = 4096
	sessionRemotesIdle = 10 * time.Minute
)

type downstreamSessionKey struct{}

// WithDownstreamSession is ctx naming the downstream session its request belongs to;
// requests of a stateful gateway's sessions carry it, and their remote calls go on
// upstream sessions of that session's own.
func WithDownstreamSession(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, downstreamSessionKey{}, id)
}

func downstreamSessionOf(ctx context.Context) string {
	id, _ := ctx.Value(downstreamSessionKey{}).(string)
	return id
}

// sessionRemotes are the downstream sessions' remotes of one parent remote.
type sessionRemotes struct {
	parent *remote

	mu       sync.Mutex
	cache    *lru.Cache[string, *remote]
	sweeping sync.Once
	stop     chan struct{}
	closed   bool
}

// forSession is the remote of the downstream session ctx names, made on first use;
// r itself when ctx names none or the gateway keeps no sessions.
func (r *remote) forSession(ctx context.Context) (*remote, error) {
	id := downstreamSessionOf(ctx)
	if id == "" || !r.relay.sessions {
		return r, nil
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errRemoteClosed
	}
	if r.sessions == nil {
		cache, _ := lru.NewWithEvict(maxSessionRemotes, func(_ string, s *remote) { s.close() }) // errors only for a size <= 0
		r.sessions = &sessionRemotes{parent: r, cache: cache, stop: make(chan struct{})}
	}
	sessions := r.sessions
	r.mu.Unlock()
	return sessions.remoteOf(id)
}

func (s *sessionRemotes) remoteOf(id string) (*remote, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errRemoteClosed
	}
	// Marked used under s.mu, so that closeIdle never closes a remote a call just took.
	now := time.Now().UnixNano()
	if r, ok := s.cache.Get(id); ok {
		r.lastUsed.Store(now)
		return r, nil
	}
	s.sweeping.Do(func() { go s.closeIdle() })
	p := s.parent
	r := &remote{key: p.key, name: p.name, importRef: p.importRef, log: p.log, metrics: p.metrics, relay: p.relay,
		callerState: callerState{parent: p, identity: p.identity, ofSession: true}}
	r.lastUsed.Store(now)
	s.cache.Add(id, r)
	return r, nil
}

// end closes the remote of downstream session id, if it has one.
func (s *sessionRemotes) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache.Remove(id)
}

// closeIdle closes, every quarter of the idle time, the session remotes unused that
// long: a client that goes away without DELETE leaves its session to mcp-go's sweep,
// or to this.
func (s *sessionRemotes) closeIdle() {
	tick := time.NewTicker(sessionRemotesIdle / 4)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			s.mu.Lock()
			for _, id := range s.cache.Keys() {
				if r, ok := s.cache.Peek(id); ok && now.Sub(time.Unix(0, r.lastUsed.Load())) > sessionRemotesIdle {
					s.cache.Remove(id)
				}
			}
			s.mu.Unlock()
		}
	}
}

func (s *sessionRemotes) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.cache.Purge()
}

// endSession closes the upstream sessions of downstream session id at r and at the
// callers' remotes of r.
func (r *remote) endSession(id string) {
	r.mu.Lock()
	sessions := r.sessions
	r.mu.Unlock()
	if sessions != nil {
		sessions.end(id)
	}
	if r.callers != nil {
		for _, caller := range r.callers.remotes() {
			caller.endSession(id)
		}
	}
}

// EndSession closes the upstream sessions of downstream session id, which ended: its
// remote sessions get DELETE. The calls still running on them finish first.
func (p *Pool) EndSession(id string) {
	if id == "" {
		return
	}
	p.mu.Lock()
	remotes := make([]*remote, 0, len(p.remotes))
	for _, r := range p.remotes {
		remotes = append(remotes, r)
	}
	p.mu.Unlock()
	for _, r := range remotes {
		r.endSession(id)
	}
}
