package mcpclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// startSubscribable serves, with mcp-go, a stateful server that declares
// resources.subscribe and answers every resources/subscribe by sending the subscriber
// notifications/resources/updated about the URI, outside the request, until the
// subscriber unsubscribes.
func startSubscribable(t *testing.T) string {
	t.Helper()
	// The hook runs before the answer is written; the notification goes out once the
	// HTTP handler of the subscribe has returned, so that it is not the request's. That
	// handler's reader of the session's notifications may still take one as it ends and
	// write it to the finished answer, so the update is sent again every 50 ms until the
	// session unsubscribes or the test ends.
	var mu sync.Mutex
	subscribed := map[string][]string{} // session → URIs to notify about
	unsubscribed := make(chan struct{})
	stopOnce := sync.OnceFunc(func() { close(unsubscribed) })
	hooks := &server.Hooks{}
	hooks.AddAfterUnsubscribe(func(context.Context, any, *mcp.UnsubscribeRequest, *mcp.EmptyResult) { stopOnce() })
	hooks.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		session := server.ClientSessionFromContext(ctx).SessionID()
		mu.Lock()
		defer mu.Unlock()
		subscribed[session] = append(subscribed[session], req.Params.URI)
	})
	srv := server.NewMCPServer("subscribable", "1", server.WithResourceCapabilities(true, false), server.WithHooks(hooks))
	srv.AddResource(mcp.NewResource("test://one", "one"), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: "test://one", Text: "1"}}, nil
	})
	streamable := server.NewStreamableHTTPServer(srv, server.WithSessionIdManager(&server.InsecureStatefulSessionIdManager{}))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streamable.ServeHTTP(w, r)
		session := r.Header.Get(server.HeaderKeySessionID)
		mu.Lock()
		uris := subscribed[session]
		delete(subscribed, session)
		mu.Unlock()
		for _, uri := range uris {
			go notifyUntilUnsubscribed(srv, session, uri, unsubscribed)
		}
	}))
	t.Cleanup(func() {
		stopOnce()
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs.URL + "/mcp"
}

// notifyUntilUnsubscribed sends session notifications/resources/updated about uri
// every 50 ms until stop is closed.
func notifyUntilUnsubscribed(srv *server.MCPServer, session, uri string, stop <-chan struct{}) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		_ = srv.SendNotificationToSpecificClient(session, MethodResourceUpdated, map[string]any{"uri": uri})
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

func TestListen_ResourceUpdatedOfASubscription(t *testing.T) {
	ctx := testkit.Context(t, testBudget)
	c, err := New(ClientOptions{URL: startSubscribable(t), ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if caps := s.ServerInfo().Capabilities; !slices.Contains(caps, definition.CapabilityResourcesSubscribe) {
		t.Errorf("capabilities %v lack %s", caps, definition.CapabilityResourcesSubscribe)
	}
	if !s.HasStream() {
		t.Fatal("a stateful session has no stream")
	}
	updated, opened := make(chan string, 4), make(chan struct{})
	listenCtx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() {
		ended <- s.Listen(listenCtx, func() { close(opened) }, func(m Message) {
			if uri := UpdatedURI(m); uri != "" {
				select {
				case updated <- uri:
				default: // the fixture sends it again until unsubscribed
				}
			}
		})
	}()
	<-opened
	if err := s.Subscribe(ctx, "test://one"); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	select {
	case uri := <-updated:
		if uri != "test://one" {
			t.Errorf("updated %q, want test://one", uri)
		}
	case <-ctx.Done():
		t.Fatal("no notifications/resources/updated on the GET stream")
	}
	if err := s.Unsubscribe(ctx, "test://one"); err != nil {
		t.Errorf("unsubscribe: %v", err)
	}
	stop()
	if err := <-ended; err != nil {
		t.Errorf("Listen ended with %v after its context, want nil", err)
	}
}

func TestPing_AForgottenSessionIsLost(t *testing.T) {
	ctx := testkit.Context(t, testBudget)
	url := startSubscribable(t)
	c, err := New(ClientOptions{URL: url, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping on a known session: %v", err)
	}
	s.id = "mcp-session-00000000-0000-0000-0000-000000000000"
	err = s.Ping(ctx)
	var e *Error
	if !errors.As(err, &e) || !e.SessionLost {
		t.Errorf("ping on a session the server does not know: %v, want an *Error with SessionLost", err)
	}
}
