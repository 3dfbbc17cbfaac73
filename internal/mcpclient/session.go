package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/tracing"
)

// Session is one initialized MCP session. It is safe for concurrent use: calls over
// streamable HTTP are independent POSTs carrying the session id; calls over HTTP+SSE
// are POSTs whose answers one reader routes by request id.
type Session struct {
	c        *Client
	protocol atomic.Pointer[string]
	server   string // "name version", for messages
	info     ServerInfo
	// declared are the client capabilities initialize declares: the client's, or
	// those ConnectDeclaring was given.
	declared []string
	// deadline ends the session's every request (zero: none): Connect plus the
	// client's HandshakeTimeout.
	deadline time.Time

	// streamable HTTP: where requests go (after the redirects of initialize) and the
	// session id the server gave (none for a stateless server). Set by Connect.
	endpoint *url.URL
	id       string

	// HTTP+SSE: where messages are POSTed, and the end of the stream.
	sseEndpoint *url.URL
	endStream   context.CancelFunc
	detach      func() bool

	mu      sync.Mutex
	pending map[int64]chan answer
	// progress routes the progress notifications of the SSE stream to their calls, by
	// the progress token each call sent.
	progress    map[string]func(Message)
	progressSeq atomic.Int64
	// onNotification, when set, receives the notifications of the SSE stream
	// (Listen).
	onNotification func(Message)

	// modern, set on a session of protocol 2026-07-28 (Client.Modern), makes every
	// request stateless: it carries its own _meta and the headers of SEP-2243.
	modern *RequestMeta

	lost      chan struct{}
	lostOnce  sync.Once
	lostErr   *Error
	closeOnce sync.Once
}

type answer struct {
	msg Message
	err *Error
}

// deleteLocked removes key from m under mu, the lock that guards m: a request
// unregisters, when it ends, what it registered in the session's routing maps.
func deleteLocked[K comparable, V any](mu *sync.Mutex, m map[K]V, key K) {
	mu.Lock()
	defer mu.Unlock()
	delete(m, key)
}

// Connect opens a session: initialize (protocol ProtocolVersion), then
// notifications/initialized; over SSE the stream is opened first. It takes at most
// ClientOptions.ConnectTimeout. The error is an *Error.
func (c *Client) Connect(ctx context.Context) (*Session, error) {
	return c.ConnectDeclaring(ctx, c.opts.Capabilities)
}

