package gateway

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/callercred"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// Markers begin the text of a re-exported tool's failed result, so that an agent (or a
// program reading the transcript) can tell the remote's own failure from not reaching
// it by prefix.
const (
	// MarkerRemoteError says that the remote answered, with a failed tool result or a
	// JSON-RPC error.
	MarkerRemoteError = "mcp_remote_error: "
	// MarkerCallFailed says that the remote could not be reached, the handshake failed,
	// or no answer came.
	MarkerCallFailed = "mcp_call_failed: "
)

// remoteConnectTimeout bounds one connect (initialize) to a remote. A call waits for
// it at most its own timeout; a connect that outlives the call still serves the next.
const remoteConnectTimeout = 30 * time.Second

// rereadEvery re-reads header and CA files even when their size and modification
// time look unchanged, in case a rewrite kept both.
const rereadEvery = 10 * time.Second

// remoteKey identifies a pooled remote: tools with the same URL, transport, header
// files, CA file and relayed requests share one client session. (The relayed requests
// are the capabilities the session declares, so imports that relay differently need
// sessions of their own.)
type remoteKey struct {
	url, transport, headerFiles, caFile, addresses, relay string
	// callers is, for an import that sends each caller's credential, the import and its
	// callerCredentials: such a remote is the import's own.
	callers string
}

func remoteKeyOf(r *adapterconfig.RemoteBackend) remoteKey {
	pairs := make([]string, 0, len(r.HeaderFiles))
	for _, name := range slices.Sorted(maps.Keys(r.HeaderFiles)) {
		pairs = append(pairs, http.CanonicalHeaderKey(name)+"="+r.HeaderFiles[name])
	}
	key := remoteKey{url: r.URL, transport: r.Transport, headerFiles: strings.Join(pairs, "\n"), caFile: r.CAFile,
		addresses: strings.Join(r.Addresses, ","), relay: strings.Join(r.Relay, ",")}
	if r.CallerCredentials != nil {
		cfg, _ := json.Marshal(r.CallerCredentials)
		key.callers = r.Import + "\n" + string(cfg)
	}
	return key
}

// Pool holds the remotes the served tools use: tools that name the same remote (URL,
// transport, header files, CA file, addresses) share its session.
type Pool struct {
	log     logr.Logger
	metrics *Metrics

	relay *relaySettings
	// tokens caches the tokens exchanged for callers, over every import, so that one
	// bound (callercred.DefaultCacheSize) holds for the whole adapter.
	tokens *callercred.Cache

	mu      sync.Mutex
	remotes map[remoteKey]*remote
	// listModes are how the remotes are listened to for list changes, and
	// passListChanged what receives them (listchanges.go).
	listModes       map[remoteKey]listMode
	passListChanged func(method string)
}

// NewPool returns an empty pool; metrics counts its connects and retries. stateful
// says whether the server keeps sessions, on which a caller of protocol 2025-11-25 or
// older can be asked what a remote asks (see relay.go).
func NewPool(log logr.Logger, metrics *Metrics, stateful bool) *Pool {
	tokens, _ := callercred.NewCache(callercred.DefaultCacheSize, metrics.tokens) // errors only for a size <= 0
	states := newStateSealer()
	states.log = log
	levels, _ := lru.New[string, string](maxSessionRemotes) // errors only for a size <= 0
	relay := &relaySettings{sessions: stateful, states: states, logLevels: levels}
	if !stateful {
		relay.answers = NewAnswers()
	}
	return &Pool{log: log, metrics: metrics, remotes: map[remoteKey]*remote{}, relay: relay, tokens: tokens}
}

// Answers are the routes of the answers of older callers on a stateless server
// (answers.go); nil on a stateful one.
func (p *Pool) Answers() *Answers { return p.relay.answers }

// Linked is the set of remotes a tool set uses, prepared but not yet the pool's.
type Linked struct {
	remotes map[remoteKey]*remote
	// listModes are how the remotes whose backends pass list changes on are listened
	// to (listchanges.go).
	listModes map[remoteKey]listMode
}

