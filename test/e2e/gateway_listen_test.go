package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// modernListen is an open subscriptions/listen request of protocol 2026-07-28 (there
// is no 2026-07-28 client on npm; this one is plain net/http), its response stream
// read message by message.
type modernListen struct {
	id       int
	ack      map[string]any
	messages chan map[string]any
	close    context.CancelFunc
}

// openListen POSTs subscriptions/listen asking for notifications, with the protocol
// headers of modernPost, and waits for the acknowledgement, the stream's first message.
func openListen(t *testing.T, ctx context.Context, url string, id int, notifications map[string]any) *modernListen {
	t.Helper()
	streamCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	req := modernRequest(t, streamCtx, url, id, string(mcp.MethodSubscriptionsListen), map[string]any{"notifications": notifications}, map[string]any{})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("subscriptions/listen: %v", err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var answer bytes.Buffer
		_, _ = answer.ReadFrom(resp.Body)
		resp.Body.Close()
		t.Fatalf("subscriptions/listen answered %s %s, want an event stream: %s", resp.Status, resp.Header.Get("Content-Type"), answer.String())
	}
	l := &modernListen{id: id, messages: make(chan map[string]any, 64), close: cancel}
	go l.read(resp)
	l.ack = testkit.Receive(t, 10*time.Second, "the acknowledgement of subscriptions/listen", l.messages)
	if l.ack == nil || l.ack["method"] != string(mcp.MethodNotificationSubscriptionsAcknowledged) {
		t.Fatalf("the first message on the listen stream is %v, want notifications/subscriptions/acknowledged", l.ack)
	}
	return l
}

// read passes the stream's messages on until it ends, then closes messages.
func (l *modernListen) read(resp *http.Response) {
	defer close(l.messages)
	defer resp.Body.Close()
	scanner := bufio.NewScanner(resp.Body)
	for scanner.Scan() {
		data, ok := strings.CutPrefix(scanner.Text(), "data: ")
		if !ok {
			continue
		}
		var msg map[string]any
		if json.Unmarshal([]byte(data), &msg) == nil {
			l.messages <- msg
		}
	}
}

// acknowledged is the acknowledgement's notifications.
func (l *modernListen) acknowledged() map[string]any {
	params, _ := l.ack["params"].(map[string]any)
	notifications, _ := params["notifications"].(map[string]any)
	return notifications
}

// acknowledgedURIs are the resource subscriptions the acknowledgement names.
func (l *modernListen) acknowledgedURIs() []string {
	var uris []string
	list, _ := l.acknowledged()["resourceSubscriptions"].([]any)
	for _, u := range list {
		s, _ := u.(string)
		uris = append(uris, s)
	}
	return uris
}

// nextUpdate is the URI of the next notifications/resources/updated on the stream
// within d, checked to carry the stream's subscription id; ok is false when none came.
func (l *modernListen) nextUpdate(t *testing.T, d time.Duration) (uri string, ok bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case msg, open := <-l.messages:
			if !open {
				return "", false
			}
			if msg["method"] != string(mcp.MethodNotificationResourceUpdated) {
				continue
			}
			params, _ := msg["params"].(map[string]any)
			meta, _ := params["_meta"].(map[string]any)
			if id, _ := meta[mcp.MetaKeySubscriptionID].(float64); int(id) != l.id {
				t.Errorf("an update on listen stream %d carries subscription id %v", l.id, meta[mcp.MetaKeySubscriptionID])
			}
			uri, _ = params["uri"].(string)
			return uri, true
		case <-deadline:
			return "", false
		}
	}
}