// ConnectDeclaring is Connect declaring the client capabilities named in caps in
// place of ClientOptions.Capabilities: a server may list other tools to a client
// that declares other capabilities.
func (c *Client) ConnectDeclaring(ctx context.Context, caps []string) (*Session, error) {
	s := &Session{c: c, endpoint: c.url, pending: map[int64]chan answer{}, progress: map[string]func(Message){}, lost: make(chan struct{}),
		declared: caps}
	if c.opts.HandshakeTimeout > 0 {
		s.deadline = time.Now().Add(c.opts.HandshakeTimeout)
	}
	ctx, cancelSession := s.bound(ctx)
	defer cancelSession()
	ctx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout)
	defer cancel()
	if c.opts.Transport == TransportSSE {
		if err := s.openStream(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := s.initialize(ctx); err != nil {
		s.Close()
		return nil, err
	}
	// The stream must outlive Connect's deadline from now on.
	if s.detach != nil && !s.detach() {
		s.Close()
		return nil, c.fail(ReasonTimeout, fmt.Sprintf("timed out connecting to %s%s", c.url.Host, c.timeoutNote()), ctx.Err())
	}
	return s, nil
}

// ServerInfo is what a server said of itself in its answer to initialize.
type ServerInfo struct {
	Name, Version, Instructions string
	// Capabilities are the names of the capabilities it announced, sorted: "tools",
	// "logging", "prompts", "resources", "completions", …; and
	// definition.CapabilityResourcesSubscribe when it offers resource subscriptions.
	Capabilities []string
	// Extensions are the sorted names of the extensions it announced in
	// capabilities.extensions ("io.modelcontextprotocol/skills", …).
	Extensions []string
}

type initializeResult struct {
	ProtocolVersion string                     `json:"protocolVersion"`
	Capabilities    map[string]json.RawMessage `json:"capabilities"`
	ServerInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
	Instructions string `json:"instructions"`
}

func (s *Session) initialize(ctx context.Context) error {
	raw, err := s.request(ctx, "initialize", InitializeParams(s.c.opts.ClientName, s.c.opts.ClientVersion, s.declared...), nil)
	if err != nil {
		var rpcErr *RPCError
		if errors.As(err, &rpcErr) {
			return s.c.fail(ReasonInitializeFailed, "the server refused initialize: "+rpcErr.Error(), err)
		}
		return s.timeoutOnConnect(ctx, err)
	}
	var init initializeResult
	if err := json.Unmarshal(raw, &init); err != nil || init.ProtocolVersion == "" {
		detail := "the answer to initialize is not an MCP InitializeResult (no protocolVersion)"
		if err != nil {
			detail = "the answer to initialize is not an MCP InitializeResult: " + jsonErrorText(err)
		}
		return s.c.fail(ReasonProtocolError, detail, err)
	}
	if !acceptableVersion(init.ProtocolVersion) {
		return s.c.fail(ReasonProtocolError, fmt.Sprintf("the server chose protocol version %q, which this client does not speak (it speaks %s and newer)",
			clip.Line(init.ProtocolVersion, 40), strings.Join(SupportedProtocolVersions(), ", ")), nil)
	}
	s.protocol.Store(&init.ProtocolVersion)
	s.server = strings.TrimSpace(init.ServerInfo.Name + " " + init.ServerInfo.Version)
	s.info = ServerInfo{Name: init.ServerInfo.Name, Version: init.ServerInfo.Version, Instructions: init.Instructions,
		Capabilities: capabilityNames(init.Capabilities)}
	s.info.Extensions = extensionNames(init.Capabilities["extensions"])
	if err := s.notify(ctx, "notifications/initialized"); err != nil {
		return s.timeoutOnConnect(ctx, err)
	}
	return nil
}

// capabilityNames are the names of the capabilities a server announced, sorted, with
// definition.CapabilityResourcesSubscribe among them when resources.subscribe is true; never nil.
func capabilityNames(caps map[string]json.RawMessage) []string {
	names := slices.Sorted(maps.Keys(caps))
	var resources struct {
		Subscribe bool `json:"subscribe"`
	}
	if json.Unmarshal(caps["resources"], &resources) == nil && resources.Subscribe {
		names = append(names, definition.CapabilityResourcesSubscribe)
		slices.Sort(names)
	}
	if names == nil {
		names = []string{}
	}
	return names
}

var dateVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// acceptableVersion: a revision this client knows, or a newer date-shaped one (which
// a server may answer when it speaks only newer ones; its answers are read as this
// client's revision).
func acceptableVersion(v string) bool {
	if slices.Contains(SupportedProtocolVersions(), v) {
		return true
	}
	return dateVersion.MatchString(v) && v > ProtocolVersion
}

// timeoutOnConnect names the connect timeout when that is what ended the handshake
// (a HandshakeTimeout is named by classify already).
func (s *Session) timeoutOnConnect(ctx context.Context, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Reason == ReasonTimeout && ctx.Err() != nil && s.c.opts.HandshakeTimeout == 0 {
		out := *e
		out.Detail += s.c.timeoutNote()
		return &out
	}
	return err
}

// bound ends ctx at the session's deadline, if it has one.
func (s *Session) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.deadline.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, s.deadline)
}

// ProtocolVersion is the revision the server chose.
func (s *Session) ProtocolVersion() string {
	if v := s.protocol.Load(); v != nil {
		return *v
	}
	return ""
}

// ID is the streamable HTTP session id, "" for a stateless server or over SSE.
func (s *Session) ID() string { return s.id }

// Server is the server's "name version" from initialize.
func (s *Session) Server() string { return s.server }

// ServerInfo is what the server said of itself in initialize. Its Capabilities are
// the caller's own.
func (s *Session) ServerInfo() ServerInfo {
	info := s.info
	info.Capabilities = slices.Clone(info.Capabilities)
	return info
}

// Alive is false once the session is known to be unusable (lost or closed).
func (s *Session) Alive() bool {
	select {
	case <-s.lost:
		return false
	default:
		return true
	}
}