// link makes r the remote of key in l, listened to for list changes as backend asks.
func (l *Linked) link(key remoteKey, r *remote, backend *adapterconfig.RemoteBackend) {
	l.remotes[key] = r
	if backend.ListChanges {
		l.listModes[key] = max(l.listModes[key], listModeOf(r, backend.ServesModern()))
	}
}

// Prepare links every tool to its remote: the pooled one when the pool has it (its
// session survives), a new one otherwise, whose files are read now so that an
// unreadable file fails here. The pool is unchanged until Commit.
func (p *Pool) Prepare(tools []*Tool) (Linked, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := Linked{remotes: map[remoteKey]*remote{}, listModes: map[remoteKey]listMode{}}
	var errs []error
	for _, t := range tools {
		r, err := p.linkRemote(&next, t.Backend)
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %q (import %s): %w", t.Name, t.Backend.Import, err))
			continue
		}
		t.remote = r
		t.paramTool = paramToolOf(t.Backend)
		t.passesModern = passesModernOf(t)
	}
	if err := errors.Join(errs...); err != nil {
		return Linked{}, err
	}
	return next, nil
}

// linkRemote links backend in l to its remote and returns it: the one l holds already,
// else the pooled one, else a new one (see Prepare). Tools and items link alike, so
// that a remote they share is one. The caller holds p.mu.
func (p *Pool) linkRemote(l *Linked, backend *adapterconfig.RemoteBackend) (*remote, error) {
	key := remoteKeyOf(backend)
	r := cmp.Or(l.remotes[key], p.remotes[key])
	if r == nil {
		var err error
		if r, err = newRemote(key, backend, p); err != nil {
			return nil, err
		}
	}
	l.link(key, r, backend)
	p.metrics.trackRelay(backend)
	return r, nil
}

// Commit makes next the pool and closes the remotes no tool uses any more (their
// sessions end when the calls on them are done).
func (p *Pool) Commit(next Linked) {
	p.mu.Lock()
	old := p.remotes
	p.remotes, p.listModes = next.remotes, next.listModes
	p.mu.Unlock()
	for key, r := range old {
		if next.remotes[key] != r {
			r.close()
		}
	}
	p.followListChanges()
}

// CloseAll closes every remote; the server calls it when it closes.
func (p *Pool) CloseAll() { p.Commit(Linked{}) }

// remote is one remote MCP server as the tools see it: the current client (headers
// and CA as last read from their files) and the pooled session.
type remote struct {
	key       remoteKey
	name      string // the URL without its query, for logs and metrics
	importRef string // the first import that named it, for messages
	log       logr.Logger
	metrics   *Metrics
	relay     *relaySettings

	// loadMu serialises the re-reads of the files, so that a read that started
	// earlier cannot replace the values of one that started later.
	loadMu sync.Mutex

	// callers, for an import that sends each caller's credential, are the callers'
	// own remotes; every request goes through one of them, never through r's session.
	callers *callerRemotes
	// callerState is set on a caller's own remote, and on a downstream session's.
	callerState
	// sessions are the downstream sessions' remotes (sessions.go), made on first use.
	sessions *childRemotes

	mu         sync.Mutex
	headers    map[string]string // as last read from the files
	stamps     []fileStamp
	readAt     time.Time
	digest     [sha256.Size]byte
	client     *mcpclient.Client
	current    *remoteConn
	connecting *connectFlight
	closed     bool
	// listWatch, when set, passes the remote's list changes on (listchanges.go).
	listWatch *listWatch
}

// remoteConn is a session and the calls using it. A retired conn takes no new calls
// and is closed when the last one returns.
type remoteConn struct {
	sess    *mcpclient.Session
	client  *mcpclient.Client
	refs    int
	retired bool
	// gone is closed when the conn is retired, so that a holder of it that is no
	// call (the subscriptions' listener) lets it go.
	gone chan struct{}
}

// connectFlight is one connect that every call waiting for a session shares.
type connectFlight struct {
	done   chan struct{}
	client *mcpclient.Client // the client connecting
	err    error
}

// connectError is a failed connect and the client (header values) it used.
type connectError struct {
	client *mcpclient.Client
	err    error
}

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

var errRemoteClosed = errors.New("the tool is no longer served (the adapter config was reloaded or the adapter is shutting down)")

