package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

const testTimeout = 15 * time.Second

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// adapterBinary returns $CANTUS_ADAPTER_BIN, or builds the command once for the run.
func adapterBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CANTUS_ADAPTER_BIN"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "adapter-test-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "adapter")
		out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func writeConfig(t *testing.T, cfg *adapterconfig.Config) string {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), adapterconfig.ConfigFileName)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func templateConfig() *adapterconfig.Config {
	return &adapterconfig.Config{
		Server:    adapterconfig.ServerInfo{Name: "cli-test", Version: "0.0.1"},
		Transport: adapterconfig.TransportStreamableHTTP,
		Stateless: true,
		Tools: []adapterconfig.Tool{{
			Name:        "greet",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
			Template:    &adapterconfig.TemplateBackend{Text: "Hello {{.name}}"},
		}},
	}
}

func TestRun_Subcommands(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"version", []string{"version"}, exitOK, "cantus-adapter dev go", ""},
		{"help", []string{"help"}, exitOK, "usage:", ""},
		{"unknown command", []string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{"serve without --config", []string{"serve"}, exitUsage, "", "--config is required"},
		{"default subcommand is serve", []string{"--host", "127.0.0.1"}, exitUsage, "", "--config is required"},
		{"stray argument", []string{"serve", "--config", "x.json", "extra"}, exitUsage, "", "unexpected arguments: extra"},
		{"port out of range", []string{"serve", "--config", "x.json", "--port", "70000"}, exitUsage, "", "--port 70000 is out of range"},
		{"missing config file", []string{"serve", "--config", filepath.Join(t.TempDir(), "none.json")}, exitError, "", "read adapter config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit code = %d, want %d (stderr: %s)", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestRun_InvalidConfigExitsNamingTheTool(t *testing.T) {
	cfg := templateConfig()
	cfg.Tools[0].Name = "bad name"
	var stdout, stderr bytes.Buffer
	code := run([]string{"serve", "--config", writeConfig(t, cfg), "--port", "0"}, &stdout, &stderr)
	if code != exitError {
		t.Fatalf("exit code = %d, want %d", code, exitError)
	}
	if !strings.Contains(stderr.String(), `tool \"bad name\" (tools[0]): invalid name`) {
		t.Errorf("stderr does not name the tool: %s", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing before a successful bind", stdout.String())
	}
}

// process is a running adapter binary.
type process struct {
	cmd     *exec.Cmd
	baseURL string
	port    string
	stdout  *bufio.Reader
	stderr  *syncBuffer
	exited  chan struct{} // closed once the process exited; waitErr is then set
	waitErr error
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var listeningLine = regexp.MustCompile(`^listening on http://(127\.0\.0\.1):(\d+)\n$`)

// startAdapter runs the binary and waits for its listening line.
func startAdapter(t *testing.T, args ...string) *process {
	t.Helper()
	cmd := exec.Command(adapterBinary(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, stdout: bufio.NewReader(stdout), stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start adapter: %v", err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("adapter stderr:\n%s", p.stderr.String())
		}
	})

	lineCh := make(chan string, 1)
	go func() {
		line, _ := p.stdout.ReadString('\n')
		lineCh <- line
	}()
	select {
	case line := <-lineCh:
		m := listeningLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("first stdout line = %q, want %q", line, listeningLine)
		}
		p.port = m[2]
		p.baseURL = "http://" + m[1] + ":" + m[2]
	case <-testkit.Context(t, testTimeout).Done():
		t.Fatalf("no listening line within %s; stderr:\n%s", testTimeout, p.stderr.String())
	}
	return p
}

// terminate sends SIGTERM.
func (p *process) terminate(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
}

// waitExit returns the exit code.
func (p *process) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
		if p.waitErr == nil {
			return 0
		}
		var exitErr *exec.ExitError
		if errors.As(p.waitErr, &exitErr) {
			return exitErr.ExitCode()
		}
		t.Fatalf("wait: %v", p.waitErr)
	case <-testkit.Context(t, testTimeout).Done():
		t.Fatalf("adapter did not exit within %s", testTimeout)
	}
	return -1
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestBinary_PrintsOneListeningLineAndHonoursPort(t *testing.T) {
	configPort := freePort(t)
	cfg := templateConfig()
	if _, err := fmt.Sscan(configPort, &cfg.Port); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, cfg)

	tests := []struct {
		name     string
		args     []string
		wantPort func(string) bool
	}{
		{"config port when --port is absent", []string{"--config", path, "--host", "127.0.0.1"},
			func(p string) bool { return p == configPort }},
		{"--port 0 picks a free port", []string{"serve", "--config", path, "--host", "127.0.0.1", "--port", "0"},
			func(p string) bool { return p != "0" && p != configPort }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startAdapter(t, tt.args...)
			if !tt.wantPort(p.port) {
				t.Fatalf("listening on port %s, config port %s", p.port, configPort)
			}
			if status, body := httpGet(t, p.baseURL+adapterconfig.PathHealthz); status != http.StatusOK || body != "ok" {
				t.Fatalf("/healthz = %d %q", status, body)
			}
			p.terminate(t)
			if code := p.waitExit(t); code != 0 {
				t.Fatalf("exit code after SIGTERM = %d, want 0", code)
			}
			rest, _ := io.ReadAll(p.stdout)
			if len(rest) != 0 {
				t.Errorf("stdout has more than the listening line: %q", rest)
			}
		})
	}
}

