// Package mcpremote is the client side of re-exported tools: a long-lived MCP client
// session to a remote server, over streamable HTTP or the older HTTP+SSE transport,
// shared by concurrent tools/call requests.
//
// It owns its HTTP layer, like internal/mcpclient (the operator's handshake probe)
// and for the same reasons: every message is bounded in size, the connection pool is
// deep enough for a gateway, header values never appear in an error, and every failure
// says whether the server provably did not act on the request (Error.NotProcessed), so
// a caller can retry without running a tool twice. mcp-go's client reads answers
// without a bound and reports failures as wrapped strings; internal/mcpclient cannot be
// imported by internal/adapter because its tests import internal/adapter.
package mcpremote

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// Transports, as the adapter config names them.
const (
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
)

// ProtocolVersion is the MCP revision asked for in initialize. It is pinned: the
// newest revision without the initialize handshake (2026-07-28) is not spoken here.
const ProtocolVersion = "2025-11-25"

// supportedVersions are the revisions accepted in the initialize answer.
var supportedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Defaults of the zero Options fields.
const (
	DefaultConnectTimeout            = 10 * time.Second
	DefaultMaxMessageBytes     int64 = 4 << 20
	DefaultMaxIdleConnsPerHost       = 64
	DefaultClientName                = "cantus-adapter"
	DefaultClientVersion             = "0.1.0"
)

// maxRedirects bounds the redirects followed for one request.
const maxRedirects = 5

// Header names of the streamable HTTP transport.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "MCP-Protocol-Version"
)

const (
	contentTypeJSON = "application/json"
	contentTypeSSE  = "text/event-stream"
)

// Options configures a Client.
type Options struct {
	// URL is the endpoint: http(s)://host/mcp (streamable HTTP) or …/sse (SSE).
	URL string
	// Transport is TransportStreamableHTTP (default) or TransportSSE.
	Transport string
	// Headers go with every request. Their values may be secrets: they never appear
	// in an Error or an RPCError.
	Headers map[string]string
	// CABundle (PEM), when set, is the only set of CAs TLS trusts.
	CABundle []byte
	// ConnectTimeout bounds Connect (the initialize handshake). Default
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// MaxMessageBytes bounds every answer body and every event of an event stream.
	// Default DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// MaxIdleConnsPerHost is the depth of the keep-alive pool. Default
	// DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int
	// ClientName and ClientVersion are sent in initialize.
	ClientName, ClientVersion string
}

// Client is the HTTP side of one remote: URL, headers, TLS trust and a connection
// pool. Sessions made by one Client share its connections. A Client is safe for
// concurrent use.
type Client struct {
	opts      Options
	url       *url.URL
	transport *http.Transport
	http      *http.Client
	secrets   []string
	nextID    atomic.Int64
}

// New checks opts and builds a Client; it does not connect.
func New(opts Options) (*Client, error) {
	if opts.Transport == "" {
		opts.Transport = TransportStreamableHTTP
	}
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
	c := &Client{opts: opts, secrets: secretsOf(opts.Headers)}
	invalid := func(detail string) (*Client, error) {
		return nil, &Error{Reason: ReasonInvalidConfig, Detail: detail}
	}
	if opts.Transport != TransportStreamableHTTP && opts.Transport != TransportSSE {
		return invalid(fmt.Sprintf("transport %q: use %q or %q", opts.Transport, TransportStreamableHTTP, TransportSSE))
	}
	u, err := url.Parse(opts.URL)
	switch {
	case err != nil:
		return invalid("the URL does not parse")
	case u.User != nil:
		return invalid("the URL carries credentials: send them in a header instead")
	case u.Scheme != "http" && u.Scheme != "https":
		return invalid(fmt.Sprintf("URL scheme %q: use http or https", clipText(u.Scheme, 20)))
	case u.Hostname() == "":
		return invalid("the URL has no host")
	}
	u.Fragment, u.RawFragment = "", ""
	c.url = u
	for name, value := range opts.Headers {
		if !validHeaderName(name) {
			return invalid(fmt.Sprintf("header name %q is not a valid HTTP field name", clipText(name, 60)))
		}
		if !validHeaderValue(value) {
			return invalid(fmt.Sprintf("the value of header %s holds control characters", name))
		}
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(opts.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(opts.CABundle) {
			return nil, &Error{Reason: ReasonTLSError, Detail: "the CA bundle holds no PEM certificate"}
		}
		tlsConfig.RootCAs = pool
	}
	c.transport = &http.Transport{
		// No proxy from the environment: the remote is the address the import names.
		Proxy:                  nil,
		DialContext:            (&net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:        tlsConfig,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           4 * opts.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:    opts.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    opts.ConnectTimeout,
		MaxResponseHeaderBytes: 64 << 10,
	}
	c.http = &http.Client{Transport: c.transport, CheckRedirect: c.checkRedirect}
	return c, nil
}

// checkRedirect follows a redirect only within the configured origin and only when it
// keeps the method (307/308; a 301/302/303 would turn a POST into a GET). Anything
// else is returned to the caller as the 3xx it is.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects || originOf(req.URL) != originOf(c.url) || req.Method != via[0].Method {
		return http.ErrUseLastResponse
	}
	return nil
}

