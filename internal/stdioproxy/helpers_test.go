package stdioproxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/cantus-dev/cantus-operator/internal/stdioproxy/proxytest"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// testTimeout bounds each wait of a test on the bridge or its child.
const testTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	proxytest.Main(m, map[string]func([]string) int{proxytest.FakeServerName: proxytest.FakeServer})
}

var fakeServerArgv = proxytest.FakeServerArgv

// ---- harness ----

// logSink collects JSON log entries.
type logSink struct {
	mu      sync.Mutex
	entries []map[string]any
}

func (s *logSink) logger() logr.Logger {
	return funcr.NewJSON(func(obj string) {
		var m map[string]any
		if err := json.Unmarshal([]byte(obj), &m); err != nil {
			m = map[string]any{"msg": obj}
		}
		s.mu.Lock()
		s.entries = append(s.entries, m)
		s.mu.Unlock()
	}, funcr.Options{Verbosity: 1})
}

func (s *logSink) withMsg(msg string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, e := range s.entries {
		if e["msg"] == msg {
			out = append(out, e)
		}
	}
	return out
}

type testBridge struct {
	*Bridge
	url  string // the MCP endpoint
	base string
	logs *logSink
	stop func() // cancels Run and waits for it
}

// startBridge runs a bridge of argv with opts (Logger is replaced by a collecting one)
// behind an httptest server on 127.0.0.1. before, when set, runs before Run starts.
func startBridge(t *testing.T, argv []string, opts Options, before ...func(*Bridge)) *testBridge {
	t.Helper()
	logs := &logSink{}
	opts.Logger = logs.logger()
	if opts.StopGrace == 0 {
		opts.StopGrace = time.Second
	}
	b, err := New(argv, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = b.Run(ctx); close(done) }()
	srv := httptest.NewServer(b.Handler())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			testkit.Receive(t, 15*time.Second, "the bridge to stop", done)
		})
	}
	t.Cleanup(func() {
		srv.Close()
		stop()
	})
	return &testBridge{Bridge: b, url: srv.URL + PathMCP, base: srv.URL, logs: logs, stop: stop}
}

func (tb *testBridge) waitRunning(t *testing.T) {
	t.Helper()
	testkit.EventuallyTrue(t, 10*time.Second, "the stdio server to run", func() bool { ok, _ := tb.Ready(); return ok })
}

// The client side of the tests, shared with the runtimes' tests.
type rpcAnswer = proxytest.Answer

var (
	post         = proxytest.Post
	request      = proxytest.Request
	notification = proxytest.Notification
)

// echoOf decodes the fake server's echo result.
func echoOf(t *testing.T, a rpcAnswer) (params map[string]any, seenID json.RawMessage) {
	t.Helper()
	if a.Error != nil || a.Status != http.StatusOK {
		t.Fatalf("want a result, got HTTP %d %s", a.Status, a.Raw)
	}
	var r struct {
		Params map[string]any  `json:"params"`
		SeenID json.RawMessage `json:"seenID"`
	}
	if err := json.Unmarshal(a.Result, &r); err != nil {
		t.Fatalf("echo result: %v\n%s", err, a.Raw)
	}
	return r.Params, r.SeenID
}

// seenLines returns what the fake server received besides requests.
func seenLines(t *testing.T, url string) []map[string]any {
	t.Helper()
	a := post(t, url, request("seen", "seen", nil))
	var r struct {
		Lines []map[string]any `json:"lines"`
	}
	if err := json.Unmarshal(a.Result, &r); err != nil {
		t.Fatalf("seen: %v\n%s", err, a.Raw)
	}
	return r.Lines
}
