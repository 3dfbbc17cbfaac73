// Package testkit holds the helpers every test package shares: waiting on a condition,
// a context bounded by the test, comparing JSON by value and writing a folder tree.
// It imports the standard library only, so that the adapter's tests, which link nothing
// of Kubernetes, can use it; the envtest helpers are in internal/testkit/kubekit.
//
// Only tests import it (depguard refuses it in production code).
package testkit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PollInterval is how often Eventually checks its condition: short enough that a test
// waits little past the moment the condition holds, long enough not to load the machine.
const PollInterval = 10 * time.Millisecond

// Eventually checks check until it returns nil, every PollInterval, and fails t when
// timeout has passed (or t's own deadline is near) with what it waited for and the last
// error check returned: the state the test last saw, not only that time ran out.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := deadlineWithin(t, timeout)
	ticker := time.NewTicker(PollInterval)
	defer ticker.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %v", timeout, what, err)
		}
		<-ticker.C
	}
}

// Receive waits for a value on ch (or for ch to close) and returns it; it fails t when
// timeout passes first (or t's own deadline is near), naming what it waited for. It
// returns the moment the value arrives: the timeout is a bound, not a guess.
func Receive[T any](t testing.TB, timeout time.Duration, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(time.Until(deadlineWithin(t, timeout)))
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		var zero T
		return zero
	}
}

// EventuallyTrue is Eventually for a condition with no state worth reporting.
func EventuallyTrue(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

var errNotYet = fmt.Errorf("the condition does not hold yet")

// Context returns a context that ends after timeout, or shortly before the test binary's
// own deadline (go test -timeout) so that a hung step fails the test with its own message
// rather than a panic of the whole binary; it is cancelled when the test ends. Unlike
// t.Context, it is still live while the test's cleanups run, which may need it.
func Context(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), deadlineWithin(t, timeout))
	t.Cleanup(cancel)
	return ctx
}

// deadlineGrace is the time left to a test, before the binary's deadline, to report
// what it was waiting for.
const deadlineGrace = 5 * time.Second

// deadlineWithin is now+timeout, or earlier when the test binary's deadline comes first.
func deadlineWithin(t testing.TB, timeout time.Duration) time.Time {
	deadline := time.Now().Add(timeout)
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if binary, set := d.Deadline(); set && binary.Add(-deadlineGrace).Before(deadline) {
			deadline = binary.Add(-deadlineGrace)
		}
	}
	return deadline
}

// JSONEqual reports whether two JSON texts hold the same value, whatever their
// formatting and key order; it fails t when either is not JSON.
func JSONEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	return bytes.Equal(canonicalJSON(t, a), canonicalJSON(t, b))
}

// canonicalJSON re-encodes a JSON text (encoding/json sorts object keys).
func canonicalJSON(t testing.TB, text []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(text, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, text)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("re-encode JSON: %v", err)
	}
	return out
}

// WriteTree writes files (slash-separated path relative to dir → content) under dir,
// creating the folders between, and returns dir. An empty dir means a new temporary
// folder of the test.
func WriteTree(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatalf("write tree: %v", err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatalf("write tree: %v", err)
		}
	}
	return dir
}

// HexSHA256 is the SHA-256 of b in hex, as content digests and shard keys spell it; a
// test computes what it expects without the code it tests.
func HexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CloseAtEnd closes srv when the test ends, dropping the connections still open
// first: a client's stream of notifications (an operator's or a gateway's watch of a
// remote's list changes) would otherwise keep Close waiting for a request that ends
// only when that client stops, which may be later in the test's cleanup.
func CloseAtEnd(t testing.TB, srv *httptest.Server) {
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
}