// CloseIdleConnections closes the pooled connections no request is using.
func (c *Client) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// URL returns the endpoint without its query (which may hold a key), for messages.
func (c *Client) URL() string { return originOf(c.url) + pathOf(c.url) }

// ---- errors ----

// Reasons of an Error, CamelCase like status condition reasons.
const (
	ReasonTimeout           = "Timeout"
	ReasonConnectionRefused = "ConnectionRefused" // includes "no route" and any other dial failure
	ReasonDNSError          = "DNSError"
	ReasonTLSError          = "TLSError"
	ReasonUnauthorized      = "Unauthorized" // HTTP 401 or 403
	ReasonHTTPError         = "HTTPError"    // any other non-2xx status
	ReasonProtocolError     = "ProtocolError"
	ReasonInitializeFailed  = "InitializeFailed" // a JSON-RPC error answer to initialize
	ReasonResponseTooLarge  = "ResponseTooLarge"
	ReasonConnectionDropped = "ConnectionDropped"
	ReasonSessionLost       = "SessionLost" // the server does not know the session (any more)
	ReasonInvalidConfig     = "InvalidConfig"
)

// Error is a request that got no JSON-RPC answer. Detail names the step and never holds
// a header value.
type Error struct {
	Reason string
	Detail string
	// NotProcessed is true when the server provably did not act on the request: it
	// never left this process (no connection could be made), or the server refused it
	// before processing (unknown session, credentials refused, a draining cantus
	// adapter). Retrying such a request cannot run a tool twice.
	NotProcessed bool
	// SessionLost is true when the session cannot be used again: connect anew.
	SessionLost bool
	Err         error
}

func (e *Error) Error() string { return e.Detail }

func (e *Error) Unwrap() error { return e.Err }

// RPCError is a JSON-RPC error answer: the server received the request and refused or
// failed it.
type RPCError struct {
	Code    int
	Message string
	Data    json.RawMessage
}

