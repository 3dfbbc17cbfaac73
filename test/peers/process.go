package peers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/stdioproxy"
)

// StartTimeout bounds how long a server may take to say it is listening, whatever the
// caller's context allows.
const StartTimeout = 30 * time.Second

// StopTimeout is how long a server may drain after SIGTERM before it is killed.
const StopTimeout = 15 * time.Second

// Server is a child process serving HTTP, stopped with SIGTERM at test cleanup.
type Server struct {
	// BaseURL is http://HOST:PORT, without a path.
	BaseURL string

	name   string
	cmd    *exec.Cmd
	stdout *stdioproxy.TailBuffer
	stderr *stdioproxy.TailBuffer
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed

	stopOnce sync.Once
	stopped  StopResult
}

// StopResult is how a server ended after Stop.
type StopResult struct {
	// ExitCode is the process exit code, -1 when it died from a signal.
	ExitCode int
	// Killed is true when it did not exit within StopTimeout of SIGTERM.
	Killed bool
	// Took is the time from SIGTERM to exit.
	Took time.Duration
}

// Logs returns the last 256 KiB of the server's stderr (and stdout, after its
// listening line).
func (s *Server) Logs() string {
	return "--- stdout ---\n" + s.stdout.String() + "\n--- stderr ---\n" + s.stderr.String()
}

