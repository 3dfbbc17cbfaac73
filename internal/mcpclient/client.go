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
)

// ClientOptions configures a Client (the gateway's long-lived sessions).
type ClientOptions struct {
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
	opts      ClientOptions
	url       *url.URL
	transport *Transport
	http      *http.Client
	redactor  Redactor
	userAgent string
	nextID    atomic.Int64
}

// New checks opts and builds a Client; it does not connect.
func New(opts ClientOptions) (*Client, error) {
	transport, err := transportOrDefault(opts.Transport)
	if err != nil {
		return nil, &Error{Reason: ReasonInvalidConfig, Detail: err.Error()}
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
	c := &Client{opts: opts, redactor: NewRedactor(opts.Headers), userAgent: opts.ClientName + "/" + opts.ClientVersion}
	invalid := func(detail string) (*Client, error) {
		return nil, &Error{Reason: ReasonInvalidConfig, Detail: detail}
	}
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
		return nil, &Error{Reason: ReasonTLSError, Detail: err.Error()}
	}
	c.http = &http.Client{Transport: c.transport, CheckRedirect: c.checkRedirect}
	return c, nil
}

// checkRedirect follows a redirect only within the configured origin and only when it
// keeps the method (307/308; a 301/302/303 would turn a POST into a GET). Anything
// else is returned to the caller as the 3xx it is.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= MaxRedirects || Origin(req.URL) != Origin(c.url) || req.Method != via[0].Method {
		return http.ErrUseLastResponse
	}
	return nil
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
	f := describeFailure(ctx, err, step, c.url, c.opts.MaxMessageBytes)
	out := c.fail(f.reason, f.detail, err)
	out.NotProcessed = f.notSent
	return out
}

// ---- HTTP ----

// send makes one HTTP request to u with the configured headers. Errors are *Error.
func (c *Client) send(ctx context.Context, method string, u *url.URL, body []byte, accept, session, protocol, lastEventID string) (*http.Response, error) {
	newRequest := func() (*http.Request, error) {
		return NewRequest(ctx, method, u, body, c.opts.Headers, Headers{Accept: accept, SessionID: session,
			ProtocolVersion: protocol, LastEventID: lastEventID, UserAgent: c.userAgent})
	}
	req, err := newRequest()
	if err != nil {
		return nil, c.fail(ReasonInvalidConfig, fmt.Sprintf("cannot build the request %s %s: %v", method, Path(u), err), err)
	}
	// http.Client, which follows redirects as checkRedirect says, copies every
	// request's headers in case one is redirected; a gateway sends a request per call,
	// so only a request that is redirected is sent again through it.
	resp, err := c.transport.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect) {
		DrainAndClose(resp.Body)
		if req, err = newRequest(); err == nil {
			resp, err = c.http.Do(req)
		}
	}
	if err != nil {
		return nil, c.classify(ctx, err, "the answer to "+method+" "+Path(u))
	}
	return resp, nil
}

// statusError describes a non-2xx answer to a request that carried session (if any).
// Refusals that happen before the server processes anything are NotProcessed: an
// unknown session (404, or 400 naming the session, which SDK-based servers answer),
// refused credentials, and a cantus adapter refusing calls while it drains.
func (c *Client) statusError(resp *http.Response, what string, session string) *Error {
	data := ReadErrorBody(resp.Body)
	snippet := ClipText(string(bytes.ToValidUTF8(data, nil)), 160)
	var rpc Message
	hasRPC := json.Unmarshal(data, &rpc) == nil && rpc.Error != nil
	if hasRPC {
		snippet = fmt.Sprintf("%d %s", rpc.Error.Code, ClipText(rpc.Error.Message, 160))
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
			status, from, Origin(c.url)), nil)
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

// ---- helpers ----
