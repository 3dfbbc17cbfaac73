// Package stdioproxy serves an MCP server that speaks stdio (newline-delimited JSON-RPC
// on its stdin and stdout) over streamable HTTP. The adapter binary's bridge subcommand
// runs it; the operator's runtimes (internal/workload) start such bridges for
// RemoteToolImports with transport stdio. It depends on no Kubernetes client, so the
// adapter binary stays free of one.
//
// # The proxy
//
// One Bridge runs ONE child process and shares it among every HTTP client:
//
//   - POST /mcp with a JSON-RPC request: the request is written to the child's stdin as
//     one line, its id replaced by a number unique within the bridge (clients pick their
//     ids independently, so two clients' "id":1 must not meet in the child); the answer
//     with that number is sent back as application/json with the client's own id. The id
//     is spliced in and out of the line; every other byte passes through unchanged, so
//     tool schemas arrive exactly as the server wrote them.
//   - POST a notification (no id): written to the child, answered 202. A
//     notifications/cancelled is rewritten to the bridge's id of the request it cancels
//     when exactly one waiting request of the same session has that client id, and
//     dropped otherwise: a client cancels only its own requests.
//   - POST a JSON-RPC response (a client answering a server request): answered 202 and
//     dropped, as the bridge never relays server requests (below).
//   - POST a batch (a JSON array): refused, 400 with a JSON-RPC error (batching was
//     removed from MCP in 2025-06-18).
//   - GET and DELETE /mcp: 405. The bridge opens no server-to-client stream and keeps
//     no session state. It answers an initialize with a random Mcp-Session-Id only so
//     that a client's later notifications/cancelled can be told apart from another
//     client's (client ids are not unique across clients); requests without a session
//     id are served all the same, and can be cancelled only by closing them.
//   - A client that closes its request before the answer (mcp-go's way of cancelling
//     over HTTP) cancels it in the child too.
//
// # Who may call
//
// With Options.Token set, every request to /mcp must carry "Authorization: Bearer
// <token>" and is refused with 401 otherwise, before its body is read; /healthz and
// /readyz stay open for the kubelet. The operator gives each bridge its own random
// token and sends it from its handshake and from the gateways of the SkillServers that
// import the bridge; a NetworkPolicy admits only those pods and the operator.
//
// What the bridge does not relay, because a stateless HTTP exchange has no way back to
// the client that caused it: notifications from the child (logging messages,
// list_changed, progress, resource updates) are dropped and logged at V(1); requests from
// the child (sampling, elicitation, roots/list) are answered by the bridge itself with a
// JSON-RPC "method not found" error so the child does not wait for them, except ping,
// which the bridge answers with an empty result.
//
// The child is one MCP session shared by every client: it sees each client's initialize
// (servers built on the MCP SDKs answer every one of them) and the capabilities of the
// last one. The operator only lists tools, which needs nothing more.
//
// Failures are JSON-RPC errors whose message begins with "mcp_remote_error: ", the
// marker the adapter's gateway also uses for a failing remote: the child not running (HTTP 503, Retry-After, "stdio server is
// not running (restarting in Xs)"), the child exiting while a request waits ("stdio
// server exited: exit status 1"), no answer within RequestTimeout, an answer longer than
// MaxMessageBytes.
//
// Like mcp-go's streamable HTTP server, the bridge refuses requests that arrive over a
// loopback connection with a Host (or Origin) that is not a loopback name, with 403:
// that is what DNS rebinding looks like.
package stdioproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Paths the bridge serves.
const (
	PathMCP     = "/mcp"
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
)

// DefaultPort is where a bridge serves unless told otherwise; the bridge pods of the
// kubernetes runtime use it.
const DefaultPort = 8765

// Defaults of Options.
const (
	DefaultRequestTimeout        = 60 * time.Second
	DefaultMaxMessageBytes       = 4 << 20
	DefaultRestartBackoffInitial = time.Second
	DefaultRestartBackoffMax     = 30 * time.Second
	DefaultRestartResetAfter     = time.Minute
	DefaultStopGrace             = 5 * time.Second
	DefaultStderrLineBytes       = 4 << 10
	DefaultStderrLinesPerSecond  = 50
)

