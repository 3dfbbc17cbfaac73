package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// The subscribable remote's resources.
const (
	subscribedDoc   = "test://sub/doc"
	subscribedOther = "test://sub/other"
)

// subscribableRemote serves, in process on one address, an mcp-go remote that offers
// resource subscriptions: it counts the resources/subscribe and /unsubscribe it gets
// per URI, and update sends notifications/resources/updated about a URI to the
// sessions subscribed to it. restart replaces it by a new server on the same address,
// which knows none of the old sessions or subscriptions (the counts go on).
type subscribableRemote struct {
	t    *testing.T
	addr string

	mu           sync.Mutex
	srv          *server.MCPServer
	hs           *httptest.Server
	subscribes   map[string]int
	unsubscribes map[string]int
	subscribers  map[string][]string // URI → sessions
}

func startSubscribableRemote(t *testing.T) *subscribableRemote {
	t.Helper()
	r := &subscribableRemote{t: t, subscribes: map[string]int{}, unsubscribes: map[string]int{}, subscribers: map[string][]string{}}
	r.start("127.0.0.1:0")
	t.Cleanup(r.stop)
	return r
}

func (r *subscribableRemote) url() string { return "http://" + r.addr + "/mcp" }

func (r *subscribableRemote) start(addr string) {
	r.t.Helper()
	hooks := &server.Hooks{}
	hooks.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.subscribes[req.Params.URI]++
		r.subscribers[req.Params.URI] = append(r.subscribers[req.Params.URI], server.ClientSessionFromContext(ctx).SessionID())
	})
	hooks.AddAfterUnsubscribe(func(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.unsubscribes[req.Params.URI]++
		session := server.ClientSessionFromContext(ctx).SessionID()
		r.subscribers[req.Params.URI] = slices.DeleteFunc(r.subscribers[req.Params.URI], func(s string) bool { return s == session })
	})
	srv := server.NewMCPServer("subscribable-remote", "1.0.0", server.WithResourceCapabilities(true, false), server.WithHooks(hooks))
	for _, uri := range []string{subscribedDoc, subscribedOther} {
		srv.AddResource(mcp.NewResource(uri, uri, mcp.WithMIMEType("text/plain")),
			func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "contents of " + req.Params.URI}}, nil
			})
	}
	var ln net.Listener
	// The old server's port may take a moment to free.
	testkit.Eventually(r.t, gatewayTimeout, "a listener on "+addr, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	hs := httptest.NewUnstartedServer(server.NewStreamableHTTPServer(srv))
	hs.Listener = ln
	hs.Start()
	r.mu.Lock()
	r.srv, r.hs, r.addr = srv, hs, ln.Addr().String()
	r.subscribers = map[string][]string{}
	r.mu.Unlock()
}

func (r *subscribableRemote) stop() {
	r.mu.Lock()
	hs := r.hs
	r.mu.Unlock()
	hs.CloseClientConnections()
	hs.Close()
}

// restart stops the remote, as a crash would, and starts a new one on its address.
func (r *subscribableRemote) restart() {
	r.stop()
	r.start(r.addr)
}

// update sends notifications/resources/updated about uri to its subscribers and says
// how many there are.
func (r *subscribableRemote) update(uri string) int {
	r.mu.Lock()
	srv, sessions := r.srv, slices.Clone(r.subscribers[uri])
	r.mu.Unlock()
	for _, s := range sessions {
		if err := srv.SendNotificationToSpecificClient(s, mcp.MethodNotificationResourceUpdated, map[string]any{"uri": uri}); err != nil {
			r.t.Logf("remote: update of %s to session %s: %v", uri, s, err)
		}
	}
	return len(sessions)
}

func (r *subscribableRemote) counts(uri string) (subscribes, unsubscribes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.subscribes[uri], r.unsubscribes[uri]
}