// Close ends the session, best effort within a second: DELETE for a streamable HTTP
// session with an id, the end of the stream for SSE.
func (s *Session) Close() {
	s.closeOnce.Do(func() {
		if s.endStream != nil {
			s.endStream()
		} else if s.id != "" {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			ctx, cancelSession := s.bound(ctx)
			resp, err := s.c.send(ctx, exchange{what: "the session close", method: http.MethodDelete, url: s.endpoint, session: s.id, protocol: s.ProtocolVersion()})
			if err == nil {
				DrainAndClose(resp.Body)
			}
			cancelSession()
			cancel()
		}
		s.markLost(&Error{Reason: ReasonSessionLost, Detail: "the session was closed", SessionLost: true})
	})
}

// markLost records that the session cannot be used again and fails the calls waiting
// for an answer on the SSE stream with err.
func (s *Session) markLost(err *Error) {
	s.lostOnce.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lostErr = err
		close(s.lost)
		for id, ch := range s.pending {
			ch <- answer{err: err}
			delete(s.pending, id)
		}
	})
}

// notSentBecauseLost is the error of a request refused because the session is gone.
func (s *Session) notSentBecauseLost() *Error {
	<-s.lost
	return &Error{Reason: ReasonSessionLost, Detail: "the session is lost: " + s.lostErr.Detail,
		NotProcessed: true, SessionLost: true, Err: s.lostErr}
}

// CallTool calls tools/call name with args (a JSON object; empty means {}) and returns
// the raw CallToolResult. Errors are *RPCError (the server answered with an error) or
// *Error.
func (s *Session) CallTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	return s.CallToolWith(ctx, name, args, CallOptions{})
}

// CallOptions are what a tools/call may carry besides the tool's name and arguments.
type CallOptions struct {
	// Progress asks the server for progress notifications about the call: the
	// request carries a progress token of this session's own, which the
	// notifications Notify receives carry (the caller maps it to its own).
	Progress bool
	// Notify, when set, receives the notifications the server sends about the call
	// as they arrive: progress (when asked for) and, over streamable HTTP, whatever
	// the server sends on the call's stream, such as log messages (notifications/message).
	// Over SSE only progress can be told apart from the rest of the stream.
	Notify func(Message)
	// Ask, when set, answers the requests the server sends on the call's own stream
	// (streamable HTTP) while it serves the call, such as elicitation/create: it
	// returns the result, or the error to answer with. It runs on a goroutine of its
	// own and may block until the call's context ends. Unset, or over SSE, such
	// requests are refused as this client offers no capabilities.
	Ask func(ctx context.Context, request Message) (json.RawMessage, *ErrorObject)
	// Meta, on a session of protocol 2026-07-28, replaces the session's _meta for
	// this call (the caller's protocol version, log level and capabilities).
	Meta *RequestMeta
	InputAnswers
}

// InputAnswers answer an input-required result of an earlier request, on its retry
// (protocol 2026-07-28, SEP-2322): InputResponses is a JSON object, RequestState is
// echoed as the server gave it.
type InputAnswers struct {
	InputResponses json.RawMessage
	RequestState   string
}

// CallToolWith is CallTool with options. When ctx ends before the answer, the server
// is sent notifications/cancelled for the request, so it can stop working for nobody.
func (s *Session) CallToolWith(ctx context.Context, name string, args json.RawMessage, opts CallOptions) (json.RawMessage, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return nil, &Error{Reason: ReasonInvalidConfig, Detail: "the arguments are not JSON", NotProcessed: true}
	}
	params := callParams{Name: name, Arguments: args, InputResponses: opts.InputResponses, RequestState: opts.RequestState}
	if tc := tracing.MetaOf(ctx); tc.Traceparent != "" {
		params.Meta = &callMeta{Meta: tc}
	}
	notify := opts.Notify
	if opts.Progress && notify != nil {
		token := fmt.Sprintf("cantus-%d", s.progressSeq.Add(1))
		if params.Meta == nil {
			params.Meta = &callMeta{}
		}
		params.Meta.ProgressToken = token
		s.mu.Lock()
		s.progress[token] = notify
		s.mu.Unlock()
		defer deleteLocked(&s.mu, s.progress, token)
	}
	return s.requestAsking(ctx, "tools/call", params, notify, opts.Ask, opts.Meta)
}

