package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/wake"
)

// Resource subscriptions through a gateway. A client of a stateful gateway that sends
// resources/subscribe for an imported resource gets notifications/resources/updated
// whenever the remote serving it says it was updated, until it unsubscribes or its
// session ends.
//
// Per remote, one listener keeps the gateway's subscriptions on the pooled session the
// remote's reads and calls use (so whatever a call changes about that session at the
// remote, such as server-everything's toggle-subscriber-updates, applies to them), with
// the session's stream for notifications open: its GET stream over streamable HTTP, its
// stream over SSE. Each (remote, URI) is subscribed at the remote once, whatever the
// number of the gateway's sessions subscribed to it: those are counted, and the last one
// to leave ends it at the remote. An update reaches only the sessions subscribed to its
// URI, under the URI they subscribed to (a skill's file moved by a prefix has another
// URI at the remote).
//
// A 2026-07-28 client's subscriptions/listen request subscribes like a session does:
// its response stream is a subscriber of its own (OpenStream), with its own Notifier,
// sharing the same subscriptions at the remotes, and its subscriptions end with the
// request (CloseStream).
//
// A stream that ends may mean the remote restarted and forgot the session with its
// subscriptions (mcp-go's default server never says a session is unknown), so the
// listener then drops the pooled session, opens the next one and subscribes every URI
// again; so it does when the session is replaced for any other reason (a 404, new
// header files).

// Bounds of the subscriptions a gateway keeps: a client is untrusted, and each
// subscription costs state here and at the remote.
const (
	// MaxSubscriptions bounds the subscriptions a gateway holds at its remotes: one per
	// (remote, URI) however many sessions share it.
	MaxSubscriptions = adapterconfig.MaxRemoteSubscriptions
	// MaxSessionSubscriptions bounds the URIs one client session, or one
	// subscriptions/listen request, may be subscribed to.
	MaxSessionSubscriptions = 100
)

// Timings of the listener.
const (
	// upstreamRequestTimeout bounds one resources/subscribe or /unsubscribe at the remote.
	upstreamRequestTimeout = 30 * time.Second
	// resubscribeEvery is how soon a subscription the remote refused on a new session
	// is asked for again.
	resubscribeEvery = 30 * time.Second
	// The pause before reconnecting grows from minReconnectWait to maxReconnectWait
	// while the remote cannot be reached.
	minReconnectWait = 200 * time.Millisecond
	maxReconnectWait = 10 * time.Second
)

// ErrSessionEnded is what Notifier returns for a session the server no longer has; its
// subscriptions end.
var ErrSessionEnded = errors.New("the session has ended")

// Notifier sends notifications/resources/updated about uri to the client session.
type Notifier func(session, uri string) error

// StreamNotifier writes notifications/resources/updated about uri onto the response
// stream of one subscriptions/listen request; ErrSessionEnded says the stream has
// ended.
type StreamNotifier func(uri string) error

// SubscriptionError is a subscription refused by the gateway itself (a bound, an unknown
// session), not by the remote.
type SubscriptionError struct{ Message string }

func (e *SubscriptionError) Error() string { return e.Message }

// Subscriptions are a gateway's resource subscriptions: which client sessions are
// subscribed to which URIs, and a listener per remote that holds them there.
type Subscriptions struct {
	log    logr.Logger
	notify Notifier
	// maxUpstream and maxPerSession are MaxSubscriptions and MaxSessionSubscriptions;
	// tests make them small. One caller may take part in at most share of maxUpstream.
	maxUpstream, maxPerSession int
	share                      float64

	mu     sync.Mutex
	closed bool
	live   map[string]bool // the client sessions the server has
	// registered wakes awaitSession whenever a session is registered.
	registered wake.Cond
	// streams are the open subscriptions/listen requests, by the key OpenStream gave
	// them, with the Notifier of each. Their keys cannot be a session's (see
	// OpenStream), so a session's requests can never reach a stream's subscriptions.
	streams    map[string]StreamNotifier
	lastStream uint64
	listeners  map[*remote]*listener
	bySession  map[string]map[string]*subscription // session → served URI
	count      int                                 // subscriptions at the remotes
	// owners are the caller keys of the sessions and streams that subscribed, until
	// they end; byCaller counts, per caller key, its sessions' and streams' part in
	// each subscription at the remotes.
	owners   map[string]string
	byCaller map[string]map[*subscription]int
}

