package stdioproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// TestChildCrashFailsPending: requests waiting for a child that exits fail with
// "mcp_remote_error: stdio server exited: <status>"; while it waits to restart, requests
// get 503 "not running (restarting in Xs)"; after the restart it serves again.
func TestChildCrashFailsPending(t *testing.T) {
	tb := startBridge(t, fakeServerArgv("serve"), Options{RestartBackoffInitial: time.Second},
		func(b *Bridge) { b.sup.jitter = func() float64 { return 0.5 } }) // exactly 1s
	tb.waitRunning(t)

	const waiting = 3
	answers := make(chan rpcAnswer, waiting)
	for i := range waiting {
		go func() { answers <- post(t, tb.url, request(i, "slow", map[string]any{"ms": 10000})) }()
	}
	testkit.EventuallyTrue(t, 5*time.Second, "the slow requests to be pending", func() bool { return tb.Stats().Pending == waiting })
	crash := post(t, tb.url, request("crash", "crash", map[string]any{"code": 3}))
	for _, a := range append([]rpcAnswer{crash}, <-answers, <-answers, <-answers) {
		if a.Error == nil || a.Error.Message != "mcp_remote_error: stdio server exited: exit status 3" || a.Error.Code != codeRemoteError {
			t.Errorf("pending request: HTTP %d %s, want the exit error", a.Status, a.Raw)
		}
	}

	a := post(t, tb.url, request(5, "echo", nil))
	if a.Status != http.StatusServiceUnavailable || a.Error == nil || string(a.ID) != "5" ||
		a.Error.Message != "mcp_remote_error: stdio server is not running (restarting in 1s)" {
		t.Errorf("during the backoff: HTTP %d %s", a.Status, a.Raw)
	}
	if ra := a.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
	var data map[string]string
	if a.Error != nil {
		_ = json.Unmarshal(a.Error.Data, &data)
	}
	if data["lastExit"] != "exit status 3" {
		t.Errorf("error data %v, want lastExit", data)
	}
	if ok, why := tb.Ready(); ok || !strings.Contains(why, "last exit: exit status 3") {
		t.Errorf("Ready() = %v %q", ok, why)
	}
	resp, err := http.Get(tb.base + PathReadyz)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the backoff: %d", resp.StatusCode)
	}

	tb.waitRunning(t)
	if _, id := echoOf(t, post(t, tb.url, request(6, "echo", nil))); id == nil {
		t.Fatal("no answer after the restart")
	}
	if s := tb.Stats().Starts; s != 2 {
		t.Errorf("%d starts, want 2", s)
	}
}

