package stdioproxy

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// initializeSession sends initialize as a client would and returns the session id the
// bridge answered with ("" when it gave none).
func initializeSession(t *testing.T, tb *testBridge, id string) string {
	t.Helper()
	a := post(t, tb.url, request(id, "initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": id, "version": "1"},
	}))
	if a.Status != http.StatusOK {
		t.Fatalf("initialize: HTTP %d %s", a.Status, a.Raw)
	}
	return a.Header.Get(HeaderSessionID)
}

// cancelsSeen counts the notifications/cancelled the child received.
func cancelsSeen(t *testing.T, tb *testBridge) int {
	t.Helper()
	n := 0
	for _, l := range seenLines(t, tb.url) {
		if l["method"] == "notifications/cancelled" {
			n++
		}
	}
	return n
}

// Client ids are the clients' own: two clients may both use "slow-1". A
// notifications/cancelled from client B naming B's guess of A's id must not cancel A's
// request; only A, in the session the bridge gave it, can (R8).
func TestAClientCannotCancelAnotherClientsRequest(t *testing.T) {
	tb := startBridge(t, fakeServerArgv("serve"), Options{})
	tb.waitRunning(t)
	sessionA := initializeSession(t, tb, "a")
	sessionB := initializeSession(t, tb, "b")
	if sessionA == "" || sessionA == sessionB {
		t.Errorf("sessions A %q and B %q: the bridge must give each client its own", sessionA, sessionB)
	}

	slow := make(chan rpcAnswer, 1)
	go func() {
		slow <- post(t, tb.url, request("slow-1", "slow", map[string]any{"ms": 20000}), HeaderSessionID, sessionA)
	}()
	testkit.EventuallyTrue(t, 5*time.Second, "A's request to be pending", func() bool { return tb.Stats().Pending == 1 })

	cancel := notification("notifications/cancelled", map[string]any{"requestId": "slow-1", "reason": "not yours"})
	for _, headers := range [][]string{
		{HeaderSessionID, sessionB}, // another client's session
		nil,                         // no session
		{HeaderSessionID, "forged"}, // a session the bridge never gave out
	} {
		if a := post(t, tb.url, cancel, headers...); a.Status != http.StatusAccepted {
			t.Fatalf("cancel %v: HTTP %d %s", headers, a.Status, a.Raw)
		}
	}
	// The child reads its stdin in order: by its answer to "seen", it has read every
	// cancellation the bridge passed on before.
	if n := cancelsSeen(t, tb); n != 0 {
		t.Fatalf("the child received %d cancellations from clients that did not send the request", n)
	}
	select {
	case a := <-slow:
		t.Fatalf("another client cancelled A's request: %s", a.Raw)
	default:
	}

	// A itself can.
	if a := post(t, tb.url, cancel, HeaderSessionID, sessionA); a.Status != http.StatusAccepted {
		t.Fatalf("A's cancel: HTTP %d %s", a.Status, a.Raw)
	}
	testkit.Receive(t, testTimeout, "A's request to end on its own cancellation", slow)
}

// A client that closes its request (mcp-go's way of cancelling over HTTP) cancels it in
// the child too, and only that one.
func TestAClientThatLeavesCancelsItsOwnRequest(t *testing.T) {
	tb := startBridge(t, fakeServerArgv("serve"), Options{})
	tb.waitRunning(t)
	other := make(chan rpcAnswer, 1)
	go func() { other <- post(t, tb.url, request("x", "slow", map[string]any{"ms": 3000})) }()
	testkit.EventuallyTrue(t, 5*time.Second, "the other request to be pending", func() bool { return tb.Stats().Pending == 1 })

	leaving := &http.Client{Timeout: 300 * time.Millisecond}
	body := request("x", "slow", map[string]any{"ms": 20000})
	resp, err := leaving.Post(tb.url, "application/json", strings.NewReader(body))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the slow request was answered: HTTP %d", resp.StatusCode)
	}
	testkit.EventuallyTrue(t, 5*time.Second, "the left request to be cancelled in the child", func() bool { return cancelsSeen(t, tb) == 1 })
	if a := testkit.Receive(t, testTimeout, "the other request's answer", other); a.Status != http.StatusOK || a.Error != nil {
		t.Fatalf("the other request: HTTP %d %s", a.Status, a.Raw)
	}
	// Had the other request been cancelled with it, the child would have read that
	// cancellation before answering it.
	if n := cancelsSeen(t, tb); n != 1 {
		t.Fatalf("the child received %d cancellations, want the left request's only", n)
	}
}

func lookupEnv(name string) (string, bool) { return os.LookupEnv(name) }