func TestBinary_GracefulShutdownOnSIGTERM(t *testing.T) {
	const calls = 50
	var arrived atomic.Int32
	allArrived := make(chan struct{})
	// The calls stay in flight until the test has seen readiness fail and new calls
	// refused: then it releases them, and they must still be answered.
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if arrived.Add(1) == calls {
			close(allArrived)
		}
		select {
		case <-release:
			_, _ = w.Write([]byte("done"))
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(backend.Close)

	cfg := &adapterconfig.Config{
		Server:    adapterconfig.ServerInfo{Name: "shutdown-test", Version: "0.0.1"},
		Transport: adapterconfig.TransportStreamableHTTP,
		Stateless: true,
		Tools: []adapterconfig.Tool{{
			Name:        "slow",
			InputSchema: json.RawMessage(`{"type":"object"}`),
			HTTP:        &adapterconfig.HTTPBackend{URL: backend.URL, Timeout: adapterconfig.Duration{Duration: 10 * time.Second}, MaxResponseBytes: 1024},
		}},
	}
	p := startAdapter(t, "serve", "--config", writeConfig(t, cfg), "--host", "127.0.0.1", "--port", "0", "--shutdown-grace", "10s")

	c := mcpClient(t, p.baseURL)
	type outcome struct {
		text    string
		isError bool
		err     error
	}
	results := make(chan outcome, calls)
	for range calls {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "slow"
			req.Params.Arguments = map[string]any{}
			res, err := c.CallTool(ctx, req)
			o := outcome{err: err}
			if res != nil {
				o.isError = res.IsError
				for _, content := range res.Content {
					if tc, ok := mcp.AsTextContent(content); ok {
						o.text += tc.Text
					}
				}
			}
			results <- o
		}()
	}
	testkit.Receive(t, testTimeout, fmt.Sprintf("all %d calls to reach the backend", calls), allArrived)

	p.terminate(t)
	testkit.Eventually(t, testTimeout, "/readyz to turn 503 after SIGTERM", func() error {
		if status, body := httpGet(t, p.baseURL+adapterconfig.PathReadyz); status != http.StatusServiceUnavailable {
			return fmt.Errorf("/readyz answers %d %s", status, body)
		}
		return nil
	})
	// Readiness fails first and new calls are refused a moment later (after the drain
	// delay, zero here), so a call in that gap may still be served; poll for the refusal.
	testkit.Eventually(t, testTimeout, "a call started after SIGTERM to be refused", func() error {
		if status, body := postToolsCall(t, p.baseURL); status != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
			return fmt.Errorf("a new call answers %d %s, want 503 shutting down", status, body)
		}
		return nil
	})

	close(release)
	for i := range calls {
		o := testkit.Receive(t, testTimeout, fmt.Sprintf("in-flight call %d of %d to return", i+1, calls), results)
		if o.err != nil || o.isError || o.text != "done" {
			t.Errorf("in-flight call %d: text %q, isError %v, err %v; want done", i, o.text, o.isError, o.err)
		}
	}
	if code := p.waitExit(t); code != 0 {
		t.Fatalf("exit code = %d, want 0", code)
	}
	if log := p.stderr.String(); !strings.Contains(log, "shutdown complete") {
		t.Errorf("stderr lacks the shutdown log:\n%s", log)
	}
}

func mcpClient(t *testing.T, baseURL string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(baseURL + adapterconfig.PathMCP)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20250618))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "cli-test", Version: "0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

func postToolsCall(t *testing.T, baseURL string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+adapterconfig.PathMCP,
		strings.NewReader(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"slow","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20250618)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST tools/call: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// With --metrics-port the binary prints a second line naming the metrics port, serves
// /metrics there and not on the MCP port (finding 9 of issue 23: the MCP port the
// Service exposes used to list every tool on /metrics).
func TestMetricsPortIsApartFromTheMCPPort(t *testing.T) {
	p := startAdapter(t, "serve", "--config", writeConfig(t, templateConfig()), "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0")
	line, err := p.stdout.ReadString('\n')
	metricsURL, ok := strings.CutPrefix(strings.TrimSpace(line), "metrics on ")
	if err != nil || !ok {
		t.Fatalf("second stdout line = %q (%v), want \"metrics on http://HOST:PORT\"", line, err)
	}
	if metricsURL == p.baseURL {
		t.Fatalf("metrics are served on the MCP address %s", metricsURL)
	}
	get := func(url string) (int, string) { return httpGet(t, url) }
	if status, body := get(p.baseURL + adapterconfig.PathMetrics); status != http.StatusNotFound || strings.Contains(body, "greet") {
		t.Errorf("GET /metrics on the MCP port = %d, want 404 without tool names", status)
	}
	if status, body := get(metricsURL + adapterconfig.PathMetrics); status != http.StatusOK || !strings.Contains(body, `cantus_adapter_tool_calls_total{tool="greet"} 0`) {
		t.Errorf("GET /metrics on the metrics port = %d, want 200 with the tool's series:\n%s", status, body)
	}
	if status, _ := get(metricsURL + adapterconfig.PathMCP); status != http.StatusNotFound {
		t.Errorf("the metrics port answers %s with %d, want 404: it serves nothing but /metrics", adapterconfig.PathMCP, status)
	}
}