// subscription is one URI subscribed at one remote, and the client sessions that share it.
type subscription struct {
	listener    *listener
	remoteURI   string
	subscribers map[subscriber]struct{}
	// ready is closed once the remote answered the first resources/subscribe; err,
	// set before, is its refusal (the subscription is then gone).
	ready   chan struct{}
	settled bool
	err     error
}

// subscriber is a client session (or the key of a listen stream) and the URI it
// subscribed to.
type subscriber struct{ session, uri string }

// NewSubscriptions returns an empty set; notify sends the updates to client sessions.
func NewSubscriptions(log logr.Logger, notify Notifier) *Subscriptions {
	return &Subscriptions{log: log.WithName("subscriptions"), notify: notify, live: map[string]bool{},
		maxUpstream: MaxSubscriptions, maxPerSession: MaxSessionSubscriptions,
		listeners: map[*remote]*listener{}, bySession: map[string]map[string]*subscription{},
		streams: map[string]StreamNotifier{}, share: DefaultCallerShare, owners: map[string]string{}, byCaller: map[string]map[*subscription]int{}}
}

// LimitCallerShare lets one caller take part in at most fraction of the subscriptions
// the gateway may hold at its remotes (DefaultCallerShare unless called).
func (h *Subscriptions) LimitCallerShare(fraction float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.share = fraction
}

// OpenStream records an open subscriptions/listen request, whose updates notify
// writes, and returns its key for SubscribeStream and CloseStream. The key holds a
// NUL, which no HTTP header value may carry, so no client can name it as its session.
func (h *Subscriptions) OpenStream(notify StreamNotifier) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastStream++
	key := fmt.Sprintf("listen\x00%d", h.lastStream)
	h.streams[key] = notify
	return key
}

// CloseStream ends every subscription of the listen stream: its request ended.
func (h *Subscriptions) CloseStream(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams[key] == nil {
		return
	}
	delete(h.streams, key)
	h.removeAllLocked(key)
	delete(h.owners, key)
}

// SubscribeStream subscribes the open listen stream to uri, which it serves, as
// Subscribe does a session.
func (h *Subscriptions) SubscribeStream(ctx context.Context, key string, it *Item, uri string) error {
	sub, err := h.add(key, callerKeyOf(ctx), true, it, it.remote, uri)
	if err != nil || sub == nil {
		return err
	}
	return h.awaitRemote(ctx, key, sub, it, uri)
}

// SessionStarted records a client session the server registered; only such sessions
// may subscribe.
func (h *Subscriptions) SessionStarted(session string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live[session] = true
	h.registered.Broadcast()
}

// SessionEnded ends every subscription of the session.
func (h *Subscriptions) SessionEnded(session string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.live, session)
	h.removeAllLocked(session)
	delete(h.owners, session)
}

// removeAllLocked ends every subscription of a session or listen stream.
func (h *Subscriptions) removeAllLocked(key string) {
	for uri := range h.bySession[key] {
		h.removeLocked(key, uri)
	}
}

// Subscribe subscribes the client session to uri, which it serves (it is the item's
// resource, or its template matches it). The first session to subscribe to a URI waits
// for the remote's answer (at most until ctx ends); the others share the subscription.
// Subscribing again to a URI is a no-op. The error is a *SubscriptionError or a
// *ForwardError.
func (h *Subscriptions) Subscribe(ctx context.Context, session string, it *Item, uri string) error {
	h.awaitSession(ctx, session)
	// On a stateful gateway the subscription is held on the session's own upstream
	// session, where whatever else the session set at the remote applies to it.
	at, err := it.remote.forRequest(ctx)
	if err != nil {
		return &ForwardError{Message: fmt.Sprintf("%s%v (import %s)", MarkerCallFailed, err, it.Backend.Import)}
	}
	sub, err := h.add(session, callerKeyOf(ctx), false, it, at, uri)
	if err != nil || sub == nil {
		return err
	}
	return h.awaitRemote(ctx, session, sub, it, uri)
}

