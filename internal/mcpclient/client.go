package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/tracing"
)

// ClientOptions configures a Client: the gateway's long-lived sessions, or the
// operator's probe (one session that connects, lists and closes within a
// HandshakeTimeout).
type ClientOptions struct {
	// URL is the endpoint: http(s)://host/mcp (streamable HTTP) or …/sse (SSE).
	URL string
	// Transport is TransportStreamableHTTP (default) or TransportSSE.
	Transport string
	// Headers go with every request to the URL's host. Their values may be secrets:
	// they never appear in an Error or an RPCError, and they are not sent to another
	// host after a redirect, nor over plain http after a redirect from https.
	Headers map[string]string
	// CABundle (PEM), when set, is the only set of CAs TLS trusts.
	CABundle []byte
	// ConnectTimeout bounds Connect (the initialize handshake). Default
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// HandshakeTimeout, when set, bounds each session's whole life from Connect:
	// connecting, every request and the close. It is for a client that opens a
	// session to look and leave (Probe); a timeout then names it. Zero: a session
	// lives until Close.
	HandshakeTimeout time.Duration
	// Dial, when set, makes every connection, including those made after a redirect
	// (the gateway and the operator pass a dialer that connects only to the addresses
	// their policy check resolved).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// CheckRedirect, when set, lets a redirect leave the endpoint's origin: every
	// target is passed to it before any connection to it, and an error refuses the
	// redirect (Reason RedirectRefused). A 301 or 302 then keeps the method too (a 303
	// of a POST is refused: it would make a GET of it). Unset, redirects are followed
	// only within the endpoint's origin and only when they keep the method; any other
	// is an HTTPError.
	CheckRedirect func(target *url.URL) error
	// MaxMessageBytes bounds every answer body and every event of an event stream.
	// Default DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// MaxIdleConnsPerHost is the depth of the keep-alive pool. Default
	// DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int
	// ClientName and ClientVersion are sent in initialize.
	ClientName, ClientVersion string
	// Capabilities are the client capabilities declared in initialize, by name
	// ("elicitation", "sampling", "roots"): the requests the server may send while it
	// serves a call, which the call's CallOptions.Ask answers. None by default.
	Capabilities []string
}

// Client is the HTTP side of one remote: URL, headers, TLS trust and a connection
// pool. Sessions made by one Client share its connections. A Client is safe for
// concurrent use.
type Client struct {
	opts      ClientOptions
	url       *url.URL
	transport *Transport
	redactor  Redactor
	userAgent string
	nextID    atomic.Int64
}

