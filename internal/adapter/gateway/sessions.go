package gateway

import (
	"context"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
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
		callerState: callerState{parent: p, identity: p.identity, ofSession: true, downstream: id}}
	r.lastUsed.Store(now)
	s.cache.Add(id, r)
	return r, nil
}

// existing is the remote of downstream session id, if it has one.
func (s *sessionRemotes) existing(id string) *remote {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, _ := s.cache.Peek(id)
	return r
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
				if r, ok := s.cache.Peek(id); ok && r.listening.Load() == 0 && now.Sub(time.Unix(0, r.lastUsed.Load())) > sessionRemotesIdle {
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
	for _, sessions := range r.sessionRemotesAll() {
		sessions.end(id)
	}
}

// sessionRemotesAll are the session remotes of r and of the callers' remotes of r.
func (r *remote) sessionRemotesAll() []*sessionRemotes {
	var out []*sessionRemotes
	r.mu.Lock()
	if r.sessions != nil {
		out = append(out, r.sessions)
	}
	r.mu.Unlock()
	if r.callers != nil {
		for _, caller := range r.callers.remotes() {
			out = append(out, caller.sessionRemotesAll()...)
		}
	}
	return out
}

// sessionLogLevelWait bounds sending a downstream session's log level upstream.
const sessionLogLevelWait = 10 * time.Second

// SetSessionLogLevel passes the log level downstream session id asked for
// (logging/setLevel) to its upstream sessions, those open now and those it opens
// later, so that each remote sends that session the log messages it asked for and no
// other session's level. A remote that refuses it (it logs nothing) is let be.
func (p *Pool) SetSessionLogLevel(id, level string) {
	if id == "" || !p.relay.sessions {
		return
	}
	p.relay.logLevels.Add(id, level)
	for _, r := range p.remotesNow() {
		for _, sessions := range r.sessionRemotesAll() {
			if s := sessions.existing(id); s != nil {
				s.sendLogLevel(level)
			}
		}
	}
}

// sendLogLevel sends level on r's session, if it has one open; one it opens later
// gets it as it opens (applyLogLevel).
func (r *remote) sendLogLevel(level string) {
	r.mu.Lock()
	c := r.current
	if c != nil {
		c.refs++
	}
	r.mu.Unlock()
	if c == nil {
		return
	}
	defer r.release(c)
	ctx, cancel := context.WithTimeout(context.Background(), sessionLogLevelWait)
	defer cancel()
	if err := c.sess.SetLogLevel(ctx, level); err != nil {
		r.log.V(1).Info("the remote did not take a session's log level", "error", err.Error())
	}
}

// applyLogLevel sends a new upstream session of a downstream session the log level
// that session asked for, if it asked.
func (r *remote) applyLogLevel(sess *mcpclient.Session) {
	if !r.ofSession {
		return
	}
	level, ok := r.relay.logLevels.Get(r.downstream)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sessionLogLevelWait)
	defer cancel()
	if err := sess.SetLogLevel(ctx, level); err != nil {
		r.log.V(1).Info("the remote did not take a session's log level", "error", err.Error())
	}
}

// EndSession closes the upstream sessions of downstream session id, which ended: its
// remote sessions get DELETE. The calls still running on them finish first.
func (p *Pool) EndSession(id string) {
	if id == "" {
		return
	}
	for _, r := range p.remotesNow() {
		r.endSession(id)
	}
	p.relay.logLevels.Remove(id)
}

// remotesNow are the pool's remotes at this moment, to work on without its lock.
func (p *Pool) remotesNow() []*remote {
	p.mu.Lock()
	defer p.mu.Unlock()
	remotes := make([]*remote, 0, len(p.remotes))
	for _, r := range p.remotes {
		remotes = append(remotes, r)
	}
	return remotes
}