// awaitRemote waits for the remote's answer to the subscription the session or listen
// stream (key) shares, at most until ctx ends; then key's part in it ends.
func (h *Subscriptions) awaitRemote(ctx context.Context, key string, sub *subscription, it *Item, uri string) error {
	select {
	case <-sub.ready:
		return sub.err
	case <-ctx.Done():
		h.mu.Lock()
		h.removeLocked(key, uri)
		h.mu.Unlock()
		return &ForwardError{Message: fmt.Sprintf("%sno answer from the remote to resources/subscribe of %s: %v (import %s)",
			MarkerCallFailed, uri, ctx.Err(), it.Backend.Import)}
	}
}

// registrationWait bounds how long Subscribe waits for a session the server has not
// registered yet (see awaitSession).
const registrationWait = time.Second

// awaitSession waits, at most registrationWait, until the session is registered: mcp-go
// registers a session only after it wrote the answer to initialize, so a quick client's
// first resources/subscribe can arrive before. A session that is never registered is
// refused by add.
func (h *Subscriptions) awaitSession(ctx context.Context, session string) {
	ctx, cancel := context.WithTimeout(ctx, registrationWait)
	defer cancel()
	_ = h.registered.Wait(ctx, &h.mu, func() bool { return h.live[session] }) // add refuses it if it is still not live
}

// Unsubscribe ends the session's subscription to uri; a URI it is not subscribed to is
// a no-op, as the protocol asks. A listen stream's subscriptions end only with it.
func (h *Subscriptions) Unsubscribe(session, uri string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams[session] != nil {
		return
	}
	h.removeLocked(session, uri)
}

// Count is the number of subscriptions held at the remotes, and of the client
// subscriptions sharing them.
func (h *Subscriptions) Count() (upstream, clients int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, mine := range h.bySession {
		clients += len(mine)
	}
	return h.count, clients
}

// Close ends every listener; the server calls it when it closes.
func (h *Subscriptions) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, l := range h.listeners {
		l.stop()
	}
}

// Retarget follows a reload: a subscription whose URI is now served by another remote
// (or under another URI there) moves to it; one whose URI no import serves any more,
// or whose remote no longer offers subscriptions, ends. route is the item serving a
// URI after the reload, nil for none.
func (h *Subscriptions) Retarget(route func(uri string) *Item) {
	type move struct {
		session, uri string
		stream       bool
		it           *Item
	}
	var moves []move
	h.mu.Lock()
	for session, mine := range h.bySession {
		for uri, sub := range mine {
			it := route(uri)
			if it != nil && it.Backend.Subscribe && it.remote == sub.listener.origin && it.remoteURI(uri) == sub.remoteURI {
				continue
			}
			h.removeLocked(session, uri)
			if it != nil && it.Backend.Subscribe {
				moves = append(moves, move{session, uri, h.streams[session] != nil, it})
			} else {
				h.log.Info("a subscription ended: the reloaded config no longer relays subscriptions to this resource", "uri", uri)
			}
		}
	}
	h.mu.Unlock()
	for _, m := range moves {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), upstreamRequestTimeout)
			defer cancel()
			subscribe := h.Subscribe
			if m.stream {
				subscribe = h.SubscribeStream
			} else {
				ctx = WithDownstreamSession(ctx, m.session)
			}
			if err := subscribe(ctx, m.session, m.it, m.uri); err != nil {
				h.log.Info("a subscription ended: subscribing at the remote that serves it since the reload failed", "uri", m.uri, "error", err.Error())
			}
		}()
	}
}