func (e *RPCError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

func (c *Client) fail(reason, detail string, err error) *Error {
	return &Error{Reason: reason, Detail: c.redact(detail), Err: err}
}

// Redact scrubs every header value (and each credential-like word of one) from s.
func (c *Client) Redact(s string) string { return c.redact(s) }

const redacted = "[redacted]"

func (c *Client) redact(s string) string {
	for _, secret := range c.secrets {
		s = strings.ReplaceAll(s, secret, redacted)
	}
	return s
}

// secretsOf lists the strings to scrub: each header value, and each word of it long
// enough to be a credential ("Bearer abc…" → "abc…"), longest first.
func secretsOf(headers map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) < 4 || seen[s] {
			return
		}
		seen[s] = true
		out = append(out, s)
	}
	for _, v := range headers {
		add(v)
		for _, f := range strings.Fields(v) {
			if len(f) >= 6 {
				add(f)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

var errTooLarge = errors.New("message over the size limit")

// classify turns a transport failure during step ("the answer to tools/call from POST
// /mcp") into an *Error, deciding NotProcessed: only failures before any byte of the
// request left (dial, DNS, TLS handshake) qualify.
func (c *Client) classify(ctx context.Context, err error, step string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	dial := isDialError(err)
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		what := "timed out"
		if errors.Is(ctx.Err(), context.Canceled) {
			what = "cancelled"
		}
		if dial {
			out := c.fail(ReasonTimeout, fmt.Sprintf("%s connecting to %s", what, c.url.Host), err)
			out.NotProcessed = true
			return out
		}
		return c.fail(ReasonTimeout, fmt.Sprintf("%s waiting for %s", what, step), err)
	}
	if errors.Is(err, errTooLarge) {
		return c.fail(ReasonResponseTooLarge, fmt.Sprintf("%s is larger than %d bytes", step, c.opts.MaxMessageBytes), err)
	}
	var out *Error
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr):
		why := dnsErr.Err
		if dnsErr.IsNotFound {
			why = "no such host"
		}
		out = c.fail(ReasonDNSError, fmt.Sprintf("cannot resolve %s: %s", c.url.Hostname(), why), err)
		out.NotProcessed = true
	case errors.Is(err, syscall.ECONNREFUSED) && dial:
		out = c.fail(ReasonConnectionRefused, fmt.Sprintf("connection refused by %s", dialTarget(err, c.url.Host)), err)
		out.NotProcessed = true
	case dial:
		out = c.fail(ReasonConnectionRefused, fmt.Sprintf("cannot connect to %s: %v", dialTarget(err, c.url.Host), innerError(err)), err)
		out.NotProcessed = true
	default:
		if detail, ok := tlsHandshakeDetail(err); ok {
			// The TLS handshake precedes the request: nothing of it was sent.
			out = c.fail(ReasonTLSError, fmt.Sprintf("TLS with %s failed: %s", c.url.Host, detail), err)
			out.NotProcessed = true
		} else if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
			errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
			out = c.fail(ReasonConnectionDropped, fmt.Sprintf("the server closed the connection during %s", step), err)
		} else {
			out = c.fail(ReasonConnectionDropped, fmt.Sprintf("%s failed: %v", step, innerError(err)), err)
		}
	}
	return out
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// tlsHandshakeDetail describes a failed TLS handshake; ok=false for anything else.
func tlsHandshakeDetail(err error) (string, bool) {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknownCA):
		return "the server's certificate is signed by an unknown authority (set the CA bundle)", true
	case errors.As(err, &hostname):
		return "the server's certificate does not match the host: " + hostname.Error(), true
	case errors.As(err, &invalid):
		return "the server's certificate is invalid: " + invalid.Error(), true
	case errors.As(err, &verify):
		return "cannot verify the server's certificate: " + verify.Err.Error(), true
	case errors.As(err, &record):
		return "the server does not speak TLS", true
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "the server answered in plain HTTP (use an http:// URL?)", true
	}
	return "", false
}

func dialTarget(err error, fallback string) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		return op.Addr.String()
	}
	return fallback
}

// innerError drops the *url.Error wrapper, whose text repeats the URL and its query.
func innerError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// ---- HTTP ----

// send makes one HTTP request to u with the configured headers. Errors are *Error.
func (c *Client) send(ctx context.Context, method string, u *url.URL, body []byte, accept, session, protocol, lastEventID string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, c.fail(ReasonInvalidConfig, fmt.Sprintf("cannot build the request %s %s: %v", method, pathOf(u), err), err)
	}
	for name, value := range c.opts.Headers {
		req.Header.Set(name, value)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentTypeJSON)
	}
	if session != "" {
		req.Header.Set(headerSessionID, session)
	}
	if protocol != "" {
		req.Header.Set(headerProtocolVersion, protocol)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	req.Header.Set("User-Agent", c.opts.ClientName+"/"+c.opts.ClientVersion)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.classify(ctx, err, "the answer to "+method+" "+pathOf(u))
	}
	return resp, nil
}