// RemoteErrorPrefix begins the message of every error the bridge reports for the stdio
// server, so that clients tell a failing remote by prefix as they do behind the gateway.
const RemoteErrorPrefix = "mcp_remote_error: "

// JSON-RPC error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	// codeRemoteError is for failures of the stdio server: not running, exited, no
	// answer in time, answer too large.
	codeRemoteError = -32000
)

// Options tune a Bridge; zero values take the defaults.
type Options struct {
	// Logger receives the child's stderr and the bridge's own messages.
	Logger logr.Logger
	// Env is the child's environment; nil inherits the bridge's.
	Env []string
	// Token, when set, is the bearer token every /mcp request must carry.
	Token string
	// Dir is the child's working directory; "" inherits the bridge's.
	Dir string
	// RequestTimeout bounds the wait for one answer (default 60s).
	RequestTimeout time.Duration
	// MaxMessageBytes bounds one message in either direction (default 4 MiB).
	MaxMessageBytes int
	// RestartBackoffInitial is the delay before the first restart (default 1s); it
	// doubles with every exit up to RestartBackoffMax (default 30s), with ±20% jitter.
	RestartBackoffInitial time.Duration
	RestartBackoffMax     time.Duration
	// RestartResetAfter: a child that ran this long restarts after the initial delay
	// again (default 1m).
	RestartResetAfter time.Duration
	// StopGrace is how long the child has after SIGTERM before SIGKILL (default 5s).
	StopGrace time.Duration
	// StderrLineBytes cuts longer stderr lines (default 4 KiB).
	StderrLineBytes int
	// StderrLinesPerSecond bounds the stderr lines logged a second (default 50); the
	// others are counted and the count is logged.
	StderrLinesPerSecond int
}

func (o *Options) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.RequestTimeout, DefaultRequestTimeout)
	def(&o.RestartBackoffInitial, DefaultRestartBackoffInitial)
	def(&o.RestartBackoffMax, DefaultRestartBackoffMax)
	def(&o.RestartResetAfter, DefaultRestartResetAfter)
	def(&o.StopGrace, DefaultStopGrace)
	if o.RestartBackoffMax < o.RestartBackoffInitial {
		o.RestartBackoffMax = o.RestartBackoffInitial
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.StderrLineBytes < 16 {
		o.StderrLineBytes = DefaultStderrLineBytes
	}
	if o.StderrLinesPerSecond <= 0 {
		o.StderrLinesPerSecond = DefaultStderrLinesPerSecond
	}
}

// Bridge serves one stdio MCP server over streamable HTTP. Create it with New, run the
// child with Run, and serve Handler (or the Bridge itself at /mcp).
type Bridge struct {
	opts Options
	log  logr.Logger
	sup  *supervisor
	mux  *http.ServeMux

	nextID      atomic.Int64
	draining    atomic.Bool
	tokenDigest [sha256.Size]byte

	mu           sync.Mutex
	pending      map[int64]*call
	exitedGen    uint64 // children up to this generation have exited
	exitedStatus string
}

// call is a request waiting for the child's answer.
type call struct {
	origID json.RawMessage
	// owner is the session that sent the request (ownerOf); only that session may
	// cancel it by notification.
	owner string
	gen   uint64
	done  chan outcome // buffered: the deliverer never blocks
}

// outcome is the child's answer (the id already the client's) or an error for it.
type outcome struct {
	line []byte
	err  *rpcError
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// New returns a bridge for the command argv (argv[0] is looked up in PATH; it is run as
// a list, never through a shell). Nothing starts before Run.
func New(argv []string, opts Options) (*Bridge, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("bridge: no command to run")
	}
	opts.setDefaults()
	b := &Bridge{
		opts:    opts,
		log:     opts.Logger,
		pending: map[int64]*call{},
	}
	if opts.Token != "" {
		b.tokenDigest = sha256.Sum256([]byte(opts.Token))
	}
	b.sup = newSupervisor(append([]string(nil), argv...), &b.opts, b.log, b)
	b.mux = http.NewServeMux()
	b.mux.Handle(PathMCP, b)
	b.mux.HandleFunc(PathHealthz, b.serveHealthz)
	b.mux.HandleFunc(PathReadyz, b.serveReadyz)
	return b, nil
}

