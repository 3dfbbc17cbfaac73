// Package proxytest helps test stdio bridges: a fake stdio MCP server run by the test
// binary itself, and JSON-RPC over HTTP from the client side.
package proxytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FakeServerName is the role of the fake stdio MCP server (see Main).
const FakeServerName = "fake-mcp-server"

// Dir holds a link to the test binary for every role Main was given.
var Dir string

// Main runs the test binary in one of its roles, or runs the tests. The test binary
// doubles as helper processes: Main dispatches on the name it was started under, and the
// tests start it through links named after the roles (Path). No environment variable is
// needed, so this also works under a filtered environment.
func Main(m *testing.M, roles map[string]func(args []string) int) {
	if role, ok := roles[filepath.Base(os.Args[0])]; ok {
		os.Exit(role(os.Args[1:]))
	}
	if err := linkRoles(roles); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the helper processes:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(Dir)
	os.Exit(code)
}

func linkRoles(roles map[string]func(args []string) int) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the test binary: %w", err)
	}
	if Dir, err = os.MkdirTemp("", "stdio-bridge-test-"); err != nil {
		return fmt.Errorf("create the helper folder: %w", err)
	}
	for role := range roles {
		if err := os.Symlink(self, Path(role)); err != nil {
			return fmt.Errorf("link the %s helper: %w", role, err)
		}
	}
	return nil
}

// Path is the executable of a role.
func Path(role string) string { return filepath.Join(Dir, role) }

// FakeServerArgv is the command line of the fake stdio MCP server in a mode.
func FakeServerArgv(mode ...string) []string {
	return append([]string{Path(FakeServerName)}, mode...)
}

// FakeServer serves newline-delimited JSON-RPC on stdin/stdout. Modes:
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
func FakeServer(args []string) int {
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

// Answer is a decoded JSON-RPC answer and the HTTP exchange around it.
type Answer struct {
	Status int
	Header http.Header
	Raw    []byte
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// Post sends body to url and decodes a JSON answer (when there is one).
func Post(t testing.TB, url, body string, headers ...string) Answer {
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
	a := Answer{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("POST %s: answer is not JSON: %v\n%s", url, err, raw)
		}
	}
	return a
}

// Request is a JSON-RPC request.
func Request(id any, method string, params any) string {
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// Notification is a JSON-RPC notification.
func Notification(method string, params any) string {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	return string(b)
}