// remoteURI is the URI at the remote of uri, which the item serves.
func (it *Item) remoteURI(uri string) string {
	if it.RemoteKey != "" && uri == it.Key {
		return it.RemoteKey
	}
	return uri
}

// add records the subscription of the session, or of the listen stream when stream is
// true, of caller to uri, held at the remote at (the item's, or the session's own),
// and returns it, nil when the session had it already. A session is its first
// subscription's caller's until it ends.
func (h *Subscriptions) add(session, caller string, stream bool, it *Item, at *remote, uri string) (*subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return nil, &SubscriptionError{Message: "the gateway is shutting down"}
	case stream && h.streams[session] == nil:
		return nil, &SubscriptionError{Message: "the subscriptions/listen request has ended"}
	case !stream && !h.live[session]:
		return nil, &SubscriptionError{Message: "resources/subscribe needs an initialized session, and this one is not (or no longer) the server's"}
	}
	mine := h.bySession[session]
	if mine[uri] != nil {
		return nil, nil
	}
	if len(mine) >= h.maxPerSession {
		if stream {
			return nil, &SubscriptionError{Message: fmt.Sprintf("this subscriptions/listen request already asks for %d resources, the most one request may", h.maxPerSession)}
		}
		return nil, &SubscriptionError{Message: fmt.Sprintf("this session is subscribed to %d resources, the most a session may be; unsubscribe from one first", h.maxPerSession)}
	}
	remoteURI := it.remoteURI(uri)
	l := h.listeners[at]
	var sub *subscription
	if l != nil {
		sub = l.wanted[remoteURI]
	}
	if owner, ok := h.owners[session]; ok {
		caller = owner
	}
	if _, part := h.byCaller[caller][sub]; (sub == nil || !part) && len(h.byCaller[caller]) >= h.perCallerLocked() {
		return nil, &SubscriptionError{Message: fmt.Sprintf("this caller takes part in %d subscriptions at the remotes, the most one caller may of the %d this gateway holds; unsubscribe from one first",
			h.perCallerLocked(), h.maxUpstream)}
	}
	if sub == nil {
		if h.count >= h.maxUpstream {
			return nil, &SubscriptionError{Message: fmt.Sprintf("this gateway holds %d subscriptions at its remotes, the most it may; try again later", h.maxUpstream)}
		}
		if l == nil {
			l = h.startListenerLocked(at, it.remote)
		}
		sub = &subscription{listener: l, remoteURI: remoteURI, subscribers: map[subscriber]struct{}{}, ready: make(chan struct{})}
		l.wanted[remoteURI] = sub
		h.count++
		l.wake.Poke()
	}
	sub.subscribers[subscriber{session, uri}] = struct{}{}
	if mine == nil {
		mine = map[string]*subscription{}
		h.bySession[session] = mine
	}
	mine[uri] = sub
	h.owners[session] = caller
	if h.byCaller[caller] == nil {
		h.byCaller[caller] = map[*subscription]int{}
	}
	h.byCaller[caller][sub]++
	return sub, nil
}

// perCallerLocked is the most subscriptions one caller may take part in.
func (h *Subscriptions) perCallerLocked() int { return ShareOf(h.maxUpstream, h.share) }

// leaveLocked ends the session's part in sub, for its caller's share.
func (h *Subscriptions) leaveLocked(session string, sub *subscription) {
	caller := h.owners[session]
	held := h.byCaller[caller]
	if held[sub]--; held[sub] <= 0 {
		delete(held, sub)
	}
	if len(held) == 0 {
		delete(h.byCaller, caller)
	}
}

// removeLocked ends the session's subscription to uri; the last subscriber's leaving
// ends it at the remote.
func (h *Subscriptions) removeLocked(session, uri string) {
	sub := h.bySession[session][uri]
	if sub == nil {
		return
	}
	delete(h.bySession[session], uri)
	if len(h.bySession[session]) == 0 {
		delete(h.bySession, session)
	}
	delete(sub.subscribers, subscriber{session, uri})
	h.leaveLocked(session, sub)
	if len(sub.subscribers) == 0 {
		h.forgetLocked(sub)
	}
}