// MetricsURL returns http://HOST:PORT from the adapter's "metrics on http://HOST:PORT"
// line (printed right after its listening line when it runs with --metrics-port),
// waiting up to StartTimeout for it; "" when there is none.
func (s *Server) MetricsURL() string {
	deadline := time.Now().Add(StartTimeout)
	for {
		for _, line := range strings.Split(s.stdout.String(), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "metrics on "); ok {
				return strings.TrimSpace(rest)
			}
		}
		if time.Now().After(deadline) || s.Exited() {
			return ""
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Exited reports whether the process has ended (by itself or by Stop).
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits for the exit, killing the process after StopTimeout.
// Calling it again returns the first result; test cleanup calls it too.
func (s *Server) Stop() StopResult {
	s.stopOnce.Do(func() {
		start := time.Now()
		if !s.Exited() {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-s.done:
		case <-time.After(StopTimeout):
			s.stopped.Killed = true
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		s.stopped.Took = time.Since(start)
		s.stopped.ExitCode = s.cmd.ProcessState.ExitCode()
	})
	return s.stopped
}

// startServer starts cmd and waits until ready returns a base URL: ready is fed every
// stdout line and may return "" to keep waiting; if probe is set, it is called every
// 50 ms instead and returns the base URL once the server answers.
func startServer(t testing.TB, ctx context.Context, name string, cmd *exec.Cmd,
	ready func(line string) string, probe func() string) *Server {
	t.Helper()
	s := &Server{
		name:   name,
		cmd:    cmd,
		stdout: stdioproxy.NewTailBuffer(256 << 10),
		stderr: stdioproxy.NewTailBuffer(256 << 10),
		done:   make(chan struct{}),
	}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("peers: %s: %v", name, err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("peers: start %s: %v", name, err)
	}

	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := ready == nil
		for sc.Scan() {
			line := sc.Text()
			_, _ = s.stdout.Write([]byte(line + "\n"))
			if !found {
				if u := ready(line); u != "" {
					found = true
					urls <- u
				}
			}
		}
		_, _ = io.Copy(s.stdout, stdout)
	}()
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()

	t.Cleanup(func() {
		res := s.Stop()
		switch {
		case res.Killed:
			t.Errorf("peers: %s did not exit within %s of SIGTERM; killed it\n%s", name, StopTimeout, clip(s.Logs()))
		case t.Failed():
			t.Logf("peers: %s exited with code %d after SIGTERM; its output:\n%s", name, res.ExitCode, clip(s.Logs()))
		}
	})

	deadline := time.NewTimer(StartTimeout)
	defer deadline.Stop()
	var tick <-chan time.Time
	if probe != nil {
		ticker := time.NewTicker(50 * time.Millisecond)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		select {
		case u := <-urls:
			s.BaseURL = u
			return s
		case <-tick:
			if u := probe(); u != "" {
				s.BaseURL = u
				return s
			}
		case <-s.done:
			t.Fatalf("peers: %s exited before it was listening: %v\n%s", name, s.err, clip(s.Logs()))
		case <-deadline.C:
			t.Fatalf("peers: %s was not listening within %s\n%s", name, StartTimeout, clip(s.Logs()))
		case <-ctx.Done():
			t.Fatalf("peers: %s was not listening before the context ended (%v)\n%s", name, ctx.Err(), clip(s.Logs()))
		}
	}
}

// ---- the adapter ----

// AdapterBinEnv names the environment variable holding a prebuilt adapter binary
// (`make test` sets it to bin/adapter).
const AdapterBinEnv = "CANTUS_ADAPTER_BIN"

var (
	adapterOnce sync.Once
	adapterBin  string
	adapterErr  error
)

// AdapterBinary returns the adapter binary: $CANTUS_ADAPTER_BIN when set, otherwise
// ./cmd/adapter built once per test process (into bin/.peers/ of the module, which is
// git-ignored; the Go build cache makes this quick when nothing changed).
func AdapterBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(AdapterBinEnv); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatalf("peers: %s=%q: %v", AdapterBinEnv, p, err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("peers: %s=%q: %v", AdapterBinEnv, p, err)
		}
		return abs
	}
	root := ModuleRoot(t)
	adapterOnce.Do(func() {
		dir := filepath.Join(root, "bin", ".peers")
		if adapterErr = os.MkdirAll(dir, 0o755); adapterErr != nil {
			return
		}
		// Build to a private name, then rename: test processes of several packages may
		// build at once, and a rename never leaves a half-written binary behind.
		tmp := filepath.Join(dir, fmt.Sprintf("adapter.%d.tmp", os.Getpid()))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// Static, as in the image: tests may run it in a chroot that has no libc.
		r := run(ctx, root, []string{"CGO_ENABLED=0"}, "go", "build", "-o", tmp, "./cmd/adapter")
		if r.err != nil {
			_ = os.Remove(tmp)
			adapterErr = fmt.Errorf("go build ./cmd/adapter: %w\n%s", r.err, clip(r.stderr))
			return
		}
		adapterBin = filepath.Join(dir, "adapter")
		adapterErr = os.Rename(tmp, adapterBin)
	})
	if adapterErr != nil {
		t.Fatalf("peers: %v", adapterErr)
	}
	return adapterBin
}

// StartAdapter runs `adapter serve --config configPath --host 127.0.0.1 --port 0
// extraArgs…`, waits for its stdout line `listening on http://HOST:PORT` and returns
// http://HOST:PORT. The adapter is stopped with SIGTERM at test cleanup (ctx only bounds
// the start). Its logs are printed when the test failed.
func StartAdapter(t testing.TB, ctx context.Context, configPath string, extraArgs ...string) (baseURL string) {
	t.Helper()
	return StartAdapterServer(t, ctx, configPath, extraArgs...).BaseURL
}

// StartAdapterServer is StartAdapter returning the process, for tests that stop it
// themselves (graceful shutdown) or read its logs.
func StartAdapterServer(t testing.TB, ctx context.Context, configPath string, extraArgs ...string) *Server {
	t.Helper()
	bin := AdapterBinary(t)
	args := append([]string{"serve", "--config", configPath, "--host", "127.0.0.1", "--port", "0"}, extraArgs...)
	return StartAdapterCommand(t, ctx, exec.Command(bin, args...))
}

// StartAdapterCommand starts an adapter command prepared by the caller (for instance
// with the exact arguments of a pod spec, in a chroot) and waits for its listening line.
func StartAdapterCommand(t testing.TB, ctx context.Context, cmd *exec.Cmd) *Server {
	t.Helper()
	cmd.WaitDelay = waitDelay
	return startServer(t, ctx, "adapter", cmd, parseListeningLine, nil)
}