// Run starts the child, restarts it whenever it exits, and returns once ctx ended and
// the child was stopped (stdin closed, SIGTERM, SIGKILL after StopGrace).
func (b *Bridge) Run(ctx context.Context) error {
	b.sup.run(ctx)
	return nil
}

// Handler serves /mcp, /healthz (200 while the bridge runs, whatever the child does)
// and /readyz (200 while the child runs and the bridge is not draining).
func (b *Bridge) Handler() http.Handler { return b.mux }

// Drain makes /readyz fail from now on, so that endpoints stop routing here while
// in-flight requests finish; requests are still served.
func (b *Bridge) Drain() { b.draining.Store(true) }

// Ready reports whether the child runs, and if not, why.
func (b *Bridge) Ready() (bool, string) {
	if b.draining.Load() {
		return false, "the bridge is shutting down"
	}
	if c, nr := b.sup.running(); c == nil {
		return false, nr.describe()
	}
	return true, "stdio server running"
}

// Stats are counters for tests and diagnostics.
type Stats struct {
	Running bool
	// Starts counts the child's starts (1 + restarts).
	Starts   int
	LastExit string
	// Pending requests wait for an answer.
	Pending int
	// StderrLines read; StderrDropped of them were not logged (rate limit);
	// StderrTruncated were cut at StderrLineBytes.
	StderrLines, StderrDropped, StderrTruncated int64
}

// Stats returns the bridge's counters.
func (b *Bridge) Stats() Stats {
	s := b.sup
	s.mu.Lock()
	st := Stats{Running: s.cur != nil, Starts: s.starts, LastExit: s.lastExit}
	s.mu.Unlock()
	b.mu.Lock()
	st.Pending = len(b.pending)
	b.mu.Unlock()
	st.StderrLines = s.lines.Load()
	st.StderrDropped = s.dropped.Load()
	st.StderrTruncated = s.truncated.Load()
	return st
}

func (b *Bridge) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}

func (b *Bridge) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	ok, why := b.Ready()
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte(why))
}

func (nr notRunning) describe() string {
	if nr.stopping {
		return "stdio server is not running (the bridge is shutting down)"
	}
	s := fmt.Sprintf("stdio server is not running (restarting in %s)", ceilSeconds(nr.restartIn))
	if nr.lastExit != "" {
		s += "; last exit: " + nr.lastExit
	}
	return s
}

// ceilSeconds formats d as whole seconds, rounded up: "3s".
func ceilSeconds(d time.Duration) string {
	return strconv.Itoa(int(math.Ceil(d.Seconds()))) + "s"
}