func newRemote(key remoteKey, backend *adapterconfig.RemoteBackend, p *Pool) (*remote, error) {
	r := &remote{key: key, importRef: backend.Import, metrics: p.metrics, relay: p.relay}
	headers, ca, stamps, err := r.load()
	if err != nil {
		return nil, err
	}
	client, err := r.newClient(headers, ca)
	if err != nil {
		return nil, err
	}
	r.client, r.headers, r.stamps, r.readAt, r.digest = client, headers, stamps, time.Now(), digestOf(headers, ca)
	r.name = client.URL()
	r.log = p.log.WithValues("remote", r.name)
	r.metrics.track(r.name)
	if err := r.withCallers(backend.CallerCredentials, p.tokens); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *remote) newClient(headers map[string]string, ca []byte) (*mcpclient.Client, error) {
	var addresses []string
	if r.key.addresses != "" {
		addresses = strings.Split(r.key.addresses, ",")
	}
	dial, err := mcpclient.PinnedDialer(addresses)
	if err != nil {
		return nil, fmt.Errorf("remote client: %w", err)
	}
	client, err := mcpclient.New(mcpclient.ClientOptions{
		URL:            r.key.url,
		Transport:      r.key.transport,
		Headers:        headers,
		CABundle:       ca,
		ConnectTimeout: remoteConnectTimeout,
		Dial:           dial,
		// Every relayable capability, relayed or not: a remote may register tools only
		// for clients that declare them (server-everything does), and the operator's
		// probe declares them all, so a gateway that declared fewer would list tools
		// its remote then calls unknown. What the import does not relay is refused
		// with a message naming spec.imports[].relay (refuseUnrelayed).
		Capabilities: mcpclient.RelayableCapabilities(),
	})
	if err != nil {
		return nil, fmt.Errorf("remote client: %w", err)
	}
	return client, nil
}

// ---- header and CA files ----

// fileStamp is what a cheap stat says about a file; a change means re-read it. File
// times are only as fine as the kernel's tick, so the inode counts too.
type fileStamp struct {
	path    string
	size    int64
	modTime int64
	inode   uint64
}

// headerFiles lists (header name, file) in a stable order.
func (r *remote) headerFiles() [][2]string {
	var out [][2]string
	for _, pair := range strings.Split(r.key.headerFiles, "\n") {
		if name, path, ok := strings.Cut(pair, "="); ok {
			out = append(out, [2]string{name, path})
		}
	}
	return out
}

func (r *remote) stat() []fileStamp {
	var paths []string
	for _, hf := range r.headerFiles() {
		paths = append(paths, hf[1])
	}
	if r.key.caFile != "" {
		paths = append(paths, r.key.caFile)
	}
	stamps := make([]fileStamp, len(paths))
	for i, p := range paths {
		stamps[i] = fileStamp{path: p, size: -1}
		// os.Stat follows the symlinks of a Secret volume (..data → a timestamped
		// directory), so an update shows as a new modification time.
		if fi, err := os.Stat(p); err == nil {
			stamps[i].size, stamps[i].modTime, stamps[i].inode = fi.Size(), fi.ModTime().UnixNano(), fileIdentity(fi)
		}
	}
	return stamps
}

// load reads the header values and the CA bundle. The stamps are taken first, so a
// write during the read shows as a change next time.
func (r *remote) load() (map[string]string, []byte, []fileStamp, error) {
	stamps := r.stat()
	headers := map[string]string{}
	for _, hf := range r.headerFiles() {
		data, err := os.ReadFile(hf[1])
		if err != nil {
			return nil, nil, stamps, fmt.Errorf("read the file of header %s: %w", hf[0], err)
		}
		value := strings.TrimSpace(string(data))
		if value == "" {
			return nil, nil, stamps, fmt.Errorf("the file %s of header %s is empty", hf[1], hf[0])
		}
		headers[hf[0]] = value
	}
	var ca []byte
	if r.key.caFile != "" {
		var err error
		if ca, err = os.ReadFile(r.key.caFile); err != nil {
			return nil, nil, stamps, fmt.Errorf("read the CA file: %w", err)
		}
	}
	return headers, ca, stamps, nil
}

