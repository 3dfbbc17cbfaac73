package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// One caller holds at most a quarter of the calls waiting for their callers' answers:
// past it its next is refused saying so, another caller's still waits, and one of its
// own ending frees a place.
func TestOneCallerHoldsAtMostAQuarterOfTheWaitingCalls(t *testing.T) {
	var w waitingCalls
	tool := &Tool{Name: "ask"}
	quarter := maxWaitingCalls / 4
	var states []string
	for i := range quarter {
		state, why := w.put(&waitingCall{tool: tool, share: "greedy"})
		if why != "" {
			t.Fatalf("greedy's waiting call %d of %d refused: %s", i+1, quarter, why)
		}
		states = append(states, state)
	}
	if _, why := w.put(&waitingCall{tool: tool, share: "greedy"}); !strings.Contains(why, "the most one caller may") {
		t.Fatalf("greedy's waiting call %d: refused %q, want a refusal naming its share", quarter+1, why)
	}
	if _, why := w.put(&waitingCall{tool: tool, share: "modest"}); why != "" {
		t.Errorf("another caller's waiting call refused: %s", why)
	}
	if w.take(states[0], tool, "") == nil {
		t.Fatal("a waiting call could not be taken")
	}
	if _, why := w.put(&waitingCall{tool: tool, share: "greedy"}); why != "" {
		t.Errorf("greedy's waiting call after one of its own was answered: refused %s", why)
	}
}

// One caller takes part in at most a quarter of the subscriptions a gateway holds at
// its remotes, over all its sessions and listen streams: past it a new one is refused
// saying so, another caller still subscribes (also to what the first holds), and an
// unsubscription frees a place.
func TestOneCallerHoldsAtMostAQuarterOfTheSubscriptions(t *testing.T) {
	remote := startSubscribableRemote(t, true)
	subs, pool := newTestSubscriptions(t, newDeliveries())
	subs.maxUpstream = 8
	it := linkedItem(t, pool, remote.url, "test://{id}", "")
	greedy, modest := WithCallerKey(context.Background(), "greedy"), WithCallerKey(context.Background(), "modest")
	for _, s := range []string{"g1", "g2", "m1"} {
		subs.SessionStarted(s)
	}
	stream := subs.OpenStream(func(string) error { return nil })
	for _, step := range []struct {
		ctx     context.Context
		session string
		uri     string
	}{{greedy, "g1", "test://1"}, {greedy, "g2", "test://2"}, {greedy, "g2", "test://1"}} {
		if err := subs.Subscribe(step.ctx, step.session, it, step.uri); err != nil {
			t.Fatalf("%s: %s: %v", step.session, step.uri, err)
		}
	}
	var refused *SubscriptionError
	if err := subs.Subscribe(greedy, "g1", it, "test://3"); !errors.As(err, &refused) || !strings.Contains(refused.Message, "the most one caller may") {
		t.Errorf("greedy's third subscription at the remote over a share of 2: %v, want a refusal naming its share", err)
	}
	if err := subs.SubscribeStream(greedy, stream, it, "test://3"); !errors.As(err, &refused) {
		t.Errorf("greedy's third subscription, on a listen stream: %v, want a refusal", err)
	}
	for _, uri := range []string{"test://1", "test://3"} {
		if err := subs.Subscribe(modest, "m1", it, uri); err != nil {
			t.Errorf("another caller's subscription to %s: %v", uri, err)
		}
	}
	subs.Unsubscribe("g1", "test://1")
	subs.Unsubscribe("g2", "test://1")
	if err := subs.Subscribe(greedy, "g1", it, "test://3"); err != nil {
		t.Errorf("greedy's subscription after it left one: %v", err)
	}
}