// ServeHTTP serves the MCP endpoint.
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rejectDNSRebinding(w, r) {
		return
	}
	if !b.authorized(r) {
		refuseUnauthorized(w)
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodDelete:
		// No sessions and no server-to-client stream: the spec's answer is 405.
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "the stdio bridge serves stateless streamable HTTP: POST only", http.StatusMethodNotAllowed)
		return
	default:
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}

	var body bytes.Buffer
	_, err := body.ReadFrom(http.MaxBytesReader(w, r.Body, int64(b.opts.MaxMessageBytes)))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, nil, codeInvalidRequest,
				fmt.Sprintf("the request is larger than the bridge's limit of %d bytes", b.opts.MaxMessageBytes), nil)
			return
		}
		writeError(w, http.StatusBadRequest, nil, codeParseError, "reading the request body: "+err.Error(), nil)
		return
	}
	msg := bytes.TrimSpace(body.Bytes())
	switch {
	case len(msg) == 0:
		writeError(w, http.StatusBadRequest, nil, codeInvalidRequest, "empty request body: POST one JSON-RPC message", nil)
		return
	case msg[0] == '[':
		writeError(w, http.StatusBadRequest, nil, codeInvalidRequest,
			"JSON-RPC batches are not supported by the stdio bridge (MCP 2025-06-18 removed batching): POST one message per request", nil)
		return
	case !json.Valid(msg):
		writeError(w, http.StatusBadRequest, nil, codeParseError, "the request body is not valid JSON", nil)
		return
	case msg[0] != '{':
		writeError(w, http.StatusBadRequest, nil, codeInvalidRequest, "a JSON-RPC message is a JSON object", nil)
		return
	}
	members := scanMembers(msg)
	id, hasID := members["id"]
	method, hasMethod := members["method"]
	switch {
	case hasMethod && hasID:
		if !validID(id.raw) {
			writeError(w, http.StatusBadRequest, nil, codeInvalidRequest, "a request id must be a string or a number", nil)
			return
		}
		b.forwardRequest(w, r, msg, id, methodName(method))
	case hasMethod:
		b.forwardNotification(w, r, msg, methodName(method), ownerOf(r))
	case hasID:
		// A client answering a server request: the bridge answered those itself.
		b.log.V(1).Info("dropped a JSON-RPC response from a client: the bridge does not relay server requests")
		w.WriteHeader(http.StatusAccepted)
	default:
		writeError(w, http.StatusBadRequest, nil, codeInvalidRequest, "a JSON-RPC message needs a method (request, notification) or an id (response)", nil)
	}
}

func validID(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	c := raw[0]
	return c == '"' || c == '-' || (c >= '0' && c <= '9')
}

func methodName(m member) string {
	var s string
	if m.raw != nil {
		_ = json.Unmarshal(m.raw, &s)
	}
	return s
}

func (b *Bridge) forwardRequest(w http.ResponseWriter, r *http.Request, msg []byte, id member, method string) {
	c, nr := b.sup.running()
	if c == nil {
		b.writeNotRunning(w, id.raw, nr)
		return
	}
	n := b.nextID.Add(1)
	line := splice(msg, id, strconv.AppendInt(nil, n, 10))
	cl := &call{origID: id.raw, owner: ownerOf(r), gen: c.gen, done: make(chan outcome, 1)}
	b.mu.Lock()
	if c.gen <= b.exitedGen {
		status := b.exitedStatus
		b.mu.Unlock()
		writeError(w, http.StatusOK, id.raw, codeRemoteError, RemoteErrorPrefix+"stdio server exited: "+status, nil)
		return
	}
	b.pending[n] = cl
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(r.Context(), b.opts.RequestTimeout)
	defer cancel()
	if err := c.enqueue(ctx, line); err != nil && !errors.Is(err, errChildExited) {
		// errChildExited: the exit handler fails the call; wait for that below.
		b.giveUp(w, r, c, n, id.raw)
		return
	}
	select {
	case out := <-cl.done:
		if out.err != nil {
			writeError(w, http.StatusOK, id.raw, out.err.Code, out.err.Message, out.err.Data)
			return
		}
		if method == "initialize" && r.Header.Get(HeaderSessionID) == "" {
			w.Header().Set(HeaderSessionID, newSessionID())
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out.line)
	case <-ctx.Done():
		b.giveUp(w, r, c, n, id.raw)
	}
}

// giveUp ends a request that got no answer in time (or whose client left): it is
// forgotten, the child is told to cancel it, and the client gets an error.
func (b *Bridge) giveUp(w http.ResponseWriter, r *http.Request, c *child, n int64, origID json.RawMessage) {
	b.mu.Lock()
	delete(b.pending, n)
	b.mu.Unlock()
	if r.Context().Err() != nil {
		// The client went away, which is how an HTTP client cancels its own request:
		// nobody to answer, and the child is told to stop.
		c.tryEnqueue(cancelledLine(n, "the client closed the request"))
		return
	}
	c.tryEnqueue(cancelledLine(n, fmt.Sprintf("the bridge gave up after %s", b.opts.RequestTimeout)))
	writeError(w, http.StatusOK, origID, codeRemoteError,
		fmt.Sprintf("%sstdio server did not answer within %s", RemoteErrorPrefix, b.opts.RequestTimeout), nil)
}

