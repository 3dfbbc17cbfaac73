package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/time/rate"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Limits that keep one client from taking a server from everyone else.
const (
	// DefaultBodyReadTimeout bounds reading one POST body, so a client that sends it a
	// byte at a time cannot hold a connection and its memory (headers have
	// ReadHeaderTimeout).
	DefaultBodyReadTimeout = 30 * time.Second
)

// Reasons a call is rejected, the label of cantus_adapter_rejected_calls_total.
const (
	RejectedRateLimited = "rate_limited"
	RejectedQueueFull   = "queue_full"
	RejectedQueueWait   = "queue_wait"
	RejectedCancelled   = "cancelled"
)

// CallLimiter admits at most a number of calls at once and lets a number more wait,
// each for at most a while: by default adapterconfig.DefaultConcurrentCalls,
// DefaultQueueLength and DefaultQueueWait, or the config's limits.
type CallLimiter struct {
	slots   chan struct{}
	waiting atomic.Int32
	wait    time.Duration
}

// NewCallLimiter lets concurrent calls run at once and waiting more wait, each for at
// most wait.
func NewCallLimiter(concurrent, waiting int, wait time.Duration) *CallLimiter {
	l := &CallLimiter{slots: make(chan struct{}, concurrent), wait: wait}
	l.waiting.Store(int32(waiting))
	return l
}

// CallLimiterFor is the limiter of the config's limits, or of the defaults.
func CallLimiterFor(limits *adapterconfig.Limits) *CallLimiter {
	if limits == nil {
		return NewCallLimiter(adapterconfig.DefaultConcurrentCalls, adapterconfig.DefaultQueueLength, adapterconfig.DefaultQueueWait)
	}
	return NewCallLimiter(limits.ConcurrentCalls, limits.QueueLength, limits.QueueWait.Duration)
}

// Acquire takes a slot, or returns the tool error to answer instead and the reason.
func (l *CallLimiter) Acquire(ctx context.Context) (*mcp.CallToolResult, string) {
	select {
	case l.slots <- struct{}{}:
		return nil, ""
	default:
	}
	if l.waiting.Add(-1) < 0 {
		l.waiting.Add(1)
		return l.busy("too many calls are waiting"), RejectedQueueFull
	}
	defer l.waiting.Add(1)
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	select {
	case l.slots <- struct{}{}:
		return nil, ""
	case <-timer.C:
		return l.busy(fmt.Sprintf("no call slot freed within %s", l.wait)), RejectedQueueWait
	case <-ctx.Done():
		return l.busy("the call was cancelled while waiting for a slot"), RejectedCancelled
	}
}

// Release frees the slot an Acquire took.
func (l *CallLimiter) Release() { <-l.slots }

func (l *CallLimiter) busy(why string) *mcp.CallToolResult {
	return mcp.NewToolResultError(fmt.Sprintf("server_busy: %s (at most %d calls run at once in this pod); retry later", why, cap(l.slots)))
}

// PerCallerOf is the per-caller rate of limits; nil without one.
func PerCallerOf(limits *adapterconfig.Limits) *adapterconfig.CallerRate {
	if limits == nil {
		return nil
	}
	return limits.PerCaller
}

// maxTrackedCallers bounds the per-caller buckets kept: past it the idle ones (full
// buckets, which limit nothing) are dropped, and if that is not enough, all of them.
const maxTrackedCallers = 10_000

// CallerRates is a token bucket per caller (see CallerKey), from which every request
// the caller sends takes one token, whatever its method.
type CallerRates struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// NewCallerRates buckets each caller at rate r; nil (no limit) when r is nil.
func NewCallerRates(r *adapterconfig.CallerRate) *CallerRates {
	if r == nil {
		return nil
	}
	return &CallerRates{limit: rate.Limit(r.CallsPerSecond), burst: r.Burst, buckets: map[string]*rate.Limiter{}}
}

// Admit takes a request from caller's bucket, or says how long until one is there.
func (c *CallerRates) Admit(caller string, now time.Time) (bool, time.Duration) {
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

func (c *CallerRates) dropIdleLocked(now time.Time) {
	for caller, b := range c.buckets {
		if b.TokensAt(now) >= float64(c.burst) {
			delete(c.buckets, caller)
		}
	}
	if len(c.buckets) >= maxTrackedCallers {
		clear(c.buckets)
	}
}

// RefuseRateLimited answers a request past its caller's rate: 429 with Retry-After, before
// the call starts, and a JSON-RPC error for clients that read the body.
func RefuseRateLimited(w http.ResponseWriter, id json.RawMessage, retryAfter time.Duration) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	seconds := int(math.Ceil(retryAfter.Seconds()))
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      id,
		"error": map[string]any{
			"code":    -32000,
			"message": fmt.Sprintf("rate_limited: this caller is over its request rate for this server (every request counts); retry after %ds", seconds),
		},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(max(seconds, 1)))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
}