// forgetLocked takes sub out of its listener's wanted set, which it then ends at the
// remote.
func (h *Subscriptions) forgetLocked(sub *subscription) {
	l := sub.listener
	if l.wanted[sub.remoteURI] != sub {
		return
	}
	delete(l.wanted, sub.remoteURI)
	h.count--
	for s := range sub.subscribers {
		if h.bySession[s.session][s.uri] == sub {
			h.leaveLocked(s.session, sub)
		}
		delete(h.bySession[s.session], s.uri)
		if len(h.bySession[s.session]) == 0 {
			delete(h.bySession, s.session)
		}
	}
	l.wake.Poke()
}

// settle records the remote's answer to the first resources/subscribe of sub: a
// refusal ends it, and its waiting subscribers get the error. A later refusal (on a
// new session) is only logged; the listener asks again.
func (h *Subscriptions) settle(sub *subscription, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sub.settled {
		if err != nil {
			h.log.Info("the remote refused to subscribe again on a new session; trying again later", "uri", sub.remoteURI, "error", err.Error())
		}
		return
	}
	sub.resolve(err)
	if err != nil {
		h.forgetLocked(sub)
	}
}

// resolve ends the wait for the remote's first answer to sub: err, when set, is why
// there is no subscription.
func (sub *subscription) resolve(err error) {
	sub.settled, sub.err = true, err
	close(sub.ready)
}

// failAll ends every subscription of the listener, which stops: its remote cannot
// send updates (it keeps no session, offers no stream, or is no longer served).
func (h *Subscriptions) failAll(l *listener, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failPendingLocked(l, err)
	for _, sub := range l.wanted { // the ones the remote had answered
		h.log.Info("a subscription ended: its remote can no longer send updates", "uri", sub.remoteURI, "error", err.Error())
		h.forgetLocked(sub)
	}
	h.retireLocked(l)
}

// failPending fails the subscriptions of the listener that wait for their first
// answer: the remote could not be reached. The others wait for it to come back.
func (h *Subscriptions) failPending(l *listener, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failPendingLocked(l, err)
}

func (h *Subscriptions) failPendingLocked(l *listener, err error) {
	for _, sub := range l.wanted {
		if !sub.settled {
			sub.resolve(err)
			h.forgetLocked(sub)
		}
	}
}

// keep says whether the listener still has subscriptions to hold; when it has none it
// is retired here, at once, so that the next Subscribe starts a new one.
func (h *Subscriptions) keep(l *listener) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(l.wanted) > 0 && !h.closed {
		return true
	}
	h.retireLocked(l)
	return false
}

// retireLocked stops the listener and, unless another has taken its place, forgets it,
// so that the next Subscribe to its remote starts a new one.
func (h *Subscriptions) retireLocked(l *listener) {
	if h.listeners[l.remote] == l {
		delete(h.listeners, l.remote)
	}
	l.stop()
}

// wantedOf is a copy of the listener's wanted subscriptions.
func (h *Subscriptions) wantedOf(l *listener) map[string]*subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(l.wanted)
}

// updated fans an update of remoteURI out to the sessions and listen streams
// subscribed to it. A remote is untrusted: an update about a URI nobody subscribed to
// is dropped, and only the URI is passed on.
func (h *Subscriptions) updated(l *listener, remoteURI string) {
	type delivery struct {
		subscriber
		stream StreamNotifier // nil for a session
	}
	h.mu.Lock()
	var to []delivery
	if sub := l.wanted[remoteURI]; sub != nil {
		for s := range sub.subscribers {
			to = append(to, delivery{s, h.streams[s.session]})
		}
	}
	h.mu.Unlock()
	for _, d := range to {
		var err error
		if d.stream != nil {
			err = d.stream(d.uri)
		} else {
			err = h.notify(d.session, d.uri)
		}
		switch {
		case errors.Is(err, ErrSessionEnded) && d.stream != nil:
			h.CloseStream(d.session)
		case errors.Is(err, ErrSessionEnded):
			h.SessionEnded(d.session)
		case err != nil:
			h.log.V(1).Info("an update did not reach a subscriber", "uri", d.uri, "error", err.Error())
		}
	}
}