// CallToolAlone makes one call on a session of its own, closed after it. Every request
// the server sends on that session is the call's: those on the call's stream and those
// on the session's GET stream (some servers send their requests only there; mcp-go
// 1.2.1 does for sampling) go to opts.Ask.
func (c *Client) CallToolAlone(ctx context.Context, name string, args json.RawMessage, opts CallOptions) (json.RawMessage, error) {
	s, err := c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if opts.Ask != nil && s.sseEndpoint == nil && s.id != "" {
		streamCtx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			// A server without a GET stream sends its requests on the call's stream.
			// The session is the call's alone, so the notifications a server sends on
			// its GET stream (mcp-go sends a tool's there when the stream is open) are
			// the call's too.
			_ = s.readGETStream(streamCtx, nil, func(m Message) {
				switch {
				case isNotification(m) && opts.Notify != nil:
					opts.Notify(m)
				case !isNotification(m) && m.Method != "ping":
					go s.answerAsked(streamCtx, m, opts.Ask)
				default:
					s.answerServer(m)
				}
			})
		}()
	}
	return s.CallToolWith(ctx, name, args, opts)
}

type callParams struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	Meta           *callMeta       `json:"_meta,omitempty"`
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string          `json:"requestState,omitempty"`
}

// callMeta is a tools/call's params._meta: the progress token when progress is asked
// for, and the trace context (traceparent, tracestate) when the call is traced.
type callMeta struct {
	ProgressToken string `json:"progressToken,omitempty"`
	tracing.Meta
}

// SetLogLevel asks the server to send the log messages of level and above on this
// session (logging/setLevel, 2025-11-25).
func (s *Session) SetLogLevel(ctx context.Context, level string) error {
	_, err := s.request(ctx, "logging/setLevel", map[string]string{"level": level}, nil)
	return err
}

// request sends one JSON-RPC request and returns its result. notify, when set,
// receives the notifications the server sends on the request's own stream.
func (s *Session) request(ctx context.Context, method string, params any, notify func(Message)) (json.RawMessage, error) {
	return s.requestAsking(ctx, method, params, notify, nil, nil)
}

// requestAsking is request whose server requests on the request's own stream ask
// answers (see CallOptions.Ask); nil refuses them.
// meta, on a session of protocol 2026-07-28, replaces the session's _meta.
func (s *Session) requestAsking(ctx context.Context, method string, params any, notify func(Message), ask askFunc, meta *RequestMeta) (json.RawMessage, error) {
	if !s.Alive() {
		return nil, s.notSentBecauseLost()
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var modern *modernRequest
	if s.modern != nil {
		var err error
		if modern, params, err = s.modernRequest(method, params, meta); err != nil {
			return nil, &Error{Reason: ReasonInvalidConfig, Detail: "cannot encode the request: " + err.Error(), NotProcessed: true, Err: err}
		}
	}
	id, body, err := s.c.encodeRequest(method, params)
	if err != nil {
		return nil, &Error{Reason: ReasonInvalidConfig, Detail: "cannot encode the request: " + err.Error(), NotProcessed: true, Err: err}
	}
	var result json.RawMessage
	if s.sseEndpoint != nil {
		result, err = s.requestSSE(ctx, id, method, body)
	} else {
		result, err = s.requestStreamable(ctx, id, method, body, notify, ask, modern)
	}
	var e *Error
	if errors.As(err, &e) && e.SessionLost {
		s.markLost(e)
	}
	if err != nil && ctx.Err() != nil && method != "initialize" && s.modern == nil && (e == nil || !e.NotProcessed) {
		// (A request of protocol 2026-07-28 is cancelled by ending its stream, which
		// the end of ctx did.)
		// The spec forbids cancelling initialize; any other request may be working on.
		// The notice outlives the caller's context, which is already done.
		go s.cancelUpstream(context.WithoutCancel(ctx), id, ctx.Err())
	}
	return result, err
}

// cancelUpstream tells the server the caller no longer waits for request id.
func (s *Session) cancelUpstream(ctx context.Context, id int64, why error) {
	if !s.Alive() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reason := "the caller stopped waiting"
	if errors.Is(why, context.DeadlineExceeded) {
		reason = "the call timed out"
	}
	_ = s.send(ctx, "notifications/cancelled", map[string]any{"requestId": id, "reason": reason})
}

func (s *Session) notify(ctx context.Context, method string) error {
	return s.send(ctx, method, nil)
}

// send sends the notification method with params (nil for none).
func (s *Session) send(ctx context.Context, method string, params any) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	endpoint, session := s.endpoint, s.id
	if s.sseEndpoint != nil {
		endpoint, session = s.sseEndpoint, ""
	}
	body, err := json.Marshal(Request{JSONRPC: "2.0", Method: method, Params: params})
	if err != nil {
		return &Error{Reason: ReasonInvalidConfig, Detail: "cannot encode " + method + ": " + err.Error(), NotProcessed: true, Err: err}
	}
	resp, err := s.c.send(ctx, exchange{what: method, method: http.MethodPost, url: endpoint, body: body, accept: AcceptAnswer,
		session: session, protocol: s.ProtocolVersion()})
	if err != nil {
		return err
	}
	defer DrainAndClose(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return s.c.statusError(resp, method, session)
	}
	return nil
}

