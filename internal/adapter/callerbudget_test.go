package adapter

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// perCallerServer is a stateless server (no session to open first) whose callers may
// make burst requests, then one every 10 s; its one tool counts the calls that run.
func perCallerServer(t *testing.T, burst int) (*running, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		_, _ = w.Write([]byte("done"))
	}))
	t.Cleanup(backend.Close)
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, httpTool("fetch", objectSchema, backend.URL, 10*time.Second, 1024))
	cfg.Limits = &adapterconfig.Limits{ConcurrentCalls: 64, QueueLength: 64, QueueWait: adapterconfig.Duration{Duration: time.Second},
		PerCaller: &adapterconfig.CallerRate{CallsPerSecond: 0.1, Burst: burst}}
	return serve(t, cfg), &calls
}

var protocolHeaders = map[string]string{"Mcp-Protocol-Version": protocol20250618}

// A tools/call whose method is spelled with JSON escapes ("tools\/call", "\u0074ools/call")
// or a case variant of its key is still the caller's call: past the burst, it gets 429
// and never runs.
func TestEscapedToolsCallIsRateLimited(t *testing.T) {
	r, calls := perCallerServer(t, 2)
	for i := range 2 {
		reply := postRPC(t, r.baseURL+adapterconfig.PathMCP, protocolHeaders, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fetch","arguments":{}}}`, i))
		if reply.status != http.StatusOK {
			t.Fatalf("call %d within the burst = %d %s", i, reply.status, reply.body)
		}
	}
	spellings := []string{
		`{"jsonrpc":"2.0","id":%d,"method":"tools\/call","params":{"name":"fetch","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":%d,"method":"\u0074ools\u002fcall","params":{"name":"fetch","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":%d,"Method":"tools\/call","params":{"name":"fetch","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":%d,"method":"tools/list","method":"tools\/call","params":{"name":"fetch","arguments":{}}}`,
	}
	limited := 0
	for i := range 10 {
		reply := postRPC(t, r.baseURL+adapterconfig.PathMCP, protocolHeaders, fmt.Sprintf(spellings[i%len(spellings)], 10+i))
		if reply.status == http.StatusTooManyRequests && strings.Contains(string(reply.body), fmt.Sprintf(`"id":%d`, 10+i)) {
			limited++
		} else {
			t.Logf("%s answered %d %s", fmt.Sprintf(spellings[i%len(spellings)], 10+i), reply.status, reply.body)
		}
	}
	if limited != 10 {
		t.Errorf("%d of 10 escaped calls past the burst got 429, want all 10", limited)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the backend saw %d calls, want the 2 of the burst", n)
	}
}

// One budget per caller, charged one unit per request of any method: past it, listing,
// reading, getting, completing and listening are refused with 429 as calls are; a
// notification is not a request and is not charged.
func TestCallerPastItsBudgetIsRefusedOnEveryMethod(t *testing.T) {
	r, _ := perCallerServer(t, 2)
	for i := range 2 {
		reply := postRPC(t, r.baseURL+adapterconfig.PathMCP, protocolHeaders, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i))
		if reply.status != http.StatusOK {
			t.Fatalf("tools/list %d within the burst = %d %s", i, reply.status, reply.body)
		}
	}
	if reply := postRPC(t, r.baseURL+adapterconfig.PathMCP, protocolHeaders, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); reply.status == http.StatusTooManyRequests {
		t.Errorf("a notification was charged: %d %s", reply.status, reply.body)
	}
	for i, method := range []string{"tools/list", "tools/call", "resources/list", "resources/read", "resources/templates/list",
		"prompts/list", "prompts/get", "completion/complete", "resources/subscribe", "subscriptions/listen", "ping", "initialize"} {
		id := 100 + i
		reply := postRPC(t, r.baseURL+adapterconfig.PathMCP, protocolHeaders, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`, id, method))
		if reply.status != http.StatusTooManyRequests || reply.header.Get("Retry-After") == "" ||
			!strings.Contains(string(reply.body), fmt.Sprintf(`"id":%d`, id)) || !strings.Contains(string(reply.body), "rate_limited:") {
			t.Errorf("%s past the budget = %d %s, want 429 rate_limited", method, reply.status, reply.body)
		}
	}
}

// gateRequest serves one POST through the gate from addr, as the MCP handler next.
func gateRequest(h http.Handler, addr, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, adapterconfig.PathMCP, strings.NewReader(body))
	r.RemoteAddr = addr
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// answered is an MCP handler that answers every request at once.
var answered = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) })

// Unauthenticated callers are one caller per IPv6 /64 (a host's addresses rotate
// within it) and per IPv4 address: two addresses of one /64 share a bucket, another
// /64 or IPv4 address has its own.
func TestIPv6CallersOfOneSlash64ShareABucket(t *testing.T) {
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x"))
	cfg.Limits = &adapterconfig.Limits{ConcurrentCalls: 64, QueueLength: 64, QueueWait: adapterconfig.Duration{Duration: time.Second},
		PerCaller: &adapterconfig.CallerRate{CallsPerSecond: 0.1, Burst: 1}}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	h := s.gateMCP(answered)
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, step := range []struct {
		addr string
		want int
	}{
		{"[2001:db8:1:2::1]:4000", http.StatusOK},
		{"[2001:db8:1:2:ffff:ffff:ffff:fffe]:4001", http.StatusTooManyRequests},
		{"[2001:db8:1:3::1]:4000", http.StatusOK},
		{"192.0.2.1:4000", http.StatusOK},
		{"192.0.2.2:4000", http.StatusOK},
		{"192.0.2.1:4001", http.StatusTooManyRequests},
	} {
		if w := gateRequest(h, step.addr, list); w.Code != step.want {
			t.Errorf("tools/list from %s = %d, want %d", step.addr, w.Code, step.want)
		}
	}
}

// A caller's refusals are logged once per 10 s however many there are, with the
// caller's key and how many were refused since the last line.
func TestRateLimitRefusalsAreLoggedOncePerCallerPer10s(t *testing.T) {
	logs := &logBuffer{}
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x"))
	cfg.Limits = &adapterconfig.Limits{ConcurrentCalls: 64, QueueLength: 64, QueueWait: adapterconfig.Duration{Duration: time.Second},
		PerCaller: &adapterconfig.CallerRate{CallsPerSecond: 0.1, Burst: 1}}
	s, err := NewServer(cfg, WithLogger(funcr.New(logs.add, funcr.Options{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	h := s.gateMCP(answered)
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for range 20 {
		gateRequest(h, "192.0.2.1:4000", list)
		gateRequest(h, "192.0.2.2:4000", list)
	}
	lines := logs.matching("refused")
	if len(lines) != 2 {
		t.Fatalf("logged %d refusal lines for 2 callers refused 19 times each, want 2 (one per caller):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, addr := range []string{"192.0.2.1", "192.0.2.2"} {
		if len(logs.matching(addr)) != 1 {
			t.Errorf("no single refusal line names %s:\n%s", addr, strings.Join(lines, "\n"))
		}
	}
}

// One caller holds at most its share of the listen streams a pod keeps open; another
// caller still gets one.
func TestListenStreamsOfOneCallerAreBoundedToItsShare(t *testing.T) {
	s, err := NewServer(configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x")), withListenStreams(8))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	probe := &gateProbe{entered: make(chan context.Context, 8), release: make(chan struct{})}
	h := s.gateMCP(probe)
	t.Cleanup(func() { close(probe.release) })
	const listen = `{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{}}`
	for i := range 2 { // a quarter of 8
		go gateRequest(h, "192.0.2.1:4000", listen)
		testkit.Receive(t, testTimeout, fmt.Sprintf("listen stream %d to open", i), probe.entered)
	}
	third := make(chan *httptest.ResponseRecorder, 1)
	go func() { third <- gateRequest(h, "192.0.2.1:4001", listen) }()
	var w *httptest.ResponseRecorder
	select {
	case w = <-third:
	case <-probe.entered:
		t.Fatal("a third listen stream of one caller opened, past its share of 2")
	}
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"id":3`) || !strings.Contains(w.Body.String(), "at most 2") {
		t.Errorf("a third listen stream of one caller = %d %s, want 429 saying at most 2", w.Code, w.Body.String())
	}
	go gateRequest(h, "192.0.2.2:4000", listen)
	testkit.Receive(t, testTimeout, "another caller's listen stream to open", probe.entered)
}

// costlyRule costs 61,711 CEL units per evaluation whatever the claims (estimated at
// most 91,411, so it compiles).
func costlyRule() string {
	nums := make([]string, 100)
	for i := range nums {
		nums[i] = fmt.Sprint(i)
	}
	l := "[" + strings.Join(nums, ",") + "]"
	return l + ".all(i, " + l + ".all(j, i != j || i == j))"
}

// A tools/list spends at most the per-request CEL budget on the rules: past it, the
// tools left are not listed (fail closed), so 40 tools × a costly rule cost one
// request 17 evaluations, not 40.
func TestToolsListSpendsABoundedCELBudget(t *testing.T) {
	key := newClusterKey(t, "k1")
	cfg := identityConfig(t, key, adapterconfig.AuthorizationRule{Tools: []string{"*"}, When: costlyRule()})
	cfg.Tools = nil
	for i := range 40 {
		cfg.Tools = append(cfg.Tools, templateTool(fmt.Sprintf("tool_%02d", i), objectSchema, "x"))
	}
	r := serve(t, cfg)
	c := connect(t, r.baseURL, protocol20250618, bearerHeader(key.token(t, "agents", "a", "room")))
	if got, want := len(listNames(t, c)), admission.ListCELBudget/61711+1; got != want {
		t.Errorf("tools/list listed %d of 40 tools, want the %d the CEL budget of one request pays for", got, want)
	}
}

// limits.callerShare sets each caller's part of the shared pools; unset or out of
// (0, 1], a quarter.
func TestCallerShareIsConfigurable(t *testing.T) {
	for _, tt := range []struct {
		limits *adapterconfig.Limits
		want   int
	}{
		{nil, 256},
		{&adapterconfig.Limits{}, 256},
		{&adapterconfig.Limits{CallerShare: 0.5}, 512},
		{&adapterconfig.Limits{CallerShare: 1}, 1024},
		{&adapterconfig.Limits{CallerShare: 2}, 256},
	} {
		if got := admission.NewStreamShares(admission.MaxListenStreams, admission.CallerShareOf(tt.limits)).PerCaller(); got != tt.want {
			t.Errorf("limits %+v: one caller may hold %d listen streams, want %d", tt.limits, got, tt.want)
		}
	}
}

// Every rule decision of one request spends that request's CEL budget, not only the
// list hooks': once it is spent, a rule with an expression no longer allows, so a
// request that judges many items (skills/list) is bounded too.
func TestRuleDecisionsOfARequestShareItsCELBudget(t *testing.T) {
	key := newClusterKey(t, "k1")
	s, err := NewServer(identityConfig(t, key, adapterconfig.AuthorizationRule{Skills: []string{"*"}, When: costlyRule()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := admission.WithCELBudget(access.WithCaller(context.Background(), &access.Caller{Kind: adapterconfig.IssuerServiceAccount, Subject: "a", ServiceAccount: "agents/a"}))
	allowed := 0
	for i := range 40 {
		if s.filter.Allows(ctx, access.ItemSkill, fmt.Sprintf("skill-%d", i)) {
			allowed++
		}
	}
	if want := admission.ListCELBudget/61711 + 1; allowed != want {
		t.Errorf("one request was allowed %d of 40 skills, want the %d its CEL budget pays for", allowed, want)
	}
}