// cancelledLine is a notifications/cancelled of the bridge's request n.
func cancelledLine(n int64, reason string) []byte {
	line, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/cancelled",
		"params":  map[string]any{"requestId": n, "reason": reason},
	})
	return line
}

func (b *Bridge) forwardNotification(w http.ResponseWriter, r *http.Request, msg []byte, method, owner string) {
	c, nr := b.sup.running()
	if c == nil {
		b.writeNotRunning(w, nil, nr)
		return
	}
	if method == "notifications/cancelled" {
		var ok bool
		if msg, ok = b.rewriteCancel(msg, c.gen, owner); !ok {
			w.WriteHeader(http.StatusAccepted)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), b.opts.RequestTimeout)
	defer cancel()
	switch err := c.enqueue(ctx, msg); {
	case errors.Is(err, errChildExited):
		b.mu.Lock()
		status := b.exitedStatus
		b.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, nil, codeRemoteError, RemoteErrorPrefix+"stdio server exited: "+status, nil)
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, nil, codeRemoteError,
			RemoteErrorPrefix+"stdio server is not reading its input", nil)
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

// rewriteCancel points a client's notifications/cancelled at the bridge id of the
// request it names. Client ids are not unique across clients, so only a request of the
// same session (owner) counts, and a notification without a session cancels nothing:
// when no waiting request of the session or more than one has that id, the
// notification is dropped (ok false) rather than cancelling someone else's request.
func (b *Bridge) rewriteCancel(msg []byte, gen uint64, owner string) ([]byte, bool) {
	if owner == "" {
		b.log.V(1).Info("dropped a notifications/cancelled without a session: only the session that sent a request may cancel it")
		return nil, false
	}
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason,omitempty"`
		} `json:"params"`
	}
	if err := json.Unmarshal(msg, &n); err != nil || len(n.Params.RequestID) == 0 {
		return nil, false
	}
	want := compactJSON(n.Params.RequestID)
	var match []int64
	b.mu.Lock()
	for id, cl := range b.pending {
		if cl.gen == gen && cl.owner == owner && bytes.Equal(compactJSON(cl.origID), want) {
			match = append(match, id)
		}
	}
	b.mu.Unlock()
	if len(match) != 1 {
		b.log.V(1).Info("dropped a notifications/cancelled: it names no single waiting request",
			"requestId", string(want), "matches", len(match))
		return nil, false
	}
	params := map[string]any{"requestId": match[0]}
	if n.Params.Reason != "" {
		params["reason"] = n.Params.Reason
	}
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
	return out, true
}