// New checks opts and builds a Client; it does not connect.
func New(opts ClientOptions) (*Client, error) {
	c := &Client{redactor: NewRedactor(opts.Headers)}
	invalid := func(detail string) (*Client, error) {
		return nil, c.fail(ReasonInvalidConfig, detail, nil)
	}
	transport, err := transportOrDefault(opts.Transport)
	if err != nil {
		return invalid(err.Error())
	}
	opts.Transport = transport
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.MaxIdleConnsPerHost <= 0 {
		opts.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if opts.ClientName == "" {
		opts.ClientName, opts.ClientVersion = DefaultClientName, DefaultClientVersion
	}
	c.opts, c.userAgent = opts, opts.ClientName+"/"+opts.ClientVersion
	u, err := ParseEndpoint(opts.URL)
	if err != nil {
		return invalid(err.Error())
	}
	c.url = u
	if err := CheckHeaders(opts.Headers); err != nil {
		return invalid(err.Error())
	}
	// No proxy from the environment (NewTransport): the remote is the address
	// the import names.
	c.transport, err = NewTransport(TransportConfig{
		CABundle:            opts.CABundle,
		Dial:                opts.Dial,
		DialTimeout:         opts.ConnectTimeout,
		MaxIdleConns:        4 * opts.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost: opts.MaxIdleConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: opts.ConnectTimeout,
	})
	if err != nil {
		return nil, c.fail(ReasonTLSError, err.Error(), nil)
	}
	return c, nil
}

// WithHeaders returns a client of the same endpoint, options and connection pool that
// sends headers instead of c's. A gateway's per-caller sessions are made this way: each
// caller's credential goes in its own client, while the connections to the remote (which
// carry no credential between requests) are shared rather than opened per caller.
func (c *Client) WithHeaders(headers map[string]string) (*Client, error) {
	if err := CheckHeaders(headers); err != nil {
		return nil, c.fail(ReasonInvalidConfig, err.Error(), nil)
	}
	out := &Client{opts: c.opts, url: c.url, transport: c.transport, redactor: NewRedactor(headers), userAgent: c.userAgent}
	out.opts.Headers = headers
	return out, nil
}

// CloseIdleConnections closes the pooled connections no request is using.
func (c *Client) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// URL returns the endpoint without its query (which may hold a key), for messages.
func (c *Client) URL() string { return Origin(c.url) + Path(c.url) }

// ---- errors ----

// RPCError is a JSON-RPC error answer: the server received the request and refused or
// failed it.
type RPCError struct {
	Code    int
	Message string
	Data    json.RawMessage
	// status is "HTTP 400 Bad Request" when the answer came with a non-2xx status.
	status string
}

func (e *RPCError) Error() string {
	s := fmt.Sprintf("%d %s", e.Code, e.Message)
	if e.status != "" {
		s = e.status + ": " + s
	}
	return s
}

func (c *Client) fail(reason, detail string, err error) *Error {
	return &Error{Reason: reason, Detail: c.redact(detail), Err: err}
}

// Redact scrubs every header value (and each credential-like word of one) from s.
func (c *Client) Redact(s string) string { return c.redact(s) }

func (c *Client) redact(s string) string { return c.redactor.Redact(s) }

// classify turns a transport failure during step ("the answer to tools/call from POST
// /mcp") into an *Error, deciding NotProcessed: only failures before any byte of the
// request left (dial, DNS, TLS handshake) qualify. A timeout names the
// HandshakeTimeout when there is one, as the deadline is the session's own.
func (c *Client) classify(ctx context.Context, err error, step string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	f := describeFailure(ctx, err, step, c.url, c.opts.MaxMessageBytes)
	if f.reason == ReasonTimeout && c.opts.HandshakeTimeout > 0 {
		f.detail += c.timeoutNote()
	}
	out := c.fail(f.reason, f.detail, err)
	out.NotProcessed = f.notSent
	return out
}

// timeoutNote names the bound a timed-out Connect ran into: " (handshake timeout
// 10s)" or " (connect timeout 10s)".
func (c *Client) timeoutNote() string {
	if c.opts.HandshakeTimeout > 0 {
		return fmt.Sprintf(" (handshake timeout %s)", c.opts.HandshakeTimeout)
	}
	return fmt.Sprintf(" (connect timeout %s)", c.opts.ConnectTimeout)
}

// ---- HTTP ----

// exchange is one HTTP request of a session.
type exchange struct {
	// what is the JSON-RPC method of the body ("tools/call"), or what the answer is
	// ("the SSE stream"), for details; "" for none.
	what   string
	method string
	url    *url.URL
	body   []byte // nil for none
	accept string
	// session is the Mcp-Session-Id, protocol the MCP-Protocol-Version and
	// lastEventID the Last-Event-ID to send ("" for none).
	session, protocol, lastEventID string
	// mcpMethod and mcpName are the Mcp-Method and Mcp-Name headers of a request of
	// protocol 2026-07-28 (SEP-2243); "" for none.
	mcpMethod, mcpName string
	// paramHeaders are the Mcp-Param-* headers of a 2026-07-28 tools/call.
	paramHeaders map[string]string
}

// send makes the request r, following redirects as the policy says (followRedirect):
// each target is checked before any connection to it, and the method and body are
// kept. Errors are *Error; a redirect the policy does not follow is returned as the
// answer it is.
func (c *Client) send(ctx context.Context, r exchange) (*http.Response, error) {
	u := r.url
	for hop := 0; ; hop++ {
		req, err := c.buildRequest(ctx, r, u)
		if err != nil {
			return nil, c.fail(ReasonInvalidConfig, fmt.Sprintf("cannot build the request %s %s: %v", r.method, Path(u), err), err)
		}
		resp, err := c.transport.RoundTrip(req)
		if err != nil {
			step := r.stepAt(u)
			if u != r.url {
				step += " (after a redirect to " + u.Host + ")"
			}
			return nil, c.classify(ctx, err, step)
		}
		if !isRedirect(resp.StatusCode) {
			return resp, nil
		}
		next, err := c.followRedirect(resp, r.method, hop)
		if next == nil && err == nil {
			return resp, nil
		}
		DrainAndClose(resp.Body)
		if err != nil {
			return nil, err
		}
		u = next
	}
}

// stepAt names the answer to r from u, for details: "the answer to initialize from
// POST /mcp", "the SSE stream from GET /sse".
func (r exchange) stepAt(u *url.URL) string {
	op := r.method + " " + Path(u)
	switch {
	case r.what == "":
		return "the answer to " + op
	case r.method == http.MethodPost:
		return "the answer to " + r.what + " from " + op
	}
	return r.what + " from " + op
}

// buildRequest builds r for u: the configured headers and the session go only where
// they are trusted.
func (c *Client) buildRequest(ctx context.Context, r exchange, u *url.URL) (*http.Request, error) {
	h := Headers{Accept: r.accept, ProtocolVersion: r.protocol, LastEventID: r.lastEventID, UserAgent: c.userAgent,
		Method: r.mcpMethod, Name: r.mcpName, Params: r.paramHeaders}
	var configured map[string]string
	if c.trusted(u) {
		configured, h.SessionID = c.opts.Headers, r.session
	}
	req, err := NewRequest(ctx, r.method, u, r.body, configured, h)
	if err == nil {
		// Trace context goes to every target, trusted or not: it names a trace, it is
		// no credential.
		tracing.InjectHeaders(ctx, req.Header)
	}
	return req, err
}

// trusted reports whether the headers (which may be secrets) may go to target: the
// configured host, and no downgrade from https to http.
func (c *Client) trusted(target *url.URL) bool {
	if !strings.EqualFold(target.Hostname(), c.url.Hostname()) {
		return false
	}
	return c.url.Scheme != "https" || target.Scheme != "http"
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// followRedirect decides on the redirect resp (the answer to a method request, after
// hop redirects): the target to request next, nil to hand resp to the caller as it is,
// or an *Error refusing it (only when a CheckRedirect lets redirects leave the origin).
func (c *Client) followRedirect(resp *http.Response, method string, hop int) (*url.URL, error) {
	from := resp.Request.URL
	next, err := from.Parse(resp.Header.Get("Location"))
	if c.opts.CheckRedirect == nil {
		// Within the origin, and only where the method stays what it is.
		keepsMethod := resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect || method == http.MethodGet
		if err != nil || resp.Header.Get("Location") == "" || hop >= MaxRedirects || !keepsMethod ||
			next.User != nil || Origin(next) != Origin(c.url) {
			return nil, nil
		}
		return next, nil
	}
	status, op := resp.Status, method+" "+Path(from)
	switch {
	case resp.Header.Get("Location") == "":
		return nil, c.fail(ReasonHTTPError, fmt.Sprintf("HTTP %s from %s without a Location", status, op), nil)
	case err != nil:
		return nil, c.fail(ReasonHTTPError, fmt.Sprintf("HTTP %s from %s with a Location that does not parse", status, op), err)
	}
	next.Fragment, next.RawFragment = "", ""
	target := Origin(next) + Path(next)
	switch {
	case next.Scheme != "http" && next.Scheme != "https":
		return nil, c.fail(ReasonRedirectRefused, fmt.Sprintf("redirect from %s to a %s: URL refused: only http and https", op, clip.Line(next.Scheme, 20)), nil)
	case next.User != nil:
		return nil, c.fail(ReasonRedirectRefused, fmt.Sprintf("redirect from %s to a URL with credentials refused", op), nil)
	case resp.StatusCode == http.StatusSeeOther && method != http.MethodGet:
		return nil, c.fail(ReasonHTTPError, fmt.Sprintf("HTTP %s from %s to %s: a 303 turns the %s into a GET, which MCP cannot use", status, op, target, method), nil)
	case hop >= MaxRedirects:
		return nil, c.fail(ReasonHTTPError, fmt.Sprintf("more than %d redirects, the last from %s to %s", MaxRedirects, op, target), nil)
	}
	if err := c.opts.CheckRedirect(next); err != nil {
		return nil, c.fail(ReasonRedirectRefused, fmt.Sprintf("redirect from %s to %s refused: %v", op, target, err), err)
	}
	return next, nil
}

// statusError describes a non-2xx answer to a method request that carried session (if
// any). Refusals that happen before the server processes anything are NotProcessed:
// an unknown session (404, or 400 naming the session, which SDK-based servers answer),
// refused credentials, and a cantus adapter refusing calls while it drains. A
// JSON-RPC error answered to initialize or a listing is an *RPCError, so that the
// caller's refusal reason holds; every other failure is an *Error.
func (c *Client) statusError(resp *http.Response, method string, session string) error {
	data := ReadErrorBody(resp.Body)
	snippet := clip.Line(string(bytes.ToValidUTF8(data, nil)), 160)
	var rpc Message
	hasRPC := json.Unmarshal(data, &rpc) == nil && rpc.Error != nil
	if hasRPC {
		snippet = fmt.Sprintf("%d %s", rpc.Error.Code, clip.Line(rpc.Error.Message, 160))
	}
	status := "HTTP " + resp.Status
	from := resp.Request.Method + " " + Path(resp.Request.URL)
	lower := strings.ToLower(snippet)
	switch {
	case session != "" && (resp.StatusCode == http.StatusNotFound ||
		resp.StatusCode == http.StatusBadRequest && strings.Contains(lower, "session")):
		e := c.fail(ReasonSessionLost, fmt.Sprintf("the server no longer knows the session (%s from %s: %s)", status, from, snippet), nil)
		e.NotProcessed, e.SessionLost = true, true
		return e
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		detail := fmt.Sprintf("%s from %s: the server refused the credentials (check the headers)", status, from)
		if !c.trusted(resp.Request.URL) {
			detail += "; the headers were not sent because a redirect left " + c.url.Hostname()
		}
		e := c.fail(ReasonUnauthorized, detail, nil)
		e.NotProcessed = true
		return e
	case resp.StatusCode == http.StatusServiceUnavailable && hasRPC && rpc.Error.Code == -32000 &&
		strings.HasPrefix(rpc.Error.Message, "server is shutting down"):
		// A cantus adapter draining for shutdown refuses before it reads the call.
		e := c.fail(ReasonSessionLost, fmt.Sprintf("%s from %s: the server is shutting down", status, from), nil)
		e.NotProcessed, e.SessionLost = true, true
		return e
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return c.fail(ReasonHTTPError, fmt.Sprintf("%s from %s: redirects are followed only within %s and only when they keep the method",
			status, from, Origin(c.url)), nil)
	case hasRPC && (method == "initialize" || strings.HasSuffix(method, "/list") || sentModern(resp.Request)):
		// A server of protocol 2026-07-28 answers a JSON-RPC error with a 4xx status.
		return &RPCError{Code: rpc.Error.Code, Message: c.redact(rpc.Error.Message), Data: rpc.Error.Data, status: status}
	}
	detail := fmt.Sprintf("%s from %s", status, from)
	if snippet != "" {
		detail += ": " + snippet
	}
	if method == "initialize" && resp.StatusCode == http.StatusNotFound && c.opts.Transport == TransportStreamableHTTP {
		detail += " (is this an SSE endpoint? set the transport to sse)"
	}
	return c.fail(ReasonHTTPError, detail, nil)
}

// ---- JSON-RPC ----

func (c *Client) encodeRequest(method string, params any) (int64, []byte, error) {
	id := c.nextID.Add(1)
	data, err := EncodeRequest(id, method, params)
	return id, data, err
}

// idOf reads a numeric id (or a string holding one); ok=false for anything else.
func idOf(raw json.RawMessage) (int64, bool) {
	s := strings.Trim(string(bytes.TrimSpace(raw)), `"`)
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

// answerOf turns the answer message into a result, an *RPCError or an *Error.
func (c *Client) answerOf(m Message, step string) (json.RawMessage, error) {
	if m.JSONRPC != "2.0" {
		return nil, c.fail(ReasonProtocolError, step+" is not a JSON-RPC 2.0 message", nil)
	}
	if m.Error != nil {
		return nil, &RPCError{Code: m.Error.Code, Message: c.redact(m.Error.Message), Data: m.Error.Data}
	}
	if len(m.Result) == 0 || string(m.Result) == "null" {
		return nil, c.fail(ReasonProtocolError, step+" has neither a result nor an error", nil)
	}
	return m.Result, nil
}

// jsonErrorText shortens an encoding/json error.
func jsonErrorText(err error) string {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("%s (at byte %d)", syntax.Error(), syntax.Offset)
	}
	return clip.Line(err.Error(), 200)
}
