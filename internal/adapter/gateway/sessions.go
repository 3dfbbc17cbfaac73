package gateway

import (
	"context"
	"time"

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
		r.sessions, _ = newChildRemotes(r, maxSessionRemotes, sessionRemotesIdle) // errors only for a size <= 0
		r.sessions.keepListening = true
	}
	sessions := r.sessions
	r.mu.Unlock()
	return sessions.remoteOf(id, func(s *callerState) {
		s.identity, s.ofSession, s.downstream = r.identity, true, id
	})
}

// endSession closes the upstream sessions of downstream session id at r and at the
// callers' remotes of r.
func (r *remote) endSession(id string) {
	for _, sessions := range r.sessionRemotesAll() {
		sessions.remove(id)
	}
}

// sessionRemotesAll are the session remotes of r and of the callers' remotes of r.
func (r *remote) sessionRemotesAll() []*childRemotes {
	var out []*childRemotes
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