// TestGatewayRelaysListenSubscriptions: a client of protocol 2026-07-28 opens
// subscriptions/listen through a gateway (the real adapter binary, stateful and
// stateless) for a resource of a remote that offers subscriptions and for a URI no
// import serves. The acknowledgement names the first only, the stream stays open, and
// an update the remote sends arrives on it tagged with the request's id. A second
// listen for the same URI shares the one subscription at the remote and keeps
// mcp-go's part of the acknowledgement (toolsListChanged); closing the first leaves
// the second its updates, and closing the last ends the subscription at the remote.
func TestGatewayRelaysListenSubscriptions(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		name := "stateful"
		if stateless {
			name = "stateless"
		}
		t.Run(name, func(t *testing.T) { testListenSubscriptions(t, stateless) })
	}
}

func testListenSubscriptions(t *testing.T, stateless bool) {
	ctx := testkit.Context(t, gatewayTimeout)
	remote := startSubscribableRemote(t)
	gw, url := startGatewayOf(t, ctx, remote, stateless)
	const unserved = "test://nobody/serves/this"

	first := openListen(t, ctx, url, 7, map[string]any{"resourceSubscriptions": []string{subscribedDoc, unserved}})
	if got := first.acknowledgedURIs(); !slices.Equal(got, []string{subscribedDoc}) {
		t.Fatalf("the acknowledgement names %v, want [%s] (not the URI no import serves)\n%v\n%s", got, subscribedDoc, first.ack, gw.Logs())
	}
	if n, _ := remote.counts(subscribedDoc); n != 1 {
		t.Errorf("the remote got %d subscribes of %s, want 1", n, subscribedDoc)
	}
	if n := remote.update(subscribedDoc); n != 1 {
		t.Fatalf("the remote has %d subscribers of %s, want the gateway's one session", n, subscribedDoc)
	}
	if uri, ok := first.nextUpdate(t, 5*time.Second); !ok || uri != subscribedDoc {
		t.Fatalf("listen stream 7: got update %q (received %v), want %s\n%s", uri, ok, subscribedDoc, gw.Logs())
	}

	second := openListen(t, ctx, url, 8, map[string]any{"toolsListChanged": true, "resourceSubscriptions": []string{subscribedDoc}})
	if got := second.acknowledgedURIs(); !slices.Equal(got, []string{subscribedDoc}) {
		t.Errorf("the second acknowledgement names %v, want [%s]", got, subscribedDoc)
	}
	if got := second.acknowledged()["toolsListChanged"]; got != true {
		t.Errorf("the second acknowledgement's toolsListChanged is %v, want mcp-go's true kept: %v", got, second.ack)
	}
	if n, _ := remote.counts(subscribedDoc); n != 1 {
		t.Errorf("two listen streams on %s made %d subscribes at the remote, want 1", subscribedDoc, n)
	}
	remote.update(subscribedDoc)
	for _, l := range []*modernListen{first, second} {
		if uri, ok := l.nextUpdate(t, 5*time.Second); !ok || uri != subscribedDoc {
			t.Fatalf("listen stream %d: got update %q (received %v), want %s", l.id, uri, ok, subscribedDoc)
		}
	}

	first.close()
	remote.update(subscribedDoc)
	if uri, ok := second.nextUpdate(t, 5*time.Second); !ok || uri != subscribedDoc {
		t.Fatalf("listen stream 8: got update %q (received %v) after stream 7 closed", uri, ok)
	}
	if _, n := remote.counts(subscribedDoc); n != 0 {
		t.Errorf("the remote got %d unsubscribes of %s while listen stream 8 still holds it", n, subscribedDoc)
	}

	second.close()
	testkit.EventuallyTrue(t, gatewayTimeout, "the remote to be unsubscribed after the last listen stream closed", func() bool {
		_, n := remote.counts(subscribedDoc)
		return n == 1
	})
	if n := remote.update(subscribedDoc); n != 0 {
		t.Errorf("the remote still has %d subscribers of %s", n, subscribedDoc)
	}
	if n, _ := remote.counts(subscribedDoc); n != 1 {
		t.Errorf("the remote got %d subscribes of %s in all, want 1", n, subscribedDoc)
	}
}