// startGatewayOf starts the real adapter binary as a streamable HTTP gateway (stateful
// or not) re-exporting the remote's resources, and returns it and its MCP URL.
func startGatewayOf(t *testing.T, ctx context.Context, remote *subscribableRemote, stateless bool) (*peers.Server, string) {
	t.Helper()
	configPath := filepath.Join(t.TempDir(), adapterconfig.ConfigFileName)
	writeGatewayConfigWith(t, configPath, adapterconfig.TransportStreamableHTTP, stateless, []gatewayTool{}, subscribableImported(remote.url()))
	gw := peers.StartAdapterServer(t, ctx, configPath, "--v", "1")
	return gw, gw.BaseURL + adapterconfig.PathMCP
}

// subscribableImported is the "imported" member of a gateway config that re-exports the
// remote's two resources, whose remote declared resources.subscribe.
func subscribableImported(remoteURL string) map[string]any {
	remote := remoteSpec{Import: "e2e/subscribable", URL: remoteURL, Transport: peers.TransportStreamableHTTP, Timeout: "10s", Subscribe: true}
	var resources []any
	for _, uri := range []string{subscribedDoc, subscribedOther} {
		resources = append(resources, map[string]any{"key": uri, "definition": json.RawMessage(`{"uri":"` + uri + `","name":"` + uri + `","mimeType":"text/plain"}`), "remote": remote})
	}
	return map[string]any{"imported": map[string]any{"resources": resources}}
}

// updatesClient is an mcp-go client of the gateway with its GET stream open, which
// records the notifications/resources/updated it receives and when. It speaks protocol
// 2025-11-25, whose GET stream and resources/subscribe mcp-go marks deprecated (2026-07-28
// replaced them with subscriptions/listen); the gateway relays these.
type updatesClient struct {
	*client.Client
	got chan updateSeen
}

type updateSeen struct {
	uri string
	at  time.Time
}

func newUpdatesClient(t *testing.T, ctx context.Context, url string) *updatesClient {
	t.Helper()
	listening := transport.WithContinuousListening() //nolint:staticcheck // SA1019: see above
	c := &updatesClient{Client: mcpGoClient(t, ctx, url, listening), got: make(chan updateSeen, 64)}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationResourceUpdated {
			uri, _ := n.Params.AdditionalFields["uri"].(string)
			c.got <- updateSeen{uri: uri, at: time.Now()}
		}
	})
	return c
}

func (c *updatesClient) subscribe(ctx context.Context, uri string) error {
	req := mcp.SubscribeRequest{}
	req.Params.URI = uri
	return c.Subscribe(ctx, req) //nolint:staticcheck // SA1019: see updatesClient
}

func (c *updatesClient) unsubscribe(t *testing.T, ctx context.Context, uri string) {
	t.Helper()
	req := mcp.UnsubscribeRequest{}
	req.Params.URI = uri
	if err := c.Unsubscribe(ctx, req); err != nil { //nolint:staticcheck // SA1019: see updatesClient
		t.Fatalf("unsubscribe %s: %v", uri, err)
	}
}

// next is the next update the client receives; it fails t when none comes.
func (c *updatesClient) next(t *testing.T, what string) updateSeen {
	t.Helper()
	return testkit.Receive(t, gatewayTimeout, what, c.got)
}

// receivedNothing fails t when the client has received an update.
func (c *updatesClient) receivedNothing(t *testing.T, why string) {
	t.Helper()
	select {
	case u := <-c.got:
		t.Errorf("%s, yet it got %+v", why, u)
	default:
	}
}