func digestOf(headers map[string]string, ca []byte) [sha256.Size]byte {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		fmt.Fprintf(h, "%s\x00%s\x00", name, headers[name])
	}
	h.Write(ca)
	var d [sha256.Size]byte
	copy(d[:], h.Sum(nil))
	return d
}

// refresh re-reads the files when they changed (force: in any case) and, when the
// values differ, switches to a client with the new ones: the current session is
// retired, the next call connects with the new headers. It returns the client in use
// afterwards. A file that cannot be read keeps the last values in use, with a log
// line.
func (r *remote) refresh(force bool) *mcpclient.Client {
	if r.parent != nil {
		return r.rederive(force)
	}
	if !force {
		stamps := r.stat()
		r.mu.Lock()
		fresh := slices.Equal(stamps, r.stamps) && time.Since(r.readAt) < rereadEvery
		client := r.client
		r.mu.Unlock()
		if fresh {
			return client
		}
	}
	// One re-read at a time, each committed before the next starts: two calls that
	// both saw a change must not let the one that read first (possibly the values
	// before a rotation) have the last word.
	r.loadMu.Lock()
	defer r.loadMu.Unlock()
	headers, ca, stamps, err := r.load()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stamps, r.readAt = stamps, time.Now()
	if err != nil {
		r.log.Error(err, "cannot re-read the remote's header or CA files; keeping the values in use")
		return r.client
	}
	digest := digestOf(headers, ca)
	if digest == r.digest {
		return r.client
	}
	client, err := r.newClient(headers, ca)
	if err != nil {
		r.log.Error(err, "the remote's new header or CA files are unusable; keeping the values in use")
		return r.client
	}
	r.client, r.headers, r.digest = client, headers, digest
	if c := r.current; c != nil {
		r.current = nil
		r.retireLocked(c)
	}
	r.log.Info("the remote's header or CA files changed; the next call connects with the new values")
	return client
}

// ---- sessions ----