func compactJSON(raw []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

func (b *Bridge) writeNotRunning(w http.ResponseWriter, id json.RawMessage, nr notRunning) {
	var data map[string]string
	if !nr.stopping {
		w.Header().Set("Retry-After", strings.TrimSuffix(ceilSeconds(nr.restartIn), "s"))
		data = map[string]string{"restartIn": ceilSeconds(nr.restartIn)}
		if nr.lastExit != "" {
			data["lastExit"] = nr.lastExit
		}
	}
	msg := "stdio server is not running (the bridge is shutting down)"
	if !nr.stopping {
		msg = fmt.Sprintf("stdio server is not running (restarting in %s)", ceilSeconds(nr.restartIn))
	}
	writeError(w, http.StatusServiceUnavailable, id, codeRemoteError, RemoteErrorPrefix+msg, data)
}

// ---- messages from the child (childSink) ----

func (b *Bridge) childLine(c *child, line []byte) {
	if !json.Valid(line) || line[0] != '{' {
		b.log.V(1).Info("ignored a stdout line of the stdio server that is not a JSON-RPC message", "bytes", len(line))
		return
	}
	members := scanMembers(line)
	id, hasID := members["id"]
	method, hasMethod := members["method"]
	switch {
	case hasMethod && hasID && validID(id.raw):
		b.answerServerRequest(c, id.raw, methodName(method))
	case hasMethod:
		b.log.V(1).Info("dropped a notification of the stdio server: the bridge relays no server-to-client messages",
			"method", methodName(method))
	case hasID:
		n, ok := bridgeID(id.raw)
		var cl *call
		if ok {
			b.mu.Lock()
			cl = b.pending[n]
			delete(b.pending, n)
			b.mu.Unlock()
		}
		if cl == nil {
			b.log.V(1).Info("dropped an answer of the stdio server that no request waits for", "id", string(id.raw))
			return
		}
		cl.done <- outcome{line: splice(line, id, cl.origID)}
	default:
		b.log.V(1).Info("ignored a JSON object of the stdio server that is no JSON-RPC message")
	}
}

// answerServerRequest answers a request of the child itself: ping with an empty result,
// anything else with "method not found", since no client can be reached for it.
func (b *Bridge) answerServerRequest(c *child, id json.RawMessage, method string) {
	var answer []byte
	if method == "ping" {
		answer = []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{}}`)
	} else {
		b.log.V(1).Info("refused a request of the stdio server: the bridge relays no server-to-client requests", "method", method)
		answer, _ = json.Marshal(map[string]any{
			"jsonrpc": "2.0",
			"id":      id,
			"error": rpcError{
				Code:    codeMethodNotFound,
				Message: fmt.Sprintf("the cantus stdio bridge does not relay server-to-client requests (%s): its HTTP clients cannot be reached", method),
			},
		})
	}
	if !c.tryEnqueue(answer) {
		b.log.V(1).Info("could not answer a request of the stdio server: its input queue is full", "method", method)
	}
}

func bridgeID(raw []byte) (int64, bool) {
	s := string(raw)
	if len(s) > 1 && s[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func (b *Bridge) childOversized(_ *child, s *topScanner, size int64) {
	id, hasID := s.members["id"]
	_, hasMethod := s.members["method"]
	var cl *call
	if hasID && !hasMethod && id.raw != nil {
		if n, ok := bridgeID(id.raw); ok {
			b.mu.Lock()
			cl = b.pending[n]
			delete(b.pending, n)
			b.mu.Unlock()
		}
	}
	b.log.Info("dropped a message of the stdio server larger than the limit",
		"bytes", size, "limit", b.opts.MaxMessageBytes, "answered", cl != nil)
	if cl != nil {
		cl.done <- outcome{err: &rpcError{
			Code: codeRemoteError,
			Message: fmt.Sprintf("%sthe stdio server's answer is %d bytes, more than the bridge's limit of %d bytes",
				RemoteErrorPrefix, size, b.opts.MaxMessageBytes),
		}}
	}
}

func (b *Bridge) childExited(c *child, status string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.exitedGen, b.exitedStatus = c.gen, status
	for n, cl := range b.pending {
		if cl.gen <= c.gen {
			delete(b.pending, n)
			cl.done <- outcome{err: &rpcError{Code: codeRemoteError, Message: RemoteErrorPrefix + "stdio server exited: " + status}}
		}
	}
}

// ---- HTTP helpers ----

func writeError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string, data any) {
	if id == nil {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error":   rpcError{Code: code, Message: message, Data: data},
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// rejectDNSRebinding answers 403 to a request that arrived over a loopback connection
// with a Host or Origin that is not a loopback name (as mcp-go's streamable HTTP server
// does for the Host). Requests over other addresses (a pod IP) are not browsers'
// business and pass.
func rejectDNSRebinding(w http.ResponseWriter, r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopbackHost(local.String()) {
		return false
	}
	if !isLoopbackHost(r.Host) {
		http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !isLoopbackHost(u.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Origin header %q", origin), http.StatusForbidden)
			return true
		}
	}
	return false
}

// isLoopbackHost reports whether a host or host:port names a loopback address.
func isLoopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
