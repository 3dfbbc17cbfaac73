package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeT records how a helper fails instead of failing the test that runs it.
type fakeT struct {
	testing.TB
	failed  bool
	message string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = true
	f.message = strings.TrimSpace(fmt.Sprintf(format, args...))
	// Fatalf ends the goroutine in a real test; the helpers under test return after it.
	panic(f)
}

func runFake(fn func(t *fakeT)) (f *fakeT) {
	f = &fakeT{TB: nil}
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
	}()
	fn(f)
	return f
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	checks := 0
	Eventually(t, 5*time.Second, "the third check", func() error {
		checks++
		if checks < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if checks != 3 {
		t.Fatalf("checked %d times, want 3", checks)
	}
}

func TestEventuallyFailsWithTheLastObservedState(t *testing.T) {
	n := 0
	f := runFake(func(f *fakeT) {
		Eventually(f, 30*time.Millisecond, "the counter to reach 1000", func() error {
			n++
			return errors.New("counter at " + strconv.Itoa(n))
		})
	})
	if !f.failed {
		t.Fatal("Eventually did not fail on a condition that never holds")
	}
	if !strings.Contains(f.message, "the counter to reach 1000") || !strings.Contains(f.message, "counter at "+strconv.Itoa(n)) {
		t.Fatalf("failure %q does not name what it waited for and the last state (counter at %d)", f.message, n)
	}
}

func TestReceiveReturnsTheValueOrFailsAtTheTimeout(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Receive(t, 5*time.Second, "the value", ch); got != 7 {
		t.Fatalf("received %d, want 7", got)
	}
	never := make(chan struct{})
	f := runFake(func(f *fakeT) { Receive(f, 20*time.Millisecond, "a close that never comes", never) })
	if !f.failed || !strings.Contains(f.message, "a close that never comes") {
		t.Fatalf("failed %v with %q, want a failure naming what it waited for", f.failed, f.message)
	}
}

func TestContextEndsByItsTimeoutAndWithTheTest(t *testing.T) {
	var ctx context.Context
	t.Run("inner", func(t *testing.T) {
		ctx = Context(t, time.Hour)
		deadline, ok := ctx.Deadline()
		if !ok || time.Until(deadline) > time.Hour {
			t.Fatalf("deadline %v (set %v), want within an hour", deadline, ok)
		}
		t.Cleanup(func() {
			if ctx.Err() != nil {
				t.Error("the context ended before the test's cleanups ran")
			}
		})
	})
	if ctx.Err() == nil {
		t.Fatal("the context is still live after its test ended")
	}
}

func TestJSONEqualComparesValues(t *testing.T) {
	if !JSONEqual(t, []byte(`{"a":1,"b":[1,2]}`), []byte("{ \"b\": [1, 2],\n \"a\": 1.0 }")) {
		t.Error("the same value in another order and format compared unequal")
	}
	if JSONEqual(t, []byte(`{"a":[1,2]}`), []byte(`{"a":[2,1]}`)) {
		t.Error("arrays in another order compared equal")
	}
}

func TestWriteTreeWritesEveryFileAndItsFolders(t *testing.T) {
	dir := WriteTree(t, "", map[string]string{"SKILL.md": "top", "references/deep/x.md": "deep"})
	for p, want := range map[string]string{"SKILL.md": "top", "references/deep/x.md": "deep"} {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", p, got, err, want)
		}
	}
}
