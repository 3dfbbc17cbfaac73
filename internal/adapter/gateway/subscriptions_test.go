package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// subscribableRemote is a real mcp-go server that offers resource subscriptions,
// counts the resources/subscribe and /unsubscribe it gets per URI, and sends
// notifications/resources/updated about a URI to its subscribed sessions on demand.
type subscribableRemote struct {
	srv *server.MCPServer
	url string

	mu           sync.Mutex
	subscribes   map[string]int
	unsubscribes map[string]int
	subscribers  map[string]map[string]bool // URI → sessions
	// held, when set for a URI, keeps the remote from answering resources/subscribe of
	// it until the channel is closed; holding tells the URI first.
	held    map[string]chan struct{}
	holding chan string
}

func startSubscribableRemote(t *testing.T, subscribe bool) *subscribableRemote {
	t.Helper()
	r := &subscribableRemote{subscribes: map[string]int{}, unsubscribes: map[string]int{}, subscribers: map[string]map[string]bool{}}
	hooks := &server.Hooks{}
	hooks.AddBeforeSubscribe(func(_ context.Context, _ any, req *mcp.SubscribeRequest) {
		r.mu.Lock()
		held, holding := r.held[req.Params.URI], r.holding
		r.mu.Unlock()
		if held != nil {
			holding <- req.Params.URI
			<-held
		}
	})
	hooks.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		r.mu.Lock()
		defer r.mu.Unlock()
		uri := req.Params.URI
		r.subscribes[uri]++
		if r.subscribers[uri] == nil {
			r.subscribers[uri] = map[string]bool{}
		}
		r.subscribers[uri][server.ClientSessionFromContext(ctx).SessionID()] = true
	})
	hooks.AddAfterUnsubscribe(func(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.unsubscribes[req.Params.URI]++
		delete(r.subscribers[req.Params.URI], server.ClientSessionFromContext(ctx).SessionID())
	})
	r.srv = server.NewMCPServer("subscribable", "1", server.WithResourceCapabilities(subscribe, false), server.WithHooks(hooks))
	hs := httptest.NewServer(server.NewStreamableHTTPServer(r.srv))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	r.url = hs.URL + "/mcp"
	return r
}

// update tells the sessions subscribed to uri that it was updated.
func (r *subscribableRemote) update(uri string) {
	r.mu.Lock()
	sessions := slices.Collect(func(yield func(string) bool) {
		for s := range r.subscribers[uri] {
			if !yield(s) {
				return
			}
		}
	})
	r.mu.Unlock()
	for _, s := range sessions {
		_ = r.srv.SendNotificationToSpecificClient(s, "notifications/resources/updated", map[string]any{"uri": uri})
	}
}

// hold keeps the remote from answering resources/subscribe of uri until the test ends;
// the returned channel tells when a subscribe of it arrived.
func (r *subscribableRemote) hold(t *testing.T, uri string) <-chan string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held, r.holding = map[string]chan struct{}{}, make(chan string, 1)
	}
	release := make(chan struct{})
	r.held[uri] = release
	t.Cleanup(func() { close(release) })
	return r.holding
}

func (r *subscribableRemote) counts(uri string) (subscribes, unsubscribes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.subscribes[uri], r.unsubscribes[uri]
}

// deliveries records what a Subscriptions sent to which session.
type deliveries struct {
	mu   sync.Mutex
	sent []string // "session uri"
	got  chan string
}

func newDeliveries() *deliveries { return &deliveries{got: make(chan string, 64)} }

func (d *deliveries) notify(session, uri string) error {
	d.mu.Lock()
	d.sent = append(d.sent, session+" "+uri)
	d.mu.Unlock()
	d.got <- session + " " + uri
	return nil
}

// expect waits for the deliveries want (in any order). Then, when barrier is set, it
// sends that update, whose deliveries the test knows (barrierWant), and waits for them
// too: a listener delivers a remote's updates in order, so a delivery that should not
// have happened arrives before the barrier's and shows as one too many. Without a
// barrier it checks that nothing more has arrived.
func (d *deliveries) expect(t *testing.T, barrier func(), barrierWant []string, want ...string) {
	t.Helper()
	var got []string
	for len(got) < len(want) {
		got = append(got, testkit.Receive(t, 5*time.Second, fmt.Sprintf("updates %v (got %v)", want, got), d.got))
	}
	want = append(want, barrierWant...)
	if barrier != nil {
		barrier()
		for len(got) < len(want) {
			got = append(got, testkit.Receive(t, 5*time.Second, fmt.Sprintf("updates %v (got %v)", want, got), d.got))
		}
	}
	select {
	case g := <-d.got:
		got = append(got, g)
	default:
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got updates %v, want %v", got, want)
	}
}

