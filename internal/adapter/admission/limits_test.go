package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// Calls past the concurrency limit wait for a slot; past the waiting limit, or after
// the wait, they are refused with server_busy instead of piling up.
func TestCallLimiterBoundsRunningAndWaitingCalls(t *testing.T) {
	l := NewCallLimiter(1, 1, 200*time.Millisecond)
	ctx := context.Background()
	if r, _ := l.Acquire(ctx); r != nil {
		t.Fatalf("first call refused: %s", textOf(r))
	}
	waited := make(chan string, 1)
	go func() {
		if r, _ := l.Acquire(ctx); r != nil {
			waited <- textOf(r)
			return
		}
		waited <- "admitted"
	}()
	// Let the second call start waiting, then a third finds the queue full.
	testkit.EventuallyTrue(t, 10*time.Second, "the second call to wait in the queue", func() bool { return l.waiting.Load() == 0 })
	r, reason := l.Acquire(ctx)
	if r == nil || !strings.HasPrefix(textOf(r), "server_busy: too many calls are waiting") || reason != RejectedQueueFull {
		t.Fatalf("third call = %v (%s), want server_busy (queue full)", r, reason)
	}
	if got := <-waited; !strings.HasPrefix(got, "server_busy: no call slot freed within") {
		t.Fatalf("waiting call = %q, want server_busy after the wait", got)
	}
	l.Release()
	if r, _ := l.Acquire(ctx); r != nil {
		t.Fatalf("a freed slot was not taken: %s", textOf(r))
	}
}

// textOf is the text of a tool result.
func textOf(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
