package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/time/rate"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
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

// Reasons a call is rejected, the label of cantus_adapter_rejected_calls_total.
const (
	rejectedRateLimited = "rate_limited"
	rejectedQueueFull   = "queue_full"
	rejectedQueueWait   = "queue_wait"
	rejectedCancelled   = "cancelled"
)

// callLimiter admits at most a number of calls at once and lets a number more wait,
// each for at most a while: by default maxConcurrentCalls, maxWaitingCalls and
// maxCallWait, or the config's limits.
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

// callLimiterFor is the limiter of the config's limits, or of the defaults.
func callLimiterFor(limits *adapterconfig.Limits) *callLimiter {
	if limits == nil {
		return newCallLimiter(maxConcurrentCalls, maxWaitingCalls, maxCallWait)
	}
	return newCallLimiter(limits.ConcurrentCalls, limits.QueueLength, limits.QueueWait.Duration)
}

// acquire takes a slot, or returns the tool error to answer instead and the reason.
func (l *callLimiter) acquire(ctx context.Context) (*mcp.CallToolResult, string) {
	select {
	case l.slots <- struct{}{}:
		return nil, ""
	default:
	}
	if l.waiting.Add(-1) < 0 {
		l.waiting.Add(1)
		return l.busy("too many calls are waiting"), rejectedQueueFull
	}
	defer l.waiting.Add(1)
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	select {
	case l.slots <- struct{}{}:
		return nil, ""
	case <-timer.C:
		return l.busy(fmt.Sprintf("no call slot freed within %s", l.wait)), rejectedQueueWait
	case <-ctx.Done():
		return l.busy("the call was cancelled while waiting for a slot"), rejectedCancelled
	}
}

func (l *callLimiter) release() { <-l.slots }

func (l *callLimiter) busy(why string) *mcp.CallToolResult {
	return mcp.NewToolResultError(fmt.Sprintf("server_busy: %s (at most %d calls run at once in this pod); retry later", why, cap(l.slots)))
}

func perCallerOf(limits *adapterconfig.Limits) *adapterconfig.CallerRate {
	if limits == nil {
		return nil
	}
	return limits.PerCaller
}

// maxTrackedCallers bounds the per-caller buckets kept: past it the idle ones (full
// buckets, which limit nothing) are dropped, and if that is not enough, all of them.
const maxTrackedCallers = 10_000

// callerRates is a token bucket per caller identity (see callerIdentity).
type callerRates struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newCallerRates(r *adapterconfig.CallerRate) *callerRates {
	if r == nil {
		return nil
	}
	return &callerRates{limit: rate.Limit(r.CallsPerSecond), burst: r.Burst, buckets: map[string]*rate.Limiter{}}
}

// admit takes a call from caller's bucket, or says how long until one is there.
func (c *callerRates) admit(caller string, now time.Time) (bool, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buckets[caller]
	if b == nil {
		if len(c.buckets) >= maxTrackedCallers {
			c.dropIdleLocked(now)
		}
		b = rate.NewLimiter(c.limit, c.burst)
		c.buckets[caller] = b
	}
	r := b.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		return false, delay
	}
	return true, 0
}

func (c *callerRates) dropIdleLocked(now time.Time) {
	for caller, b := range c.buckets {
		if b.TokensAt(now) >= float64(c.burst) {
			delete(c.buckets, caller)
		}
	}
	if len(c.buckets) >= maxTrackedCallers {
		clear(c.buckets)
	}
}

// refuseRateLimited answers a call past its caller's rate: 429 with Retry-After, before
// the call starts, and a JSON-RPC error for clients that read the body.
func refuseRateLimited(w http.ResponseWriter, id json.RawMessage, retryAfter time.Duration) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	seconds := int(math.Ceil(retryAfter.Seconds()))
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      id,
		"error": map[string]any{
			"code":    -32000,
			"message": fmt.Sprintf("rate_limited: this caller is over its call rate for this server; retry after %ds", seconds),
		},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(max(seconds, 1)))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
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