// TestRestartBackoff: a child that exits at once four times is restarted after growing
// delays (with jitter), then recovers; one that ran longer than RestartResetAfter
// restarts after the initial delay again.
func TestRestartBackoff(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "starts")
	const failures = 4
	initial := 60 * time.Millisecond
	const resetAfter = 2 * time.Second
	var mu sync.Mutex
	type exit struct {
		at    time.Time
		delay time.Duration
	}
	var exits []exit
	tb := startBridge(t, fakeServerArgv("flaky", fmt.Sprint(failures), counter),
		// RestartResetAfter is long enough that a child which exits at once is never
		// mistaken for a long run on a loaded machine (a slow start once reset the
		// backoff mid-test).
		Options{RestartBackoffInitial: initial, RestartBackoffMax: 10 * time.Second, RestartResetAfter: resetAfter},
		func(b *Bridge) {
			b.sup.onExit = func(_ string, d time.Duration) {
				mu.Lock()
				exits = append(exits, exit{time.Now(), d})
				mu.Unlock()
			}
		})
	start := time.Now()
	testkit.EventuallyTrue(t, 10*time.Second, "the recovery", func() bool { ok, _ := tb.Ready(); return ok && tb.Stats().Starts == failures+1 })
	if _, id := echoOf(t, post(t, tb.url, request(1, "echo", nil))); id == nil {
		t.Fatal("no answer after recovering")
	}
	mu.Lock()
	got := append([]exit(nil), exits...)
	mu.Unlock()
	if len(got) != failures {
		t.Fatalf("%d exits recorded, want %d", len(got), failures)
	}
	var delays []string
	for i, e := range got {
		delays = append(delays, e.delay.Round(time.Millisecond).String())
		base := initial << i
		if e.delay < base*8/10 || e.delay > base*12/10 {
			t.Errorf("delay %d = %s, want %s ±20%%", i+1, e.delay, base)
		}
		if i > 0 && e.delay <= got[i-1].delay {
			t.Errorf("delay %d (%s) did not grow from %s", i+1, e.delay, got[i-1].delay)
		}
	}
	// The restarts waited for their delays: the 4 delays add up to at least 0.8·15·initial.
	if took := time.Since(start); took < initial*15*8/10 {
		t.Errorf("recovered after %s, faster than the delays allow", took)
	}
	t.Logf("backoff delays %v; recovered after %s", delays, time.Since(start).Round(time.Millisecond))

	// Uptime over RestartResetAfter resets the backoff: waits out that uptime, which the
	// bridge measures by the clock.
	time.Sleep(resetAfter + 100*time.Millisecond)
	post(t, tb.url, request("crash", "crash", map[string]any{"code": 1}))
	testkit.EventuallyTrue(t, 5*time.Second, "the exit after the crash", func() bool { mu.Lock(); defer mu.Unlock(); return len(exits) == failures+1 })
	if d := exits[failures].delay; d > initial*12/10 {
		t.Errorf("delay after a long run = %s, want the initial %s ±20%%", d, initial)
	}
	tb.waitRunning(t)
}

func TestBackoffDelay(t *testing.T) {
	for _, tc := range []struct {
		failures int
		jitter   float64
		want     time.Duration
	}{
		{1, 0.5, time.Second},
		{2, 0.5, 2 * time.Second},
		{5, 0.5, 16 * time.Second},
		{6, 0.5, 30 * time.Second}, // capped
		{60, 0.5, 30 * time.Second},
		{1, 0, 800 * time.Millisecond},
		{1, 0.999999, 1200 * time.Millisecond},
		{7, 0.999999, 30 * time.Second}, // jitter never exceeds the cap
		{7, 0, 24 * time.Second},
	} {
		got := backoffDelay(tc.failures, time.Second, 30*time.Second, tc.jitter)
		if got.Round(time.Millisecond) != tc.want {
			t.Errorf("backoffDelay(%d, jitter %v) = %s, want %s", tc.failures, tc.jitter, got, tc.want)
		}
	}
}

// TestStderrBounded: the child's stderr is logged line by line, a long line cut at
// StderrLineBytes, at most StderrLinesPerSecond lines a second, and the dropped ones
// counted in a log line.
func TestStderrBounded(t *testing.T) {
	const burst, long, lineBytes, perSecond = 500, 10 << 10, 1 << 10, 20
	tb := startBridge(t, fakeServerArgv("stderr-burst", fmt.Sprint(burst), fmt.Sprint(long)),
		Options{StderrLineBytes: lineBytes, StderrLinesPerSecond: perSecond})
	tb.waitRunning(t)
	// burst+1 lines at once, then "done" a second later, which reports the dropped ones.
	testkit.EventuallyTrue(t, 10*time.Second, "the last stderr line", func() bool { return tb.Stats().StderrLines == burst+2 })
	testkit.EventuallyTrue(t, 2*time.Second, "the dropped-lines report", func() bool { return len(tb.logs.withMsg("dropped stderr lines")) > 0 })

	st := tb.Stats()
	logged := tb.logs.withMsg("stderr")
	if len(logged) > 3*perSecond { // two windows, three on a very slow machine
		t.Errorf("%d stderr lines logged, want at most %d", len(logged), 3*perSecond)
	}
	if int64(len(logged))+st.StderrDropped != burst+2 {
		t.Errorf("logged %d + dropped %d != %d lines", len(logged), st.StderrDropped, burst+2)
	}
	var reported float64
	for _, e := range tb.logs.withMsg("dropped stderr lines") {
		reported += e["dropped"].(float64)
	}
	if int64(reported) != st.StderrDropped {
		t.Errorf("dropped lines reported %v, counted %d", reported, st.StderrDropped)
	}
	first := logged[0]
	if line := first["line"].(string); len(line) != lineBytes || strings.Trim(line, "L") != "" {
		t.Errorf("the long line was logged with %d bytes, want %d", len(line), lineBytes)
	}
	if first["truncatedBytes"] != float64(long-lineBytes) || st.StderrTruncated != 1 {
		t.Errorf("truncatedBytes %v (want %d), truncated lines %d", first["truncatedBytes"], long-lineBytes, st.StderrTruncated)
	}
	if last := logged[len(logged)-1]["line"]; last != "done" {
		t.Errorf("the last logged line is %q, want done", last)
	}
	t.Logf("stderr: %d lines, %d logged, %d dropped", st.StderrLines, len(logged), st.StderrDropped)
}