// ---- streamable HTTP ----

func (s *Session) requestStreamable(ctx context.Context, id int64, method string, body []byte, notify func(Message), ask askFunc, modern *modernRequest) (json.RawMessage, error) {
	ex := exchange{what: method, method: http.MethodPost, url: s.endpoint, body: body, accept: AcceptAnswer,
		session: s.id, protocol: s.ProtocolVersion()}
	if modern != nil {
		ex.protocol, ex.mcpMethod, ex.mcpName, ex.paramHeaders = modern.protocol, method, modern.name, modern.params
	}
	resp, err := s.c.send(ctx, ex)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer DrainAndClose(resp.Body)
		return nil, s.c.statusError(resp, method, s.id)
	}
	defer resp.Body.Close()
	if method == "initialize" {
		// Later requests go straight to where the redirects led, with the session.
		s.endpoint = resp.Request.URL
		if sid := resp.Header.Get(HeaderSessionID); sid != "" {
			if !ValidSessionID(sid) {
				return nil, s.c.fail(ReasonProtocolError, "the "+HeaderSessionID+" header of the answer to initialize holds characters other than visible ASCII", nil)
			}
			s.id = sid
		}
	}
	step := "the answer to " + method + " from POST " + Path(s.endpoint)
	switch mt := MediaType(resp); mt {
	case ContentTypeJSON:
		data, err := ReadBody(resp, s.c.opts.MaxMessageBytes)
		if err != nil {
			return nil, s.c.classify(ctx, err, step)
		}
		msgs, err := ParseMessages(data)
		if err != nil {
			return nil, s.c.fail(ReasonProtocolError, fmt.Sprintf("%s (HTTP %s) is not JSON-RPC: %s", step, resp.Status, jsonErrorText(err)), err)
		}
		for _, m := range msgs {
			if got, ok := idOf(m.ID); ok && m.Method == "" && got == id {
				return s.c.answerOf(m, step)
			}
		}
		return nil, s.c.fail(ReasonProtocolError, fmt.Sprintf("%s holds no answer to request %d", step, id), nil)
	case ContentTypeSSE:
		return s.readStreamAnswer(ctx, resp.Body, id, method, step, notify, ask)
	case "":
		return nil, s.c.fail(ReasonProtocolError, fmt.Sprintf("%s (HTTP %s) has no Content-Type", step, resp.Status), nil)
	default:
		return nil, s.c.fail(ReasonProtocolError, fmt.Sprintf("%s has Content-Type %s, not %s or %s: is this an MCP endpoint?",
			step, clip.Line(mt, 60), ContentTypeJSON, ContentTypeSSE), nil)
	}
}

// readStreamAnswer reads the answer to request id from the event stream of its POST.
// A stream that ends cleanly after an event with an id is resumed (GET with
// Last-Event-ID, 2025-11-25), as servers that poll their clients do
// (AnswerStream).
func (s *Session) readStreamAnswer(ctx context.Context, first io.ReadCloser, id int64, method, step string, notify func(Message), ask askFunc) (json.RawMessage, error) {
	events := NewAnswerStream(&countingReader{r: first}, s.c.opts.MaxMessageBytes, func(ctx context.Context, lastID string) (io.ReadCloser, error) {
		resp, err := s.c.send(ctx, exchange{what: "the resumed event stream for " + method, method: http.MethodGet, url: s.endpoint, accept: ContentTypeSSE,
			session: s.id, protocol: s.ProtocolVersion(), lastEventID: lastID})
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 || MediaType(resp) != ContentTypeSSE {
			DrainAndClose(resp.Body)
			return nil, s.c.fail(ReasonConnectionDropped, fmt.Sprintf("the event stream of POST %s ended before the answer to %s and resuming it failed (HTTP %s)",
				Path(s.endpoint), method, resp.Status), nil)
		}
		return struct {
			io.Reader
			io.Closer
		}{&countingReader{r: resp.Body}, resp.Body}, nil
	})
	defer events.Close()
	for {
		ev, err := events.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil, s.c.fail(ReasonConnectionDropped, fmt.Sprintf("the event stream of POST %s ended without the answer to %s", Path(s.endpoint), method), err)
		}
		if err != nil {
			// Failures to resume are *Error already, which classify keeps.
			return nil, s.c.classify(ctx, err, step)
		}
		if !ev.IsMessage() {
			continue
		}
		msgs, err := ParseMessages([]byte(ev.Data))
		if err != nil {
			return nil, s.c.fail(ReasonProtocolError, fmt.Sprintf("an event of %s is not JSON-RPC: %s", step, jsonErrorText(err)), err)
		}
		for _, m := range msgs {
			if m.Method != "" {
				if isNotification(m) && notify != nil {
					notify(m)
				}
				if ask != nil && !isNotification(m) && m.Method != "ping" {
					go s.answerAsked(ctx, m, ask)
					continue
				}
				s.answerServer(m)
				continue
			}
			if got, ok := idOf(m.ID); ok && got == id {
				return s.c.answerOf(m, step)
			}
		}
	}
}