// statusError describes a non-2xx answer to a request that carried session (if any).
// Refusals that happen before the server processes anything are NotProcessed: an
// unknown session (404, or 400 naming the session, which SDK-based servers answer),
// refused credentials, and a cantus adapter refusing calls while it drains.
func (c *Client) statusError(resp *http.Response, what string, session string) *Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	snippet := clipText(string(bytes.ToValidUTF8(data, nil)), 160)
	var rpc rpcMessage
	hasRPC := json.Unmarshal(data, &rpc) == nil && rpc.Error != nil
	if hasRPC {
		snippet = fmt.Sprintf("%d %s", rpc.Error.Code, clipText(rpc.Error.Message, 160))
	}
	status := "HTTP " + resp.Status
	from := resp.Request.Method + " " + pathOf(resp.Request.URL)
	lower := strings.ToLower(snippet)
	switch {
	case session != "" && (resp.StatusCode == http.StatusNotFound ||
		resp.StatusCode == http.StatusBadRequest && strings.Contains(lower, "session")):
		e := c.fail(ReasonSessionLost, fmt.Sprintf("the server no longer knows the session (%s from %s: %s)", status, from, snippet), nil)
		e.NotProcessed, e.SessionLost = true, true
		return e
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		e := c.fail(ReasonUnauthorized, fmt.Sprintf("%s from %s: the server refused the credentials (check the header files)", status, from), nil)
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
			status, from, originOf(c.url)), nil)
	}
	detail := fmt.Sprintf("%s from %s", status, from)
	if snippet != "" {
		detail += ": " + snippet
	}
	if what == "initialize" && resp.StatusCode == http.StatusNotFound && c.opts.Transport == TransportStreamableHTTP {
		detail += " (is this an SSE endpoint? set the transport to sse)"
	}
	return c.fail(ReasonHTTPError, detail, nil)
}

// ---- JSON-RPC ----

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int64 `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

func (c *Client) newRequest(method string, params any) (int64, []byte, error) {
	id := c.nextID.Add(1)
	data, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
	return id, data, err
}

func notification(method string) []byte {
	data, _ := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: method})
	return data
}

// parseMessages reads one JSON-RPC message or a batch.
func parseMessages(data []byte) ([]rpcMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var msgs []rpcMessage
		if err := json.Unmarshal(data, &msgs); err != nil {
			return nil, err
		}
		return msgs, nil
	}
	var m rpcMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return []rpcMessage{m}, nil
}

// idOf reads a numeric id (or a string holding one); ok=false for anything else.
func idOf(raw json.RawMessage) (int64, bool) {
	s := strings.Trim(string(bytes.TrimSpace(raw)), `"`)
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

// answerOf turns the answer message into a result, an *RPCError or an *Error.
func (c *Client) answerOf(m rpcMessage, step string) (json.RawMessage, error) {
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

// ---- helpers ----

func originOf(u *url.URL) string { return u.Scheme + "://" + u.Host }

func pathOf(u *url.URL) string {
	if u.Path == "" {
		return "/"
	}
	return u.Path
}

func mediaTypeOf(resp *http.Response) string {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt
}

func drainAndClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	_ = body.Close()
}

// clipText keeps s to one line of at most max bytes, cut on a rune boundary.
func clipText(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if ch <= ' ' || ch >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, ch) >= 0 {
			return false
		}
	}
	return true
}

// ValidHeaderName reports whether name is an RFC 9110 field name.
func ValidHeaderName(name string) bool { return validHeaderName(name) }

func validHeaderValue(value string) bool {
	for i := 0; i < len(value); i++ {
		ch := value[i]
		if (ch < ' ' && ch != '\t') || ch == 0x7f {
			return false
		}
	}
	return true
}

// limitedReader fails with errTooLarge once more than max bytes were read.
type limitedReader struct {
	r      io.Reader
	n, max int64
}

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.n > l.max {
		return 0, errTooLarge
	}
	if rest := l.max + 1 - l.n; int64(len(b)) > rest {
		b = b[:rest]
	}
	n, err := l.r.Read(b)
	l.n += int64(n)
	if l.n > l.max {
		return n, errTooLarge
	}
	return n, err
}