// ---- the listener of one remote ----

// listener holds the gateway's subscriptions at one remote (see the top of this file).
type listener struct {
	hub *Subscriptions
	// remote holds the subscriptions: origin, the items' remote, or on a stateful
	// gateway one downstream session's own remote of it.
	remote, origin *remote
	ctx            context.Context
	stop           context.CancelFunc
	// wake is poked when wanted changes.
	wake wake.Signal
	// wanted are the subscriptions to hold, by URI at the remote; guarded by hub.mu.
	wanted map[string]*subscription
}

func (h *Subscriptions) startListenerLocked(r, origin *remote) *listener {
	ctx, stop := context.WithCancel(context.Background())
	l := &listener{hub: h, remote: r, origin: origin, ctx: ctx, stop: stop, wake: wake.NewSignal(), wanted: map[string]*subscription{}}
	h.listeners[r] = l
	r.listening.Add(1)
	go func() {
		defer r.listening.Add(-1)
		l.run()
	}()
	return l
}

// errIdle ends serve when the listener has nothing left to hold.
var errIdle = errors.New("no subscriptions left")

// noUpdatesError says the remote cannot send this gateway updates at all.
type noUpdatesError struct{ why error }

func (e *noUpdatesError) Error() string {
	return "the remote cannot send resource updates to the gateway: " + e.why.Error()
}
func (e *noUpdatesError) Unwrap() error { return e.why }

// run holds the subscriptions on the remote's pooled session, and on the next one
// whenever that one is replaced or its stream ends, until none are left.
func (l *listener) run() {
	wait := minReconnectWait
	for {
		conn, err := l.remote.acquire(l.ctx)
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			failure := &ForwardError{Message: fmt.Sprintf("%s%s (remote %s)", MarkerCallFailed, err.Error(), l.remote.name)}
			if errors.Is(err, errRemoteClosed) {
				l.hub.failAll(l, failure)
				return
			}
			l.hub.failPending(l, failure)
			if !l.keepAfter(wait) {
				return
			}
			wait = min(2*wait, maxReconnectWait)
			continue
		}
		opened, err := l.serve(conn)
		l.remote.release(conn)
		var none *noUpdatesError
		switch {
		case errors.Is(err, errIdle) || l.ctx.Err() != nil:
			return
		case errors.As(err, &none):
			l.hub.failAll(l, &ForwardError{Message: fmt.Sprintf("%s%s (remote %s)", MarkerRemoteError, err.Error(), l.remote.name)})
			return
		case err != nil:
			// The subscriptions may have gone with the stream: hold them on a new session.
			l.remote.drop(conn, &mcpclient.Error{Reason: mcpclient.ReasonSessionLost, Detail: err.Error(), SessionLost: true})
		}
		if opened {
			wait = minReconnectWait
		}
		if !l.keepAfter(wait) {
			return
		}
		wait = min(2*wait, maxReconnectWait)
	}
}

// keepAfter waits d (less when the listener is stopped) and says whether to go on.
func (l *listener) keepAfter(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-l.ctx.Done():
		return false
	}
	return l.hub.keep(l)
}