// linkedItem is an imported resource of the remote at url, linked to a remote of pool.
func linkedItem(t *testing.T, pool *Pool, url, key, remoteKey string) *Item {
	t.Helper()
	it := &Item{Key: key, RemoteKey: remoteKey, Backend: &adapterconfig.RemoteBackend{Import: "ns/remote", URL: url,
		Transport: "streamable-http", Timeout: adapterconfig.Duration{Duration: 10 * time.Second}, Subscribe: true}}
	linked, err := pool.PrepareAll(nil, []*Item{it})
	if err != nil {
		t.Fatal(err)
	}
	pool.Commit(linked)
	return it
}

func newTestSubscriptions(t *testing.T, d *deliveries) (*Subscriptions, *Pool) {
	t.Helper()
	pool := NewPool(logr.Discard(), NewMetrics(), true)
	subs := NewSubscriptions(logr.Discard(), d.notify)
	t.Cleanup(func() {
		subs.Close()
		pool.CloseAll()
	})
	return subs, pool
}

// Sessions subscribed to one URI share one subscription at the remote; an update
// reaches them and no other session; the last one to leave ends it at the remote.
func TestSubscriptions_SharedAtTheRemoteAndCounted(t *testing.T) {
	ctx := context.Background()
	remote := startSubscribableRemote(t, true)
	d := newDeliveries()
	subs, pool := newTestSubscriptions(t, d)
	const uri = "test://doc"
	it := linkedItem(t, pool, remote.url, uri, "")
	for _, s := range []string{"a", "b", "c"} {
		subs.SessionStarted(s)
	}
	for _, s := range []string{"a", "b", "a"} {
		if err := subs.Subscribe(ctx, s, it, uri); err != nil {
			t.Fatalf("session %s: subscribe: %v", s, err)
		}
	}
	if n, _ := remote.counts(uri); n != 1 {
		t.Errorf("the remote got %d resources/subscribe for two sessions, want 1", n)
	}
	if up, clients := subs.Count(); up != 1 || clients != 2 {
		t.Errorf("Count() = %d upstream, %d clients; want 1, 2", up, clients)
	}

	again := func() { remote.update(uri) }
	remote.update(uri)
	d.expect(t, again, []string{"a " + uri, "b " + uri}, "a "+uri, "b "+uri) // not c
	remote.update("test://other")
	d.expect(t, again, []string{"a " + uri, "b " + uri})

	subs.Unsubscribe("a", uri)
	subs.Unsubscribe("c", uri) // never subscribed: a no-op
	remote.update(uri)
	d.expect(t, again, []string{"b " + uri}, "b "+uri)
	if _, n := remote.counts(uri); n != 0 {
		t.Errorf("the remote got %d resources/unsubscribe while a session is still subscribed", n)
	}

	subs.SessionEnded("b")
	testkit.EventuallyTrue(t, 5*time.Second, "the remote is unsubscribed", func() bool { _, n := remote.counts(uri); return n == 1 })
	remote.update(uri) // to no one: the remote has no subscriber left to send it to
	d.expect(t, nil, nil)
	if up, clients := subs.Count(); up != 0 || clients != 0 {
		t.Errorf("Count() = %d upstream, %d clients after everyone left; want 0, 0", up, clients)
	}

	// A new subscriber starts over at the remote.
	if err := subs.Subscribe(ctx, "c", it, uri); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 5*time.Second, "the second subscribe", func() bool { n, _ := remote.counts(uri); return n == 2 })
	remote.update(uri)
	d.expect(t, again, []string{"c " + uri}, "c "+uri)
}