// TestGatewayRelaysResourceSubscriptions: mcp-go clients of a stateful gateway (the
// real adapter binary) subscribe, through it, to a resource of a remote that offers
// subscriptions. Each client's subscription is held on its session's own upstream
// session, so two subscribers make two subscriptions at the remote; an update the
// remote sends reaches both and not a client that did not subscribe; after
// unsubscribing, none arrive, and the remote is unsubscribed for that session only;
// the remote restarting (it forgets the sessions) is followed by a new subscription
// there, and updates resume. A URI no import serves is refused with an error naming it.
func TestGatewayRelaysResourceSubscriptions(t *testing.T) {
	ctx := testkit.Context(t, gatewayTimeout)
	remote := startSubscribableRemote(t)
	gw, url := startGatewayOf(t, ctx, remote, false)

	a, b, quiet := newUpdatesClient(t, ctx, url), newUpdatesClient(t, ctx, url), newUpdatesClient(t, ctx, url)
	if caps := a.GetServerCapabilities(); caps.Resources == nil || !caps.Resources.Subscribe {
		t.Fatalf("the gateway's resources capability is %+v, want subscribe declared", caps.Resources)
	}
	for name, c := range map[string]*updatesClient{"a": a, "b": b} {
		if err := c.subscribe(ctx, subscribedDoc); err != nil {
			t.Fatalf("client %s: subscribe %s: %v\n%s", name, subscribedDoc, err, gw.Logs())
		}
	}
	if n, _ := remote.counts(subscribedDoc); n != 2 {
		t.Errorf("two clients subscribed to %s made %d subscriptions at the remote, want one per session", subscribedDoc, n)
	}

	t.Run("an update reaches the subscribers only", func(t *testing.T) {
		var latencies []time.Duration
		for range 5 {
			sent := time.Now()
			if n := remote.update(subscribedDoc); n != 2 {
				t.Fatalf("the remote has %d subscribers of %s, want the two clients' upstream sessions", n, subscribedDoc)
			}
			for name, c := range map[string]*updatesClient{"a": a, "b": b} {
				if u := c.next(t, "client "+name+"'s update of "+subscribedDoc); u.uri != subscribedDoc {
					t.Fatalf("client %s: got %+v, want an update of %s", name, u, subscribedDoc)
				} else {
					latencies = append(latencies, u.at.Sub(sent))
				}
			}
		}
		if n := remote.update(subscribedOther); n != 0 {
			t.Errorf("the remote has %d subscribers of %s; the gateway must not subscribe where no client did", n, subscribedOther)
		}
		// The remote's updates reach the gateway in order over one session: an update
		// sent now is the next a subscriber gets, unless it got one it should not have.
		remote.update(subscribedDoc)
		for name, c := range map[string]*updatesClient{"a": a, "b": b} {
			if u := c.next(t, "client "+name+"'s update of "+subscribedDoc); u.uri != subscribedDoc {
				t.Errorf("client %s got %+v, which it did not subscribe to", name, u)
			}
		}
		quiet.receivedNothing(t, "a client that subscribed to nothing must get no update")
		slices.Sort(latencies)
		t.Logf("remote update → client: median %s, max %s over %d deliveries",
			latencies[len(latencies)/2].Round(10*time.Microsecond), latencies[len(latencies)-1].Round(10*time.Microsecond), len(latencies))
	})

	t.Run("a URI no import serves is refused", func(t *testing.T) {
		err := quiet.subscribe(ctx, "test://nobody/serves/this")
		if err == nil || !strings.Contains(err.Error(), "test://nobody/serves/this") {
			t.Errorf("subscribe to an unknown URI: %v, want an error naming it", err)
		}
	})

	t.Run("after unsubscribing no more arrive", func(t *testing.T) {
		a.unsubscribe(t, ctx, subscribedDoc)
		testkit.EventuallyTrue(t, gatewayTimeout, "a's upstream session to be unsubscribed", func() bool {
			_, n := remote.counts(subscribedDoc)
			return n == 1
		})
		remote.update(subscribedDoc)
		if u := b.next(t, "client b's update after a unsubscribed"); u.uri != subscribedDoc {
			t.Fatalf("client b: got %+v after a unsubscribed", u)
		}
		// A barrier: a subscribes to the other document, which the remote then updates.
		// That update reaches the gateway after the one a must not get, over the same
		// session, so it is the first a gets unless it got the other too.
		if err := a.subscribe(ctx, subscribedOther); err != nil {
			t.Fatalf("client a: subscribe %s: %v", subscribedOther, err)
		}
		remote.update(subscribedOther)
		if u := a.next(t, "client a's update of "+subscribedOther); u.uri != subscribedOther {
			t.Errorf("client a got %+v after unsubscribing from %s", u, subscribedDoc)
		}
	})

	t.Run("updates resume after the remote restarts", func(t *testing.T) {
		before, _ := remote.counts(subscribedDoc)
		restarted := time.Now()
		remote.restart()
		testkit.EventuallyTrue(t, gatewayTimeout, "the gateway to subscribe again on the restarted remote", func() bool {
			n, _ := remote.counts(subscribedDoc)
			return n > before
		})
		t.Logf("subscribed again %s after the restart", time.Since(restarted).Round(time.Millisecond))
		if n, _ := remote.counts(subscribedDoc); n != before+1 {
			t.Errorf("the gateway subscribed %d times on the restarted remote, want once", n-before)
		}
		remote.update(subscribedDoc)
		if u := b.next(t, "client b's update after the remote restarted"); u.uri != subscribedDoc {
			t.Fatalf("client b: got %+v after the remote restarted\n%s", u, gw.Logs())
		}
	})

	t.Run("the last subscriber leaving ends the subscription at the remote", func(t *testing.T) {
		b.unsubscribe(t, ctx, subscribedDoc)
		testkit.EventuallyTrue(t, gatewayTimeout, "the remote to be unsubscribed", func() bool {
			_, n := remote.counts(subscribedDoc)
			return n == 2
		})
		if n := remote.update(subscribedDoc); n != 0 {
			t.Errorf("the remote still has %d subscribers of %s", n, subscribedDoc)
		}
	})
}

