package stdioproxy

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// TestConcurrentClientsIDsRewritten: 20 clients send 5 requests each, all with the same
// id 1, answered out of order by a slow child. Each client gets its own answer back
// with id 1, and the child saw 100 distinct ids.
func TestConcurrentClientsIDsRewritten(t *testing.T) {
	tb := startBridge(t, fakeServerArgv("serve"), Options{})
	tb.waitRunning(t)

	const clients, perClient = 20, 5
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perClient {
				tag := fmt.Sprintf("client-%d-call-%d", c, i)
				a := post(t, tb.url, request(1, "slow", map[string]any{"ms": rand.IntN(30), "tag": tag}))
				if string(a.ID) != "1" {
					t.Errorf("%s: answer id %s, want the client's own 1", tag, a.ID)
				}
				params, seenID := echoOf(t, a)
				if params["tag"] != tag {
					t.Errorf("%s got the answer of %v", tag, params["tag"])
				}
				mu.Lock()
				if seen[string(seenID)] {
					t.Errorf("the child saw id %s twice", seenID)
				}
				seen[string(seenID)] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != clients*perClient {
		t.Errorf("the child saw %d distinct ids, want %d", len(seen), clients*perClient)
	}
	if p := tb.Stats().Pending; p != 0 {
		t.Errorf("%d requests still pending", p)
	}
}

// TestIDsPassThroughExactly: string and number ids come back byte for byte, and the rest
// of the answer is the child's line unchanged.
func TestIDsPassThroughExactly(t *testing.T) {
	tb := startBridge(t, fakeServerArgv("serve"), Options{})
	tb.waitRunning(t)
	for _, id := range []string{`"abc"`, `"1"`, `-7`, `12345678901234`, `"é \"quoted\" }{"`} {
		body := `{"jsonrpc":"2.0","method":"echo","params":{"k":"<&>"},"id":` + id + `}`
		a := post(t, tb.url, body)
		if string(a.ID) != id {
			t.Errorf("id %s came back as %s", id, a.ID)
		}
		if ct := a.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		if !strings.Contains(string(a.Raw), `"params":{"k":"<&>"}`) {
			t.Errorf("the answer was re-encoded: %s", a.Raw)
		}
	}
}

// TestNotifications: a client notification reaches the child and is answered 202; a
// notifications/cancelled is pointed at the bridge's id of the request it names.
func TestNotifications(t *testing.T) {
	tb := startBridge(t, fakeServerArgv("serve"), Options{})
	tb.waitRunning(t)

	a := post(t, tb.url, notification("notifications/initialized", nil))
	if a.Status != http.StatusAccepted || len(a.Raw) != 0 {
		t.Fatalf("notification: HTTP %d %q, want 202 and no body", a.Status, a.Raw)
	}

	// A client cancels in the session the bridge gave it at initialize.
	session := initializeSession(t, tb, "client")
	slow := make(chan rpcAnswer, 1)
	go func() {
		slow <- post(t, tb.url, request("mine", "slow", map[string]any{"ms": 20000}), HeaderSessionID, session)
	}()
	testkit.EventuallyTrue(t, 5*time.Second, "the slow request to be pending", func() bool { return tb.Stats().Pending == 1 })
	if a := post(t, tb.url, notification("notifications/cancelled", map[string]any{"requestId": "mine", "reason": "changed my mind"}), HeaderSessionID, session); a.Status != http.StatusAccepted {
		t.Fatalf("cancel: HTTP %d %s", a.Status, a.Raw)
	}
	// A cancel naming no waiting request is dropped, not sent.
	post(t, tb.url, notification("notifications/cancelled", map[string]any{"requestId": "nobody"}), HeaderSessionID, session)
	// The fake answers a slow request as soon as it is cancelled: that it answers at all
	// shows the cancellation carried the bridge's id.
	slowAnswer := testkit.Receive(t, testTimeout, "the cancelled request's answer (the cancellation reaching the child with the right id)", slow)
	_, slowID := echoOf(t, slowAnswer)

	var methods []string
	var cancelled []map[string]any
	for _, l := range seenLines(t, tb.url) {
		methods = append(methods, fmt.Sprint(l["method"]))
		if l["method"] == "notifications/cancelled" {
			cancelled = append(cancelled, l["params"].(map[string]any))
		}
	}
	if len(methods) == 0 || methods[0] != "notifications/initialized" {
		t.Errorf("the child received %v, want notifications/initialized first", methods)
	}
	if len(cancelled) != 1 {
		t.Fatalf("the child received %d cancellations, want 1: %v", len(cancelled), cancelled)
	}
	got, _ := json.Marshal(cancelled[0]["requestId"])
	if string(got) != string(slowID) || cancelled[0]["reason"] != "changed my mind" {
		t.Errorf("cancellation %v, want requestId %s (the bridge's id of the request) and the reason", cancelled[0], slowID)
	}
}

// TestServerMessagesNotRelayed: the child's notification is dropped (logged at V(1)),
// its roots/list request is refused with "method not found", its ping answered, and
// the client's request is answered all the same.
func TestServerMessagesNotRelayed(t *testing.T) {
	tb := startBridge(t, fakeServerArgv("serve"), Options{})
	tb.waitRunning(t)
	a := post(t, tb.url, request(7, "chatty", nil))
	if _, id := echoOf(t, a); id == nil {
		t.Fatal("no answer to chatty")
	}
	var answers map[string]map[string]any
	testkit.EventuallyTrue(t, 5*time.Second, "the bridge's answers to the child's requests", func() bool {
		answers = map[string]map[string]any{}
		for _, l := range seenLines(t, tb.url) {
			if id, ok := l["id"].(string); ok {
				answers[id] = l
			}
		}
		return len(answers) == 2
	})
	if e, ok := answers["s1"]["error"].(map[string]any); !ok || e["code"] != float64(codeMethodNotFound) ||
		!strings.Contains(fmt.Sprint(e["message"]), "does not relay server-to-client requests (roots/list)") {
		t.Errorf("answer to roots/list = %v, want a method-not-found error naming it", answers["s1"])
	}
	if r, ok := answers["s2"]["result"].(map[string]any); !ok || len(r) != 0 {
		t.Errorf("answer to ping = %v, want an empty result", answers["s2"])
	}
	if len(tb.logs.withMsg("dropped a notification of the stdio server: the bridge relays no server-to-client messages")) != 1 {
		t.Errorf("the dropped notification was not logged at V(1)")
	}
}

// TestRefusedMessages: batches, bad JSON, GET, and DNS rebinding attempts.
func TestRefusedMessages(t *testing.T) {
	tb := startBridge(t, fakeServerArgv("serve"), Options{MaxMessageBytes: 1 << 10})
	tb.waitRunning(t)
	for _, tc := range []struct {
		name, body string
		headers    []string
		status     int
		code       int
		message    string
	}{
		{"batch", `[` + request(1, "echo", nil) + `]`, nil, 400, codeInvalidRequest, "batches are not supported"},
		{"not JSON", `{"jsonrpc":"2.0",`, nil, 400, codeParseError, "not valid JSON"},
		{"not an object", `"hello"`, nil, 400, codeInvalidRequest, "is a JSON object"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"echo"}`, nil, 400, codeInvalidRequest, "string or a number"},
		{"too large", request(1, "echo", strings.Repeat("x", 2<<10)), nil, 413, codeInvalidRequest, "larger than the bridge's limit"},
		{"rebinding host", request(1, "initialize", nil), []string{"Host", "evil.example.com"}, 403, 0, ""},
		{"rebinding origin", request(1, "initialize", nil), []string{"Origin", "http://evil.example.com"}, 403, 0, ""},
		{"localhost is fine", request(1, "initialize", nil), []string{"Host", "localhost:1234", "Origin", "http://localhost:1234"}, 200, 0, ""},
		{"client response dropped", `{"jsonrpc":"2.0","id":"s1","result":{}}`, nil, 202, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, tb.url, tc.body, tc.headers...)
			if a.Status != tc.status {
				t.Fatalf("HTTP %d %s, want %d", a.Status, a.Raw, tc.status)
			}
			if tc.code == 0 {
				return
			}
			if a.Error == nil || a.Error.Code != tc.code || !strings.Contains(a.Error.Message, tc.message) {
				t.Errorf("answer %s, want error %d containing %q", a.Raw, tc.code, tc.message)
			}
		})
	}
	resp, err := http.Get(tb.url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
		t.Errorf("GET /mcp: %d Allow=%q, want 405 Allow=POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestOversizedAnswer: an answer over the limit fails exactly its request with a
// JSON-RPC error (the id is found at the end of the streamed line), and the stream
// carries on; one just under the limit passes whole.
func TestOversizedAnswer(t *testing.T) {
	const limit = 64 << 10
	tb := startBridge(t, fakeServerArgv("serve"), Options{MaxMessageBytes: limit})
	tb.waitRunning(t)

	a := post(t, tb.url, request("big", "big", map[string]any{"bytes": 300 << 10}))
	if a.Error == nil || a.Error.Code != codeRemoteError || string(a.ID) != `"big"` ||
		!strings.HasPrefix(a.Error.Message, "mcp_remote_error: the stdio server's answer is ") ||
		!strings.Contains(a.Error.Message, fmt.Sprintf("more than the bridge's limit of %d bytes", limit)) {
		t.Fatalf("oversized answer: %s", a.Raw)
	}
	a = post(t, tb.url, request("fits", "big", map[string]any{"bytes": limit - 100}))
	var r struct{ Data string }
	if err := json.Unmarshal(a.Result, &r); err != nil || len(r.Data) != limit-100 {
		t.Fatalf("answer under the limit: %v (%d bytes of data)", err, len(r.Data))
	}
	if _, id := echoOf(t, post(t, tb.url, request(3, "echo", nil))); id == nil {
		t.Fatal("no echo after the oversized answer")
	}
}

// TestRequestTimeout: no answer within RequestTimeout → a JSON-RPC error, and the child
// is told to cancel the request.
func TestRequestTimeout(t *testing.T) {
	tb := startBridge(t, fakeServerArgv("serve"), Options{RequestTimeout: 300 * time.Millisecond})
	tb.waitRunning(t)
	start := time.Now()
	a := post(t, tb.url, request(9, "slow", map[string]any{"ms": 5000}))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the timeout took %s", took)
	}
	if a.Status != http.StatusOK || a.Error == nil || a.Error.Code != codeRemoteError || string(a.ID) != "9" ||
		a.Error.Message != "mcp_remote_error: stdio server did not answer within 300ms" {
		t.Fatalf("timed out request: HTTP %d %s", a.Status, a.Raw)
	}
	var cancels int
	for _, l := range seenLines(t, tb.url) {
		if l["method"] == "notifications/cancelled" {
			cancels++
		}
	}
	if cancels != 1 {
		t.Errorf("the child got %d cancellations, want 1", cancels)
	}
}
