package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// The test binary doubles as a fake stdio MCP server and as a fake adapter (its
// `bridge` subcommand only): TestMain dispatches on the name it was started under, and
// the tests start it through symlinks with those names. No environment variable is
// needed, so it also works under the local runtime's filtered environment.
const (
	fakeServerName  = "fake-mcp-server"
	fakeAdapterName = "fake-adapter"
)

var helperDir string

func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case fakeServerName:
		os.Exit(runFakeServer(os.Args[1:]))
	case fakeAdapterName:
		os.Exit(runFakeAdapter(os.Args[1:]))
	}
	self, err := os.Executable()
	if err == nil {
		helperDir, err = os.MkdirTemp("", "bridge-test-")
	}
	if err == nil {
		err = os.Symlink(self, filepath.Join(helperDir, fakeServerName))
	}
	if err == nil {
		err = os.Symlink(self, filepath.Join(helperDir, fakeAdapterName))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "setting up the helper processes:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(helperDir)
	os.Exit(code)
}

// fakeServerArgv is the command line of the fake stdio MCP server in a mode.
func fakeServerArgv(mode ...string) []string {
	return append([]string{filepath.Join(helperDir, fakeServerName)}, mode...)
}

// ---- the fake stdio MCP server ----

// runFakeServer serves newline-delimited JSON-RPC on stdin/stdout. Modes:
//
//	serve                      answer requests; exit 0 at EOF
//	flaky N FILE               exit 1 at once for the first N starts (counted in FILE), then serve
//	stderr-burst N LONG        write N short stderr lines and one of LONG bytes, then after
//	                           1.1 s one more ("done"), and serve
//	stubborn                   serve, but ignore SIGTERM and EOF on stdin
//
// Methods: initialize; echo (result {"params", "seenID"}); slow {ms} (echo after ms, or
// as soon as a notifications/cancelled names it);
// big {bytes}; crash {code} (exit at once); chatty (send a notification, a roots/list
// request and a ping first); seen (every notification and response received so far);
// pid. Answers carry the id last, as the TypeScript SDK writes them.
func runFakeServer(args []string) int {
	mode := "serve"
	if len(args) > 0 {
		mode = args[0]
	}
	stubborn := false
	switch mode {
	case "serve":
	case "flaky":
		n, _ := strconv.Atoi(args[1])
		data, _ := os.ReadFile(args[2])
		count, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		count++
		_ = os.WriteFile(args[2], []byte(strconv.Itoa(count)), 0o600)
		if count <= n {
			fmt.Fprintf(os.Stderr, "flaky start %d of %d: exiting\n", count, n)
			return 1
		}
	case "stderr-burst":
		n, _ := strconv.Atoi(args[1])
		long, _ := strconv.Atoi(args[2])
		w := bufio.NewWriter(os.Stderr)
		fmt.Fprintln(w, strings.Repeat("L", long))
		for i := range n {
			fmt.Fprintf(w, "line %d\n", i)
		}
		_ = w.Flush()
		go func() {
			time.Sleep(1100 * time.Millisecond)
			fmt.Fprintln(os.Stderr, "done")
		}()
	case "stubborn":
		stubborn = true
		signal.Ignore(syscall.SIGTERM)
	default:
		fmt.Fprintf(os.Stderr, "fake server: unknown mode %q\n", mode)
		return 2
	}

	var out sync.Mutex
	write := func(line string) {
		out.Lock()
		defer out.Unlock()
		_, _ = os.Stdout.WriteString(line + "\n")
	}
	answer := func(id json.RawMessage, result any) {
		var r bytes.Buffer
		enc := json.NewEncoder(&r)
		enc.SetEscapeHTML(false) // so that the tests can see the bridge does not re-encode
		_ = enc.Encode(result)
		write(fmt.Sprintf(`{"jsonrpc":"2.0","result":%s,"id":%s}`, bytes.TrimSpace(r.Bytes()), id))
	}
	var seenMu sync.Mutex
	var seen []json.RawMessage
	slow := map[string]chan struct{}{} // slow requests by id, under seenMu

	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			fmt.Fprintf(os.Stderr, "fake server: bad line %q\n", line)
			continue
		}
		if msg.ID == nil || msg.Method == "" { // a notification or a response
			seenMu.Lock()
			seen = append(seen, line)
			if msg.Method == "notifications/cancelled" {
				var c struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				_ = json.Unmarshal(msg.Params, &c)
				if ch, ok := slow[string(c.RequestID)]; ok {
					close(ch)
					delete(slow, string(c.RequestID))
				}
			}
			seenMu.Unlock()
			continue
		}
		var p struct {
			MS    int `json:"ms"`
			Bytes int `json:"bytes"`
			Code  int `json:"code"`
		}
		_ = json.Unmarshal(msg.Params, &p)
		echo := map[string]any{"params": msg.Params, "seenID": msg.ID}
		switch msg.Method {
		case "initialize":
			answer(msg.ID, map[string]any{
				"protocolVersion": "2025-06-18",
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "fake", "version": "1.0.0"},
			})
		case "echo":
			answer(msg.ID, echo)
		case "slow": // answered after ms, or at once when cancelled
			cancelled := make(chan struct{})
			seenMu.Lock()
			slow[string(msg.ID)] = cancelled
			seenMu.Unlock()
			go func() {
				select {
				case <-time.After(time.Duration(p.MS) * time.Millisecond):
				case <-cancelled:
				}
				answer(msg.ID, echo)
			}()
		case "big":
			answer(msg.ID, map[string]any{"data": strings.Repeat("x", p.Bytes)})
		case "crash":
			os.Exit(p.Code)
		case "chatty":
			write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello"}}`)
			write(`{"jsonrpc":"2.0","id":"s1","method":"roots/list"}`)
			write(`{"jsonrpc":"2.0","id":"s2","method":"ping"}`)
			answer(msg.ID, echo)
		case "seen":
			seenMu.Lock()
			answer(msg.ID, map[string]any{"lines": seen})
			seenMu.Unlock()
		case "pid":
			answer(msg.ID, map[string]any{"pid": os.Getpid()})
		default:
			write(fmt.Sprintf(`{"jsonrpc":"2.0","error":{"code":-32601,"message":"no %s"},"id":%s}`, msg.Method, msg.ID))
		}
	}
	if stubborn {
		select {}
	}
	return 0
}

