package adapter

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Limits that keep one client from taking a server from everyone else.
const (
	// maxConcurrentCalls bounds the tool calls that run at once; more wait.
	maxConcurrentCalls = 64
	// maxWaitingCalls bounds the calls that wait for a slot; more are refused at once.
	maxWaitingCalls = 64
	// maxCallWait is how long a call waits for a slot before it is refused.
	maxCallWait = 10 * time.Second
	// defaultBodyReadTimeout bounds reading one POST body, so a client that sends it a
	// byte at a time cannot hold a connection and its memory (headers have
	// ReadHeaderTimeout).
	defaultBodyReadTimeout = 30 * time.Second
)

// callLimiter admits at most maxConcurrentCalls calls at once and lets at most
// maxWaitingCalls wait, each for at most maxCallWait.
type callLimiter struct {
	slots   chan struct{}
	waiting atomic.Int32
	wait    time.Duration
}

func newCallLimiter(concurrent, waiting int, wait time.Duration) *callLimiter {
	l := &callLimiter{slots: make(chan struct{}, concurrent), wait: wait}
	l.waiting.Store(int32(waiting))
	return l
}

// acquire takes a slot, or returns the tool error to answer instead.
func (l *callLimiter) acquire(ctx context.Context) *mcp.CallToolResult {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	if l.waiting.Add(-1) < 0 {
		l.waiting.Add(1)
		return busy("too many calls are waiting")
	}
	defer l.waiting.Add(1)
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-timer.C:
		return busy(fmt.Sprintf("no call slot freed within %s", l.wait))
	case <-ctx.Done():
		return busy("the call was cancelled while waiting for a slot")
	}
}

func (l *callLimiter) release() { <-l.slots }

func busy(why string) *mcp.CallToolResult {
	return mcp.NewToolResultError(fmt.Sprintf("server_busy: %s (at most %d calls run at once); retry later", why, maxConcurrentCalls))
}

// withBodyDeadline bounds the time to read r's body; the deadline is lifted again before
// the call runs, so a long call is not cut. After a failed read the connection is closed
// after the answer: the server would otherwise try to read the rest of the body first.
func withBodyDeadline(w http.ResponseWriter, timeout time.Duration, read func() error) error {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	if err := read(); err != nil {
		w.Header().Set("Connection", "close")
		return err
	}
	_ = rc.SetReadDeadline(time.Time{})
	return nil
}