func isNotification(m Message) bool { return len(m.ID) == 0 || string(m.ID) == "null" }

// routeProgress hands a progress notification of the SSE stream to the call whose
// token it carries.
func (s *Session) routeProgress(m Message) {
	var params struct {
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(m.Params, &params) != nil {
		return
	}
	var token string
	if json.Unmarshal(params.Token, &token) != nil {
		return
	}
	s.mu.Lock()
	notify := s.progress[token]
	s.mu.Unlock()
	if notify != nil {
		notify(m)
	}
}

// askFunc is CallOptions.Ask.
type askFunc = func(ctx context.Context, request Message) (json.RawMessage, *ErrorObject)

// answerServer answers a request the server sent (ping; anything else is refused, this
// client offers no capabilities). Notifications are dropped.
func (s *Session) answerServer(m Message) {
	if len(m.ID) == 0 || string(m.ID) == "null" {
		return
	}
	if m.Method == "ping" {
		s.reply(m.ID, struct{}{}, nil)
		return
	}
	s.reply(m.ID, nil, &ErrorObject{Code: -32601, Message: "method not supported by this client: " + clip.Line(m.Method, 60)})
}

// answerAsked answers the server's request m, sent while it serves a call, with what
// ask returns. ask may wait for a person: it gets the call's context, not a deadline
// of its own.
func (s *Session) answerAsked(ctx context.Context, m Message, ask askFunc) {
	result, failed := ask(ctx, m)
	if failed != nil {
		s.reply(m.ID, nil, failed)
		return
	}
	s.reply(m.ID, result, nil)
}

// reply sends the answer to the server's request id, a result or an error, in the
// background: the stream it came on is still being read.
func (s *Session) reply(id json.RawMessage, result any, failed *ErrorObject) {
	reply := map[string]any{"jsonrpc": "2.0", "id": id}
	if failed != nil {
		reply["error"] = failed
	} else {
		reply["result"] = result
	}
	data, _ := json.Marshal(reply)
	endpoint, session, protocol := s.endpoint, s.id, s.ProtocolVersion()
	if s.sseEndpoint != nil {
		endpoint, session = s.sseEndpoint, ""
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ctx, cancelSession := s.bound(ctx)
		defer cancelSession()
		resp, err := s.c.send(ctx, exchange{method: http.MethodPost, url: endpoint, body: data, accept: AcceptAnswer,
			session: session, protocol: protocol})
		if err == nil {
			DrainAndClose(resp.Body)
		}
	}()
}

// ---- HTTP+SSE (protocol 2024-11-05) ----

// openStream GETs the stream (it lives until Close, not only until ctx ends; ctx bounds
// the wait for the endpoint event) and starts the reader.
func (s *Session) openStream(ctx context.Context) error {
	life, end := s.bound(context.Background())
	life, endNow := context.WithCancel(life)
	s.endStream = func() { endNow(); end() }
	s.detach = context.AfterFunc(ctx, endNow)
	resp, err := s.c.send(life, exchange{what: "the SSE stream", method: http.MethodGet, url: s.c.url, accept: ContentTypeSSE})
	if err != nil {
		return s.timeoutOnConnect(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer DrainAndClose(resp.Body)
		return s.c.statusError(resp, "the SSE stream", "")
	}
	if mt := MediaType(resp); mt != ContentTypeSSE {
		DrainAndClose(resp.Body)
		what := "no Content-Type"
		if mt != "" {
			what = "Content-Type " + clip.Line(mt, 60)
		}
		return s.c.fail(ReasonProtocolError, fmt.Sprintf("GET %s answered with %s, not an SSE stream (%s): is this an MCP SSE endpoint?",
			Path(resp.Request.URL), what, ContentTypeSSE), nil)
	}
	endpoint := make(chan *url.URL, 1)
	go s.readStream(life, resp.Body, resp.Request.URL, endpoint)
	select {
	case u := <-endpoint:
		s.sseEndpoint = u
		return nil
	case <-s.lost:
		if ctx.Err() != nil {
			return s.c.fail(ReasonTimeout, fmt.Sprintf("timed out waiting for the endpoint event of the SSE stream GET %s%s",
				Path(resp.Request.URL), s.c.timeoutNote()), ctx.Err())
		}
		return s.lostErr
	}
}

// readStream reads the SSE stream until it ends: the endpoint event first, then the
// answers, each handed to the call waiting for its id.
func (s *Session) readStream(life context.Context, body io.ReadCloser, streamURL *url.URL, endpoint chan<- *url.URL) {
	defer body.Close()
	events := NewEventReader(&countingReader{r: body}, s.c.opts.MaxMessageBytes)
	where := "the SSE stream GET " + Path(streamURL)
	haveEndpoint := false
	for {
		ev, err := events.Next()
		if err != nil {
			var e *Error
			if errors.Is(err, io.EOF) {
				e = s.c.fail(ReasonConnectionDropped, where+" ended", err)
			} else {
				e = s.c.classify(life, err, where)
			}
			e.SessionLost = true
			s.markLost(e)
			return
		}
		if !haveEndpoint {
			if ev.Type != "endpoint" {
				continue
			}
			u, err := streamURL.Parse(strings.TrimSpace(ev.Data))
			if err != nil || Origin(u) != Origin(streamURL) {
				s.markLost(s.c.fail(ReasonProtocolError, where+" named a message endpoint that is not a URL on its own origin; refused", err))
				return
			}
			haveEndpoint = true
			endpoint <- u
			continue
		}
		if !ev.IsMessage() {
			continue
		}
		msgs, err := ParseMessages([]byte(ev.Data))
		if err != nil {
			continue // not JSON-RPC: nothing to route
		}
		for _, m := range msgs {
			if m.Method != "" {
				if m.Method == "notifications/progress" && isNotification(m) {
					s.routeProgress(m)
				}
				s.notifyListener(m)
				s.answerServer(m)
				continue
			}
			id, ok := idOf(m.ID)
			if !ok {
				continue
			}
			s.mu.Lock()
			ch := s.pending[id]
			delete(s.pending, id)
			s.mu.Unlock()
			if ch != nil {
				ch <- answer{msg: m}
			}
		}
	}
}

func (s *Session) requestSSE(ctx context.Context, id int64, method string, body []byte) (json.RawMessage, error) {
	ch := make(chan answer, 1)
	s.mu.Lock()
	if s.lostErr != nil {
		s.mu.Unlock()
		return nil, s.notSentBecauseLost()
	}
	s.pending[id] = ch
	s.mu.Unlock()
	defer deleteLocked(&s.mu, s.pending, id)
	resp, err := s.c.send(ctx, exchange{what: method, method: http.MethodPost, url: s.sseEndpoint, body: body, accept: AcceptAnswer,
		protocol: s.ProtocolVersion()})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer DrainAndClose(resp.Body)
		// The session is in the endpoint's URL: a 404, or a 400 naming the session,
		// means the server forgot it.
		return nil, s.c.statusError(resp, method, "sse")
	}
	DrainAndClose(resp.Body)
	step := "the answer to " + method + " on the SSE stream GET " + Path(s.c.url)
	select {
	case a := <-ch:
		if a.err != nil {
			e := *a.err
			e.NotProcessed = false // the request was delivered; whether it ran is unknown
			e.Detail = fmt.Sprintf("%s before the answer to %s", e.Detail, method)
			return nil, &e
		}
		return s.c.answerOf(a.msg, step)
	case <-ctx.Done():
		return nil, s.c.classify(ctx, ctx.Err(), step)
	}
}