// serve holds the subscriptions on conn's session: it opens the session's stream,
// subscribes what is wanted and unsubscribes what is not, until the stream ends, the
// session is replaced (nil), nothing is wanted any more (errIdle), or the remote turns
// out unable to send updates (a *noUpdatesError). opened says whether the stream opened.
func (l *listener) serve(conn *remoteConn) (opened bool, err error) {
	sess := conn.sess
	if !sess.HasStream() {
		return false, &noUpdatesError{why: mcpclient.ErrNoSession}
	}
	ctx, cancel := context.WithCancel(l.ctx)
	defer cancel()
	open, ended := make(chan struct{}), make(chan error, 1)
	go func() {
		ended <- sess.Listen(ctx, func() { close(open) }, func(m mcpclient.Message) {
			if uri := mcpclient.UpdatedURI(m); uri != "" {
				l.hub.updated(l, uri)
			}
		})
	}()
	// Nothing is subscribed before the stream opens; from then on, at every wake-up.
	opening := open // nil once the stream is open, for a closed open stays ready
	subscribed := map[string]bool{}
	for {
		var again <-chan time.Time
		if opened {
			retry, err := l.sync(ctx, conn, subscribed)
			if err != nil {
				return true, err
			}
			if !l.hub.keep(l) {
				return true, errIdle
			}
			if retry {
				again = time.After(resubscribeEvery)
			}
		}
		select {
		case <-opening:
			opened, opening = true, nil
		case <-l.wake:
		case <-again:
		case err := <-ended:
			return opened, streamEnded(err)
		case <-conn.gone:
			return opened, nil
		case <-ctx.Done():
			return opened, nil
		}
	}
}

// streamEnded is why a session's stream ended (err from Listen, nil when its context
// ended).
func streamEnded(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mcpclient.ErrNoStream), errors.Is(err, mcpclient.ErrNoSession):
		return &noUpdatesError{why: err}
	}
	return fmt.Errorf("the remote's notification stream ended: %w", err)
}

// sync subscribes at the remote, on conn's session, what is wanted and not yet
// subscribed there, and unsubscribes what is no longer wanted. retry says a refused
// subscription should be asked for again later; err, that the session is lost.
func (l *listener) sync(ctx context.Context, conn *remoteConn, subscribed map[string]bool) (retry bool, err error) {
	wanted := l.hub.wantedOf(l)
	for _, uri := range slices.Sorted(maps.Keys(wanted)) {
		if subscribed[uri] {
			continue
		}
		err := l.call(ctx, conn.sess.Subscribe, uri)
		if err == nil {
			subscribed[uri] = true
			l.hub.settle(wanted[uri], nil)
			continue
		}
		if sessionLost(err) || ctx.Err() != nil {
			return false, err
		}
		l.hub.settle(wanted[uri], l.refusal(conn, uri, err))
		retry = true
	}
	for _, uri := range slices.Sorted(maps.Keys(subscribed)) {
		if wanted[uri] != nil {
			continue
		}
		delete(subscribed, uri)
		if err := l.call(ctx, conn.sess.Unsubscribe, uri); sessionLost(err) {
			return false, err
		}
	}
	return retry, nil
}

// call makes one resources/subscribe or /unsubscribe, bounded by upstreamRequestTimeout.
func (l *listener) call(ctx context.Context, do func(context.Context, string) error, uri string) error {
	ctx, cancel := context.WithTimeout(ctx, upstreamRequestTimeout)
	defer cancel()
	return do(ctx, uri)
}

// refusal is the *ForwardError a subscriber gets for the remote's failure to subscribe
// to uri: the remote's JSON-RPC error, scrubbed of header values, or no answer.
func (l *listener) refusal(conn *remoteConn, uri string, err error) error {
	var rpcErr *mcpclient.RPCError
	if errors.As(err, &rpcErr) {
		scrubbed := *rpcErr
		scrubbed.Message = conn.client.Redact(rpcErr.Message)
		scrubbed.Data = nil
		return &ForwardError{RPC: &scrubbed, Message: MarkerRemoteError + scrubbed.Error()}
	}
	return &ForwardError{Message: fmt.Sprintf("%sresources/subscribe of %s: %s (remote %s)", MarkerCallFailed, uri, conn.client.Redact(err.Error()), l.remote.name)}
}

func sessionLost(err error) bool {
	var e *mcpclient.Error
	return errors.As(err, &e) && e.SessionLost
}
