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
// imported by internal/adapter because its tests import internal/adapter. What the two
// share (the event-stream reader, the transport, redaction, the JSON-RPC types) is in
// internal/mcpwire.
package mcpremote

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
	"syscall"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/mcpwire"
)

// Transports, as the adapter config names them.
const (
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
)

// ProtocolVersion is the MCP revision asked for in initialize. It is pinned: the
// newest revision without the initialize handshake (2026-07-28) is not spoken here.
const ProtocolVersion = mcpwire.ProtocolVersion

// supportedVersions are the revisions accepted in the initialize answer.
var supportedVersions = mcpwire.SupportedProtocolVersions()

// Defaults of the zero Options fields.
const (
	DefaultConnectTimeout            = 10 * time.Second
	DefaultMaxMessageBytes     int64 = 4 << 20
	DefaultMaxIdleConnsPerHost       = 64
	DefaultClientName                = "cantus-adapter"
	DefaultClientVersion             = "0.1.0"
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
	// Dial, when set, makes every connection (the gateway passes a dialer that connects
	// only to the addresses the operator's policy check resolved).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
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
	redactor  mcpwire.Redactor
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
	c := &Client{opts: opts, redactor: mcpwire.NewRedactor(opts.Headers)}
	invalid := func(detail string) (*Client, error) {
		return nil, &Error{Reason: ReasonInvalidConfig, Detail: detail}
	}
	if opts.Transport != TransportStreamableHTTP && opts.Transport != TransportSSE {
		return invalid(fmt.Sprintf("transport %q: use %q or %q", opts.Transport, TransportStreamableHTTP, TransportSSE))
	}
	u, err := mcpwire.ParseEndpoint(opts.URL)
	if err != nil {
		return invalid(err.Error())
	}
	c.url = u
	if err := mcpwire.CheckHeaders(opts.Headers); err != nil {
		return invalid(err.Error())
	}
	// No proxy from the environment (mcpwire.NewTransport): the remote is the address
	// the import names.
	c.transport, err = mcpwire.NewTransport(mcpwire.TransportConfig{
		CABundle:            opts.CABundle,
		Dial:                opts.Dial,
		DialTimeout:         opts.ConnectTimeout,
		MaxIdleConns:        4 * opts.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost: opts.MaxIdleConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: opts.ConnectTimeout,
	})
	if err != nil {
		return nil, &Error{Reason: ReasonTLSError, Detail: err.Error()}
	}
	c.http = &http.Client{Transport: c.transport, CheckRedirect: c.checkRedirect}
	return c, nil
}

// checkRedirect follows a redirect only within the configured origin and only when it
// keeps the method (307/308; a 301/302/303 would turn a POST into a GET). Anything
// else is returned to the caller as the 3xx it is.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= mcpwire.MaxRedirects || mcpwire.Origin(req.URL) != mcpwire.Origin(c.url) || req.Method != via[0].Method {
		return http.ErrUseLastResponse
	}
	return nil
}

// CloseIdleConnections closes the pooled connections no request is using.
func (c *Client) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// URL returns the endpoint without its query (which may hold a key), for messages.
func (c *Client) URL() string { return mcpwire.Origin(c.url) + mcpwire.Path(c.url) }

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

func (c *Client) redact(s string) string { return c.redactor.Redact(s) }