// WithBodyDeadline bounds the time to read r's body; the deadline is lifted again before
// the call runs, so a long call is not cut. After a failed read the connection is closed
// after the answer: the server would otherwise try to read the rest of the body first.
func WithBodyDeadline(w http.ResponseWriter, timeout time.Duration, read func() error) error {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	if err := read(); err != nil {
		w.Header().Set("Connection", "close")
		return err
	}
	_ = rc.SetReadDeadline(time.Time{})
	return nil
}

// MaxListenStreams bounds the subscriptions/listen streams one pod keeps open: each
// holds a connection and a goroutine for as long as its client likes.
const MaxListenStreams = adapterconfig.MaxListenStreams

// CallerShareOf is the part of each shared pool one caller may hold under limits.
func CallerShareOf(limits *adapterconfig.Limits) float64 {
	if limits == nil || limits.CallerShare <= 0 || limits.CallerShare > 1 {
		return adapterconfig.DefaultCallerShare
	}
	return limits.CallerShare
}

// StreamShares bounds the streams open at once, and one caller's part of them.
type StreamShares struct {
	size, perCaller int

	mu   sync.Mutex
	open int
	held map[string]int // by caller key
}

// NewStreamShares bounds the streams to size, a caller's to fraction of them.
func NewStreamShares(size int, fraction float64) *StreamShares {
	return &StreamShares{size: size, perCaller: gateway.ShareOf(size, fraction), held: map[string]int{}}
}

// Take opens a stream of caller, or says why not; an opened one must be given back.
func (p *StreamShares) Take(caller string) (why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.held[caller] >= p.perCaller:
		return fmt.Sprintf("too_many_streams: this caller has %d subscriptions/listen streams open, at most %d of the %d this pod keeps may be one caller's; close one first",
			p.held[caller], p.perCaller, p.size)
	case p.open >= p.size:
		return fmt.Sprintf("too_many_streams: this pod keeps %d subscriptions/listen streams open, the most it may; retry later", p.size)
	}
	p.open++
	p.held[caller]++
	return ""
}

// Give gives back a stream Take opened.
func (p *StreamShares) Give(caller string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open--
	if p.held[caller]--; p.held[caller] <= 0 {
		delete(p.held, caller)
	}
}

// RefuseOverShare answers a request its caller may not make now, as a rate refusal
// is answered: 429, Retry-After, and a JSON-RPC error saying why.
func RefuseOverShare(w http.ResponseWriter, id json.RawMessage, why string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      id,
		"error":   map[string]any{"code": -32000, "message": why},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
}

// RefusalLogEvery is how often at most one caller's refusals are logged: a caller
// refused many times a second must not flood the log.
const RefusalLogEvery = 10 * time.Second

// RefusalLog logs a caller's refusals at most once per RefusalLogEvery, with how many
// there were since the last line.
type RefusalLog struct {
	mu       sync.Mutex
	byCaller map[string]*refusals
}

type refusals struct {
	logged time.Time
	since  int // refusals not logged since then
}

// Note logs the refusal of caller (a CallerKey) described by msg and keysAndValues,
// unless one of the caller's was logged less than RefusalLogEvery ago.
func (l *RefusalLog) Note(log logr.Logger, caller string, now time.Time, msg string, keysAndValues ...any) {
	l.mu.Lock()
	r := l.byCaller[caller]
	if r == nil {
		if l.byCaller == nil || len(l.byCaller) >= maxTrackedCallers {
			l.forgetQuietLocked(now)
		}
		r = &refusals{}
		l.byCaller[caller] = r
	}
	if !r.logged.IsZero() && now.Sub(r.logged) < RefusalLogEvery {
		r.since++
		l.mu.Unlock()
		return
	}
	suppressed := r.since
	r.logged, r.since = now, 0
	l.mu.Unlock()
	log.Info(msg, append([]any{"caller", printableCaller(caller), "refusedSinceLastLine", suppressed}, keysAndValues...)...)
}

// forgetQuietLocked drops the callers last logged long enough ago; all of them if that
// is not enough.
func (l *RefusalLog) forgetQuietLocked(now time.Time) {
	if l.byCaller == nil {
		l.byCaller = map[string]*refusals{}
		return
	}
	for caller, r := range l.byCaller {
		if now.Sub(r.logged) >= RefusalLogEvery {
			delete(l.byCaller, caller)
		}
	}
	if len(l.byCaller) >= maxTrackedCallers {
		clear(l.byCaller)
	}
}

// printableCaller is a caller key as a log shows it: the NULs between an identity's
// parts as "/".
func printableCaller(key string) string { return strings.ReplaceAll(key, "\x00", "/") }

// PerCaller is how many of the streams one caller may hold.
func (p *StreamShares) PerCaller() int { return p.perCaller }