// acquire returns the pooled session, connecting when there is none; concurrent calls
// share one connect. A failed connect is a *connectError.
func (r *remote) acquire(ctx context.Context) (*remoteConn, error) {
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return nil, errRemoteClosed
		}
		if c := r.current; c != nil {
			if c.sess.Alive() {
				c.refs++
				r.mu.Unlock()
				return c, nil
			}
			r.current = nil
			r.retireLocked(c)
		}
		f := r.connecting
		if f == nil {
			f = &connectFlight{done: make(chan struct{}), client: r.client}
			r.connecting = f
			// The connection is shared by every caller waiting on f, so no one caller's
			// request context may cancel it.
			go r.connect(f) //nolint:gosec // G118: see above
		}
		r.mu.Unlock()
		select {
		case <-f.done:
			if f.err != nil {
				return nil, &connectError{client: f.client, err: f.err}
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (r *remote) connect(f *connectFlight) {
	client := f.client
	start := time.Now()
	sess, err := client.Connect(context.Background())
	if err == nil {
		r.applyLogLevel(sess)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	defer close(f.done)
	r.connecting = nil
	switch {
	case err != nil:
		f.err = err
		r.metrics.connects.WithLabelValues(r.name, "failed").Inc()
		r.log.V(1).Info("connecting to the remote failed", "error", err.Error())
	case r.closed || client != r.client:
		// Removed, or its files changed, while connecting: the waiters try again.
		go sess.Close()
	default:
		r.current = &remoteConn{sess: sess, client: client, gone: make(chan struct{})}
		r.metrics.connects.WithLabelValues(r.name, "succeeded").Inc()
		log := r.log
		if r.ofSession {
			// One per downstream session on a stateful gateway: at info level, a busy
			// gateway would log every session its callers open.
			log = log.V(1)
		}
		log.Info("remote session opened", "server", sess.Server(), "protocolVersion", sess.ProtocolVersion(),
			"stateful", sess.ID() != "", "took", time.Since(start).Round(time.Millisecond).String())
	}
}

func (r *remote) release(c *remoteConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.refs--
	if c.retired && c.refs == 0 {
		go r.closeConn(c)
	}
}

// drop retires c after a failure that lost it (or may have).
func (r *remote) drop(c *remoteConn, why *mcpclient.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current == c {
		r.current = nil
		r.log.Info("remote session dropped; the next call reconnects", "reason", why.Reason, "detail", why.Detail)
	}
	r.retireLocked(c)
}

// retireLocked stops c taking calls; it is closed now if idle, else by the last
// release. The caller has taken c out of r.current.
func (r *remote) retireLocked(c *remoteConn) {
	if c.retired {
		return
	}
	c.retired = true
	close(c.gone)
	if c.refs == 0 {
		go r.closeConn(c)
	}
}

func (r *remote) closeConn(c *remoteConn) {
	c.sess.Close()
	r.mu.Lock()
	// A caller's remote shares its parent's connections; the parent closes them.
	stale := r.parent == nil && (r.closed || c.client != r.client)
	r.mu.Unlock()
	if stale {
		c.client.CloseIdleConnections()
	}
}

func (r *remote) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	r.stopListWatchLocked()
	if r.callers != nil {
		go r.callers.close()
	}
	if r.sessions != nil {
		go r.sessions.close()
	}
	if c := r.current; c != nil {
		r.current = nil
		r.retireLocked(c)
	}
}

// ---- calls ----

// Call forwards one validated call, with args its arguments as JSON. A call the remote provably did not process (no
// connection, unknown session, refused credentials that a re-read of the files
// changed) is retried once on a new session; any other failure is reported, never
// retried, so that no tool runs twice. A connect refused for its credentials is
// retried once too when the files now hold others; no other failed connect is.
func (t *Tool) Call(ctx context.Context, req mcp.CallToolRequest, args []byte) *mcp.CallToolResult {
	if era := CallerEra(ctx); !t.Backend.ListedTo(era) {
		// Not listed to this caller: its remote lists the tool only in the other era.
		return mcp.NewToolResultError(fmt.Sprintf("tool %q is not served to clients of protocol %s: its remote (import %s) lists it only to clients of %s",
			t.Name, era, t.Backend.Import, otherEra(era)))
	}
	if ours, declined := t.connectRetry(ctx, req); ours {
		if declined {
			return mcp.NewToolResultError(fmt.Sprintf("%s: the user declined to connect an account for import %s, so the call cannot act as them; nothing was sent to the remote",
				CodeConnectRequired, t.Backend.Import))
		}
		// The user connected, or says so: the call is made anew.
		req.Params.RequestState, req.Params.InputResponses = "", nil
	}
	if t.upstreamModern(ctx) || t.relaysOnlyModern(ctx) {
		return t.callModern(ctx, req, args)
	}
	return t.callLegacy(ctx, req, args)
}

// otherEra is the era that is not era.
func otherEra(era string) string {
	if era == adapterconfig.EraModern {
		return adapterconfig.EraLegacy
	}
	return adapterconfig.EraModern
}

// callLegacy forwards a call on the remote's 2025-11-25 session (a caller of
// 2026-07-28 is translated).
func (t *Tool) callLegacy(ctx context.Context, req mcp.CallToolRequest, args []byte) *mcp.CallToolResult {
	if t.relays() {
		return t.callRelaying(ctx, req, args)
	}
	progressToken := progressTokenOf(req)
	fwd := forwardNotifications(ctx, progressToken)
	defer fwd.flush()
	raw, client, failed := t.remote.forward(ctx, t, args, mcpclient.CallOptions{Progress: progressToken != nil, Notify: fwd.notify(), Ask: t.refuseUnrelayed})
	if failed != nil {
		return failed
	}
	return remoteResult(raw, client)
}

// forward makes the call on the remote (see Call) and returns the remote's result as
// it sent it and the client that got it; or, when there is none, the failed result to
// answer.
func (r *remote) forward(ctx context.Context, t *Tool, args []byte, opts mcpclient.CallOptions) (raw json.RawMessage, client *mcpclient.Client, failed *mcp.CallToolResult) {
	ctx, span := r.startForwardSpan(ctx, t)
	defer func() { endForwardSpan(span, failed, raw) }()
	return r.forwardOnce(ctx, t, args, opts)
}

// forwardOnce is forward's work: one call, retried at most once on a new session.
func (r *remote) forwardOnce(ctx context.Context, t *Tool, args []byte, opts mcpclient.CallOptions) (json.RawMessage, *mcpclient.Client, *mcp.CallToolResult) {
	ctx, cancel := context.WithTimeout(ctx, t.Backend.Timeout.Duration)
	defer cancel()
	raw, client, err := r.withSession(ctx, "tool", t.Name, func(ctx context.Context, conn *remoteConn) (json.RawMessage, error) {
		return callOn(ctx, conn, t, args, opts)
	})
	var rpcErr *mcpclient.RPCError
	switch {
	case err == nil:
		return raw, client, nil
	case client != nil && errors.As(err, &rpcErr):
		return nil, nil, mcp.NewToolResultError(MarkerRemoteError + rpcErr.Error())
	default:
		return nil, nil, r.callFailed(ctx, t, err)
	}
}

// forCaller is the remote a request of ctx goes to: for an import with
// callerCredentials the caller's own, just synced with the parent's files and the
// caller's credential; otherwise r, its files re-read if they changed.
func (r *remote) forCaller(ctx context.Context) (*remote, error) {
	if r.callers != nil {
		return r.callers.remoteFor(ctx)
	}
	r.refresh(false)
	return r, nil
}

// forRequest is the remote a request of ctx goes to on a session: the caller's
// (forCaller), or on a stateful gateway that of the request's downstream session.
func (r *remote) forRequest(ctx context.Context) (*remote, error) {
	r, err := r.forCaller(ctx)
	if err != nil {
		return nil, err
	}
	s, err := r.forSession(ctx)
	if err != nil || s == r {
		return s, err
	}
	s.refresh(false)
	return s, nil
}

// withSession runs do on a pooled session, retried at most once on a new session: when
// the remote provably did not process it (no connection, unknown session, refused
// credentials that a re-read of the files changed), or refused the connect for
// credentials the files now replace. Any other failure is returned, never retried, so
// that nothing runs twice. client is the client whose session answered: set on success
// and when the remote answered do with a JSON-RPC error (err is then that
// *mcpclient.RPCError), nil otherwise. key and name say in the debug log what was
// retried.
func (r *remote) withSession(ctx context.Context, key, name string, do func(context.Context, *remoteConn) (json.RawMessage, error)) (raw json.RawMessage, client *mcpclient.Client, err error) {
	r, err = r.forRequest(ctx)
	if err != nil {
		return nil, nil, err
	}
	for retried := false; ; retried = true {
		conn, err := r.acquire(ctx)
		if err != nil {
			var ce *connectError
			var e *mcpclient.Error
			if !retried && ctx.Err() == nil && errors.As(err, &ce) && errors.As(err, &e) &&
				e.Reason == mcpclient.ReasonUnauthorized && r.otherCredentials(ctx, ce.client) {
				r.metrics.retries.WithLabelValues(r.name).Inc()
				r.log.V(1).Info("retrying a call whose connect the remote refused, with the re-read credentials", key, name, "detail", e.Detail)
				continue
			}
			if errors.As(err, &e) && e.Reason == mcpclient.ReasonUnauthorized {
				return nil, nil, r.refused(err)
			}
			return nil, nil, err
		}
		raw, err := do(ctx, conn)
		r.release(conn)
		if err == nil {
			return raw, conn.client, nil
		}
		var e *mcpclient.Error
		if errors.As(err, &e) && (e.SessionLost || (e.NotProcessed && e.Reason != mcpclient.ReasonUnauthorized)) {
			r.drop(conn, e)
		}
		if answered, final := r.afterFailure(ctx, conn.client, err, retried, key, name); final != nil {
			return nil, answered, final
		}
	}
}

// afterFailure says what follows a request that failed with err on client: nil to try
// it once more (the remote provably did not process it, and retried says it was not
// tried again already; refused credentials only when a re-read found others), or the
// error to end with and the client whose remote answered it (a JSON-RPC error; nil
// otherwise). key and name say in the debug log what was retried.
func (r *remote) afterFailure(ctx context.Context, client *mcpclient.Client, err error, retried bool, key, name string) (answered *mcpclient.Client, final error) {
	var rpcErr *mcpclient.RPCError
	if errors.As(err, &rpcErr) {
		return client, err
	}
	var e *mcpclient.Error
	if !errors.As(err, &e) {
		return nil, err
	}
	retry := e.NotProcessed && !retried && ctx.Err() == nil
	if retry && e.Reason == mcpclient.ReasonUnauthorized {
		// Worth another try only with other credentials.
		retry = r.otherCredentials(ctx, client)
	}
	if !retry {
		if e.Reason == mcpclient.ReasonUnauthorized {
			return nil, r.refused(err)
		}
		return nil, err
	}
	r.metrics.retries.WithLabelValues(r.name).Inc()
	r.log.V(1).Info("retrying a call the remote did not process", key, name, "reason", e.Reason, "detail", e.Detail)
	return nil, nil
}

// callOn makes the call on conn's session; a call whose tool relays the remote's
// requests gets a session of its own from conn's client, so that whatever the remote
// asks on it can only be this call's, wherever the remote sends it.
func callOn(ctx context.Context, conn *remoteConn, t *Tool, args []byte, opts mcpclient.CallOptions) (json.RawMessage, error) {
	if t.relays() {
		return conn.client.CallToolAlone(ctx, t.Backend.RemoteName, args, opts)
	}
	return conn.sess.CallToolWith(ctx, t.Backend.RemoteName, args, opts)
}

// otherCredentials is asked after the remote refused the credentials of used: it
// re-reads the files (unless another call already moved away from used) and reports
// whether the client in use now differs from used. Asking "differs from used" rather
// than "did this re-read change anything" lets every call refused with the old values
// retry, not only the first of them to re-read.
func (r *remote) otherCredentials(ctx context.Context, used *mcpclient.Client) bool {
	r.mu.Lock()
	moved := r.client != used
	r.mu.Unlock()
	if moved {
		return true
	}
	if r.ofSession {
		// A downstream session's remote: its parent's files or credential, renewed.
		r.parent.otherCredentials(ctx, used)
		return r.refresh(false) != used
	}
	if r.parent != nil {
		// A caller's remote: its credential is renewed (re-exchanged, or re-read) too.
		r.parent.callers.renew(ctx, r)
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.client != used
	}
	return r.refresh(true) != used
}

func (r *remote) callFailed(ctx context.Context, t *Tool, err error) *mcp.CallToolResult {
	var ce *CallerCredentialError
	if errors.As(err, &ce) && ce.Connect != nil {
		return t.connectRequired(ctx, ce)
	}
	if text, ok := r.credentialFailure(err); ok {
		return mcp.NewToolResultError(text)
	}
	detail := err.Error()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		detail = fmt.Sprintf("no answer from the remote within the tool timeout %s (%s)", t.Backend.Timeout.Duration, detail)
	}
	return mcp.NewToolResultError(fmt.Sprintf("%s%s (import %s)", MarkerCallFailed, detail, t.Backend.Import))
}

// remoteResult passes a remote result through as sent: every content item (with its
// annotations and _meta), structuredContent, _meta and isError. A failed result keeps
// all of that too; its first text item begins with MarkerRemoteError (an item holding
// only the marker leads when there is no text), and header values are scrubbed from
// every text item, since a remote may echo the credentials it refused.
func remoteResult(raw json.RawMessage, client *mcpclient.Client) *mcp.CallToolResult {
	res, err := mcp.ParseCallToolResult(&raw)
	if err != nil {
		return mcp.NewToolResultError(MarkerRemoteError + "the remote's answer to tools/call is not a tool result: " + err.Error())
	}
	res.ResultType = ""
	if res.IsError {
		res.Content = markRemoteError(res.Content, client.Redact)
	}
	return res
}

// markRemoteError scrubs every text item with redact and puts MarkerRemoteError at the
// start of the first one.
func markRemoteError(content []mcp.Content, redact func(string) string) []mcp.Content {
	out := make([]mcp.Content, 0, len(content)+1)
	marked := false
	for _, c := range content {
		text, isText := mcp.AsTextContent(c)
		if !isText {
			out = append(out, c)
			continue
		}
		item := *text
		item.Text = redact(item.Text)
		if !marked {
			item.Text, marked = MarkerRemoteError+item.Text, true
		}
		out = append(out, item)
	}
	if !marked {
		out = append([]mcp.Content{mcp.NewTextContent(MarkerRemoteError + "the remote tool failed and gave no text")}, out...)
	}
	return out
}