// ---- the fake adapter: `bridge --host H --port P -- ARGV...` ----

// runFakeAdapter is what cmd/adapter's bridge subcommand does, reduced to what the local
// runtime relies on: listen, print the listening line, serve, stop on SIGTERM.
func runFakeAdapter(args []string) int {
	if len(args) == 0 || args[0] != "bridge" {
		fmt.Fprintln(os.Stderr, "fake adapter: only the bridge subcommand")
		return 2
	}
	fs := flag.NewFlagSet("bridge", flag.ContinueOnError)
	host := fs.String("host", "0.0.0.0", "")
	port := fs.Int("port", 8765, "")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	log := funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) }, funcr.Options{})
	b, err := New(fs.Args(), Options{Logger: log, StopGrace: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	childCtx, stopChild := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = b.Run(childCtx); close(done) }()
	srv := &http.Server{Handler: b.Handler()}
	go func() { _ = srv.Serve(ln) }()
	<-ctx.Done()
	b.Drain()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = srv.Shutdown(shutdown)
	cancel()
	stopChild()
	<-done
	return 0
}

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
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Errorf("the bridge did not stop within 15s")
			}
		})
	}
	t.Cleanup(func() {
		srv.Close()
		stop()
	})
	return &testBridge{Bridge: b, url: srv.URL + PathMCP, base: srv.URL, logs: logs, stop: stop}
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (tb *testBridge) waitRunning(t *testing.T) {
	t.Helper()
	waitFor(t, 10*time.Second, "the stdio server to run", func() bool { ok, _ := tb.Ready(); return ok })
}

// rpcAnswer is a decoded JSON-RPC answer and the HTTP exchange around it.
type rpcAnswer struct {
	status int
	header http.Header
	raw    []byte
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// post sends body to url and decodes a JSON answer (when there is one).
func post(t *testing.T, url, body string, headers ...string) rpcAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		if strings.EqualFold(headers[i], "Host") {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := rpcAnswer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("POST %s: answer is not JSON: %v\n%s", url, err, raw)
		}
	}
	return a
}

func request(id any, method string, params any) string {
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func notification(method string, params any) string {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// echoOf decodes the fake server's echo result.
func echoOf(t *testing.T, a rpcAnswer) (params map[string]any, seenID json.RawMessage) {
	t.Helper()
	if a.Error != nil || a.status != http.StatusOK {
		t.Fatalf("want a result, got HTTP %d %s", a.status, a.raw)
	}
	var r struct {
		Params map[string]any  `json:"params"`
		SeenID json.RawMessage `json:"seenID"`
	}
	if err := json.Unmarshal(a.Result, &r); err != nil {
		t.Fatalf("echo result: %v\n%s", err, a.raw)
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
		t.Fatalf("seen: %v\n%s", err, a.raw)
	}
	return r.Lines
}