// A stateless gateway cannot tie an update to its subscriber's session on another
// replica: it answers resources/subscribe with an error saying so.
func TestStatelessGatewayRefusesSubscriptions(t *testing.T) {
	ctx := testkit.Context(t, gatewayTimeout)
	remote := startSubscribableRemote(t)
	_, url := startGatewayOf(t, ctx, remote, true)
	c := &updatesClient{Client: mcpGoClient(t, ctx, url)}
	if caps := c.GetServerCapabilities(); caps.Resources != nil && caps.Resources.Subscribe {
		t.Errorf("a stateless gateway declares resources.subscribe")
	}
	err := c.subscribe(ctx, subscribedDoc)
	if err == nil || !strings.Contains(err.Error(), "stateless") {
		t.Errorf("subscribe through a stateless gateway: %v, want an error saying it is stateless", err)
	}
	if n, _ := remote.counts(subscribedDoc); n != 0 {
		t.Errorf("the remote got %d subscribes through a stateless gateway", n)
	}
}

// TestGatewaySubscriptionServerEverything: the official TypeScript SDK client
// subscribes through a stateful gateway to a resource of server-everything, then calls
// its toggle-subscriber-updates tool through the gateway; server-everything sends
// updates to the session the tool was called on, which is the client session's own
// upstream session, holding its subscription too, and the client receives them.
func TestGatewaySubscriptionServerEverything(t *testing.T) {
	ctx := testkit.Context(t, gatewayTimeout)
	everything := peers.StartServerEverything(t, ctx, peers.TransportStreamableHTTP) + "/mcp"
	remote := remoteSpec{Import: "e2e/everything", URL: everything, Transport: peers.TransportStreamableHTTP, Timeout: "10s", Subscribe: true}
	const template = "demo://resource/dynamic/text/{resourceId}"
	imported := map[string]any{"imported": map[string]any{"resourceTemplates": []any{map[string]any{
		"key": template, "definition": json.RawMessage(`{"uriTemplate":"` + template + `","name":"Dynamic Text Resource"}`), "remote": remote,
	}}}}
	toggle := remote
	toggle.RemoteName = "toggle-subscriber-updates"
	tools := []gatewayTool{{Name: "toggle_updates", Description: "server-everything's toggle-subscriber-updates.",
		InputSchema: json.RawMessage(`{"type":"object"}`), Remote: &toggle}}
	gateway := startAskingGateway(t, ctx, false, tools, imported)

	const uri = "demo://resource/dynamic/text/1"
	started := time.Now()
	out := peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Subscribe: uri, Call: "toggle_updates", WaitUpdated: 1, Timeout: 20 * time.Second})
	if out.Result == nil || out.Result.IsError || !strings.Contains(out.Result.Text(), "Started simulated resource updated") {
		t.Errorf("toggle-subscriber-updates answered %+v", out.Result)
	}
	if len(out.Updated) == 0 || out.Updated[0] != uri {
		t.Errorf("the client received updates %v, want %s", out.Updated, uri)
	}
	t.Logf("subscribed, toggled and updated in %s: %v", time.Since(started).Round(time.Millisecond), out.Updated)
}