// classify turns a transport failure during step ("the answer to tools/call from POST
// /mcp") into an *Error, deciding NotProcessed: only failures before any byte of the
// request left (dial, DNS, TLS handshake) qualify.
func (c *Client) classify(ctx context.Context, err error, step string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	dial := mcpwire.IsDialError(err)
	if what, ok := mcpwire.Interrupted(ctx, err); ok {
		if dial {
			out := c.fail(ReasonTimeout, fmt.Sprintf("%s connecting to %s", what, c.url.Host), err)
			out.NotProcessed = true
			return out
		}
		return c.fail(ReasonTimeout, fmt.Sprintf("%s waiting for %s", what, step), err)
	}
	if errors.Is(err, mcpwire.ErrTooLarge) {
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
		out = c.fail(ReasonConnectionRefused, fmt.Sprintf("connection refused by %s", mcpwire.DialTarget(err, c.url.Host)), err)
		out.NotProcessed = true
	case dial:
		out = c.fail(ReasonConnectionRefused, fmt.Sprintf("cannot connect to %s: %v", mcpwire.DialTarget(err, c.url.Host), mcpwire.InnerError(err)), err)
		out.NotProcessed = true
	default:
		if detail, ok := tlsHandshakeDetail(err); ok {
			// The TLS handshake precedes the request: nothing of it was sent.
			out = c.fail(ReasonTLSError, fmt.Sprintf("TLS with %s failed: %s", c.url.Host, detail), err)
			out.NotProcessed = true
		} else if mcpwire.IsConnectionDrop(err) {
			out = c.fail(ReasonConnectionDropped, fmt.Sprintf("the server closed the connection during %s", step), err)
		} else {
			out = c.fail(ReasonConnectionDropped, fmt.Sprintf("%s failed: %v", step, mcpwire.InnerError(err)), err)
		}
	}
	return out
}

// tlsHandshakeDetail describes a failed TLS handshake; ok=false for anything else.
func tlsHandshakeDetail(err error) (string, bool) {
	if detail, ok := mcpwire.CertificateDetail(err); ok {
		return detail, true
	}
	return mcpwire.PlainHTTPDetail(err)
}

// ---- HTTP ----

// send makes one HTTP request to u with the configured headers. Errors are *Error.
func (c *Client) send(ctx context.Context, method string, u *url.URL, body []byte, accept, session, protocol, lastEventID string) (*http.Response, error) {
	req, err := mcpwire.NewRequest(ctx, method, u, body, c.opts.Headers, mcpwire.Headers{Accept: accept, SessionID: session,
		ProtocolVersion: protocol, LastEventID: lastEventID, UserAgent: c.opts.ClientName + "/" + c.opts.ClientVersion})
	if err != nil {
		return nil, c.fail(ReasonInvalidConfig, fmt.Sprintf("cannot build the request %s %s: %v", method, mcpwire.Path(u), err), err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.classify(ctx, err, "the answer to "+method+" "+mcpwire.Path(u))
	}
	return resp, nil
}

// statusError describes a non-2xx answer to a request that carried session (if any).
// Refusals that happen before the server processes anything are NotProcessed: an
// unknown session (404, or 400 naming the session, which SDK-based servers answer),
// refused credentials, and a cantus adapter refusing calls while it drains.
func (c *Client) statusError(resp *http.Response, what string, session string) *Error {
	data := mcpwire.ReadErrorBody(resp.Body)
	snippet := mcpwire.ClipText(string(bytes.ToValidUTF8(data, nil)), 160)
	var rpc mcpwire.Message
	hasRPC := json.Unmarshal(data, &rpc) == nil && rpc.Error != nil
	if hasRPC {
		snippet = fmt.Sprintf("%d %s", rpc.Error.Code, mcpwire.ClipText(rpc.Error.Message, 160))
	}
	status := "HTTP " + resp.Status
	from := resp.Request.Method + " " + mcpwire.Path(resp.Request.URL)
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
			status, from, mcpwire.Origin(c.url)), nil)
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

func (c *Client) newRequest(method string, params any) (int64, []byte, error) {
	id := c.nextID.Add(1)
	data, err := mcpwire.EncodeRequest(id, method, params)
	return id, data, err
}

// idOf reads a numeric id (or a string holding one); ok=false for anything else.
func idOf(raw json.RawMessage) (int64, bool) {
	s := strings.Trim(string(bytes.TrimSpace(raw)), `"`)
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

// answerOf turns the answer message into a result, an *RPCError or an *Error.
func (c *Client) answerOf(m mcpwire.Message, step string) (json.RawMessage, error) {
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

// ValidHeaderName reports whether name is an RFC 9110 field name.
func ValidHeaderName(name string) bool { return mcpwire.ValidHeaderName(name) }