// TestStop: stopping the bridge closes the child's stdin and it exits; a child that
// ignores both stdin EOF and SIGTERM is killed after StopGrace.
func TestStop(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		grace   time.Duration
		maxTook time.Duration
		status  string
	}{
		{"serve", 5 * time.Second, 2 * time.Second, "exit status 0"},
		{"stubborn", 300 * time.Millisecond, 3 * time.Second, "signal: killed"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			tb := startBridge(t, fakeServerArgv(tc.mode), Options{StopGrace: tc.grace})
			tb.waitRunning(t)
			var pid struct{ PID int }
			_ = json.Unmarshal(post(t, tb.url, request(1, "pid", nil)).Result, &pid)
			start := time.Now()
			tb.stop()
			if took := time.Since(start); took > tc.maxTook {
				t.Errorf("stopping took %s", took)
			}
			if got := tb.Stats().LastExit; got != tc.status {
				t.Errorf("the child ended with %q, want %q", got, tc.status)
			}
			if err := syscall.Kill(pid.PID, 0); err == nil {
				t.Errorf("the child %d still runs", pid.PID)
			}
			a := post(t, tb.url, request(2, "echo", nil))
			if a.Status != http.StatusServiceUnavailable || a.Error == nil ||
				a.Error.Message != "mcp_remote_error: stdio server is not running (the bridge is shutting down)" {
				t.Errorf("after stopping: HTTP %d %s", a.Status, a.Raw)
			}
		})
	}
}

// TestCommandNotFound: a command that cannot start is retried with backoff; meanwhile
// the bridge answers 503 and /readyz fails with the reason.
func TestCommandNotFound(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-server")
	tb := startBridge(t, []string{missing, "--flag"}, Options{RestartBackoffInitial: 2 * time.Second})
	testkit.EventuallyTrue(t, 5*time.Second, "the failed start", func() bool { return tb.Stats().LastExit != "" })
	a := post(t, tb.url, request(1, "initialize", nil))
	if a.Status != http.StatusServiceUnavailable || a.Error == nil ||
		!strings.HasPrefix(a.Error.Message, "mcp_remote_error: stdio server is not running (restarting in ") {
		t.Errorf("HTTP %d %s", a.Status, a.Raw)
	}
	resp, err := http.Get(tb.base + PathReadyz)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := make([]byte, 512)
	n, _ := resp.Body.Read(body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body[:n]), "could not start") ||
		!strings.Contains(string(body[:n]), "no such file or directory") {
		t.Errorf("/readyz: %d %q", resp.StatusCode, body[:n])
	}
	if resp, err := http.Get(tb.base + PathHealthz); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz must stay 200 while the bridge runs: %v %v", resp, err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("the missing command exists")
	}
}