// A skill's file moved under a prefix is subscribed under its remote URI, and the
// update reaches the session under the URI it subscribed to.
func TestSubscriptions_TranslateAMovedURI(t *testing.T) {
	ctx := context.Background()
	remote := startSubscribableRemote(t, true)
	d := newDeliveries()
	subs, pool := newTestSubscriptions(t, d)
	it := linkedItem(t, pool, remote.url, "skill://team/notes/SKILL.md", "skill://notes/SKILL.md")
	subs.SessionStarted("a")
	if err := subs.Subscribe(ctx, "a", it, "skill://team/notes/SKILL.md"); err != nil {
		t.Fatal(err)
	}
	if n, _ := remote.counts("skill://notes/SKILL.md"); n != 1 {
		t.Fatalf("the remote got %d subscribes of its own URI, want 1", n)
	}
	again := func() { remote.update("skill://notes/SKILL.md") }
	remote.update("skill://notes/SKILL.md")
	d.expect(t, again, []string{"a skill://team/notes/SKILL.md"}, "a skill://team/notes/SKILL.md")
}

// The bounds: per session, and per gateway at the remotes.
func TestSubscriptions_Bounds(t *testing.T) {
	ctx := context.Background()
	remote := startSubscribableRemote(t, true)
	subs, pool := newTestSubscriptions(t, newDeliveries())
	subs.maxPerSession, subs.maxUpstream = 3, 4
	subs.share = 1 // one caller's sessions reach the gateway's own bound
	it := linkedItem(t, pool, remote.url, "test://{id}", "")
	for _, s := range []string{"a", "b"} {
		subs.SessionStarted(s)
	}
	for i := range 3 {
		if err := subs.Subscribe(ctx, "a", it, fmt.Sprintf("test://%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var refused *SubscriptionError
	if err := subs.Subscribe(ctx, "a", it, "test://3"); !errors.As(err, &refused) {
		t.Errorf("a session's 4th subscription: %v, want a *SubscriptionError", err)
	}
	if err := subs.Subscribe(ctx, "a", it, "test://0"); err != nil {
		t.Errorf("subscribing again to a URI at the bound: %v, want a no-op", err)
	}
	// b shares a's three and adds one: four at the remote, the gateway's bound.
	for _, uri := range []string{"test://0", "test://1", "test://9"} {
		if err := subs.Subscribe(ctx, "b", it, uri); err != nil {
			t.Fatalf("b: %s: %v", uri, err)
		}
	}
	subs.SessionStarted("c")
	if err := subs.Subscribe(ctx, "c", it, "test://1"); err != nil {
		t.Errorf("sharing a subscription at the gateway's bound: %v, want it shared", err)
	}
	if err := subs.Subscribe(ctx, "c", it, "test://new"); !errors.As(err, &refused) {
		t.Errorf("a 5th subscription at the remotes: %v, want a *SubscriptionError", err)
	}
	if up, _ := subs.Count(); up != 4 {
		t.Errorf("%d subscriptions at the remote, want 4", up)
	}
	if err := subs.Subscribe(ctx, "stranger", it, "test://0"); !errors.As(err, &refused) {
		t.Errorf("a session the server never registered subscribed: %v, want a *SubscriptionError", err)
	}
}

// A remote that refuses resources/subscribe: the subscriber gets its error, and
// nothing is kept.
func TestSubscriptions_RemoteRefusal(t *testing.T) {
	remote := startSubscribableRemote(t, false)
	subs, pool := newTestSubscriptions(t, newDeliveries())
	it := linkedItem(t, pool, remote.url, "test://doc", "")
	subs.SessionStarted("a")
	err := subs.Subscribe(context.Background(), "a", it, "test://doc")
	var fe *ForwardError
	if !errors.As(err, &fe) || fe.RPC == nil || fe.RPC.Code != mcp.METHOD_NOT_FOUND {
		t.Fatalf("subscribe at a remote without the capability: %v, want its -32601", err)
	}
	if up, clients := subs.Count(); up != 0 || clients != 0 {
		t.Errorf("Count() = %d, %d after a refusal; want 0, 0", up, clients)
	}
}

// A listener whose remote can no longer send updates fails the subscriptions waiting
// for the remote's first answer with the listener's error, ends those it held, and is
// retired, so that nothing is counted any more.
func TestSubscriptions_FailAllEndsHeldAndPendingSubscriptions(t *testing.T) {
	ctx := context.Background()
	remote := startSubscribableRemote(t, true)
	holding := remote.hold(t, "test://pending")
	subs, pool := newTestSubscriptions(t, newDeliveries())
	held := &Item{Key: "test://held", Backend: &adapterconfig.RemoteBackend{Import: "ns/remote", URL: remote.url,
		Transport: "streamable-http", Timeout: adapterconfig.Duration{Duration: 10 * time.Second}, Subscribe: true}}
	pending := &Item{Key: "test://pending", Backend: held.Backend}
	linked, err := pool.PrepareAll(nil, []*Item{held, pending})
	if err != nil {
		t.Fatal(err)
	}
	pool.Commit(linked)
	subs.SessionStarted("a")
	if err := subs.Subscribe(ctx, "a", held, "test://held"); err != nil {
		t.Fatalf("subscribe test://held: %v", err)
	}
	answer := make(chan error, 1)
	go func() { answer <- subs.Subscribe(ctx, "a", pending, "test://pending") }()
	testkit.Receive(t, 5*time.Second, "the remote to get resources/subscribe of test://pending", holding)

	subs.mu.Lock()
	listeners := slices.Collect(maps.Values(subs.listeners))
	subs.mu.Unlock()
	if len(listeners) != 1 {
		t.Fatalf("%d listeners for one remote, want 1", len(listeners))
	}
	failure := &ForwardError{Message: "the remote cannot send updates"}
	subs.failAll(listeners[0], failure)

	if err := testkit.Receive(t, 5*time.Second, "the answer to subscribe test://pending", answer); !errors.Is(err, failure) {
		t.Errorf("the pending subscribe answered %v, want the listener's failure", err)
	}
	if up, clients := subs.Count(); up != 0 || clients != 0 {
		t.Errorf("Count() = %d, %d after failAll; want 0, 0", up, clients)
	}
	subs.mu.Lock()
	left := len(subs.listeners)
	subs.mu.Unlock()
	if left != 0 {
		t.Errorf("%d listeners kept after failAll, want it retired", left)
	}
}

// A subscriptions/listen stream is a subscriber of its own: it shares the session's
// subscription at the remote, gets updates through its own notifier, is bounded like a
// session, cannot be touched by a session naming its key, and its closing ends its part.
func TestSubscriptions_ListenStreams(t *testing.T) {
	ctx := context.Background()
	remote := startSubscribableRemote(t, true)
	d := newDeliveries()
	subs, pool := newTestSubscriptions(t, d)
	subs.maxPerSession = 2
	it := linkedItem(t, pool, remote.url, "test://{id}", "")
	streamGot := make(chan string, 8)
	key := subs.OpenStream(func(uri string) error { streamGot <- uri; return nil })
	subs.SessionStarted("a")
	if err := subs.Subscribe(ctx, "a", it, "test://1"); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"test://1", "test://2"} {
		if err := subs.SubscribeStream(ctx, key, it, uri); err != nil {
			t.Fatalf("stream: %s: %v", uri, err)
		}
	}
	var refused *SubscriptionError
	if err := subs.SubscribeStream(ctx, key, it, "test://3"); !errors.As(err, &refused) {
		t.Errorf("a stream's 3rd subscription over a bound of 2: %v, want a *SubscriptionError", err)
	}
	if n, _ := remote.counts("test://1"); n != 1 {
		t.Errorf("a session and a stream subscribed to test://1 made %d subscribes at the remote, want 1", n)
	}
	if err := subs.Subscribe(ctx, key, it, "test://4"); !errors.As(err, &refused) {
		t.Errorf("resources/subscribe naming a stream's key as its session: %v, want a *SubscriptionError", err)
	}
	subs.Unsubscribe(key, "test://2") // a session naming the stream's key: a no-op

	remote.update("test://2")
	if uri := testkit.Receive(t, 5*time.Second, "the stream's update of test://2", streamGot); uri != "test://2" {
		t.Errorf("the stream got an update of %s, want test://2", uri)
	}
	// No session subscribed to test://2; session a's test://1 is the barrier.
	d.expect(t, func() { remote.update("test://1") }, []string{"a test://1"})

	subs.CloseStream(key)
	testkit.EventuallyTrue(t, 5*time.Second, "the remote is unsubscribed from test://2", func() bool { _, n := remote.counts("test://2"); return n == 1 })
	if _, n := remote.counts("test://1"); n != 0 {
		t.Errorf("closing the stream ended test://1 at the remote while session a still holds it")
	}
	if up, clients := subs.Count(); up != 1 || clients != 1 {
		t.Errorf("Count() = %d upstream, %d clients after the stream closed; want 1, 1", up, clients)
	}
	if err := subs.SubscribeStream(ctx, key, it, "test://1"); !errors.As(err, &refused) {
		t.Errorf("subscribing a closed stream: %v, want a *SubscriptionError", err)
	}
}