// parseListeningLine returns http://HOST:PORT from the adapter's `listening on
// http://HOST:PORT` line, "" for any other line.
func parseListeningLine(line string) string {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok {
		return ""
	}
	u, err := url.Parse(strings.TrimSpace(rest))
	if err != nil || u.Scheme == "" || u.Host == "" || u.Port() == "" || u.Port() == "0" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// WriteJSON writes v as indented JSON to a file named name in a fresh t.TempDir() and
// returns its path; v may be json.RawMessage or a string of JSON, written as is.
func WriteJSON(t testing.TB, name string, v any) string {
	t.Helper()
	var data []byte
	switch x := v.(type) {
	case string:
		data = []byte(x)
	case json.RawMessage:
		data = x
	case []byte:
		data = x
	default:
		var err error
		if data, err = json.MarshalIndent(v, "", "  "); err != nil {
			t.Fatalf("peers: marshal %s: %v", name, err)
		}
	}
	if !json.Valid(data) {
		t.Fatalf("peers: %s is not valid JSON:\n%s", name, data)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatalf("peers: %v", err)
	}
	return p
}

// ---- server-everything ----

// StartServerEverything runs @modelcontextprotocol/server-everything (the reference
// server of the MCP project) with transport TransportStreamableHTTP (endpoint /mcp) or
// TransportSSE (endpoint /sse), on a free port, and returns http://127.0.0.1:PORT.
// It listens on all interfaces. Stopped with SIGTERM at test cleanup.
func StartServerEverything(t testing.TB, ctx context.Context, transport string) (baseURL string) {
	t.Helper()
	mode := map[string]string{TransportStreamableHTTP: "streamableHttp", TransportSSE: "sse"}[transport]
	if mode == "" {
		t.Fatalf("peers: server-everything transport %q: use %q or %q", transport, TransportStreamableHTTP, TransportSSE)
	}
	pkg := moduleFile(t, "@modelcontextprotocol/server-everything")
	return startNodeServer(t, ctx, "server-everything "+mode, pkg, "dist/index.js", mode)
}

// StartMCPAppServer runs @modelcontextprotocol/server-basic-vanillajs (the MCP Apps
// extension's basic example: a tool get-time whose _meta.ui.resourceUri names the view
// ui://get-time/mcp-app.html, served as a resource) on a free port, and returns its
// streamable HTTP endpoint http://127.0.0.1:PORT/mcp. Stopped at test cleanup.
func StartMCPAppServer(t testing.TB, ctx context.Context) (endpoint string) {
	t.Helper()
	Dir(t) // installs test/mcp-peers/apps too
	pkg := filepath.Join(ModuleRoot(t), "test", "mcp-peers", "apps", "node_modules", "@modelcontextprotocol", "server-basic-vanillajs")
	if _, err := os.Stat(pkg); err != nil {
		t.Fatalf("peers: the MCP Apps example is not installed (hack/npm-peers.sh): %v", err)
	}
	return startNodeServer(t, ctx, "server-basic-vanillajs", pkg, "dist/index.js") + "/mcp"
}

// startNodeServer runs script (args) with node in dir, listening on the free port it
// is given in PORT, and returns http://127.0.0.1:PORT once it accepts connections.
func startNodeServer(t testing.TB, ctx context.Context, name, dir, script string, args ...string) (baseURL string) {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(Node(t), append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.WaitDelay = waitDelay
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	probe := func() string {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return ""
		}
		_ = c.Close()
		return "http://" + addr
	}
	return startServer(t, ctx, name, cmd, nil, probe).BaseURL
}

// freePort asks the kernel for a free TCP port (on all interfaces, as server-everything
// listens there). Another process could take it before the server binds; tests that
// hit that will say so in the server's logs.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatalf("peers: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
