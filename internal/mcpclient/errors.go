package mcpclient

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/cantus-dev/cantus-operator/internal/mcpwire"
)

// Marker begins every Error message (the seed's machine-readable marker).
const Marker = "mcp_handshake_failed: "

// Reasons of a failed handshake, CamelCase for status conditions.
const (
	ReasonTimeout           = "Timeout"
	ReasonConnectionRefused = "ConnectionRefused"
	ReasonDNSError          = "DNSError"
	ReasonTLSError          = "TLSError"
	ReasonUnauthorized      = "Unauthorized"      // HTTP 401 or 403
	ReasonHTTPError         = "HTTPError"         // any other non-2xx status
	ReasonProtocolError     = "ProtocolError"     // not JSON, not JSON-RPC, not MCP, wrong content type
	ReasonInitializeFailed  = "InitializeFailed"  // a JSON-RPC error answer to initialize
	ReasonToolsListFailed   = "ToolsListFailed"   // a JSON-RPC error answer to tools/list, or a looping cursor
	ReasonResponseTooLarge  = "ResponseTooLarge"  // a body over MaxMessageBytes, or more than MaxTools tools
	ReasonRedirectRefused   = "RedirectRefused"   // CheckRedirect said no (or a non-http(s) target)
	ReasonConnectionDropped = "ConnectionDropped" // EOF or reset before the answer was complete
	ReasonInvalidConfig     = "InvalidConfig"     // the Options themselves are unusable
)

// Error is a failed handshake. Detail is short, names the step and never holds a
// header value.
type Error struct {
	Reason string
	Detail string
	Err    error
}

func (e *Error) Error() string { return Marker + e.Detail }

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of an *Error in err's chain, "" if there is none.
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// fail builds an *Error, scrubbing every header value from the detail (a server may
// echo a token back in an error page or a JSON-RPC message).
func (p *prober) fail(reason, detail string, err error) *Error {
	return &Error{Reason: reason, Detail: p.redact(detail), Err: err}
}

func (p *prober) redact(s string) string { return p.redactor.Redact(s) }

// readError is a failure while reading a body, after n bytes of it.
type readError struct {
	err error
	n   int64
}

func (e *readError) Error() string { return fmt.Sprintf("after %d bytes: %v", e.n, e.err) }
func (e *readError) Unwrap() error { return e.err }

// classify turns a transport failure during step (e.g. "the answer to initialize from
// POST /mcp") into an *Error.
func (p *prober) classify(ctx context.Context, err error, step string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var re *readError
	errors.As(err, &re)

	// The handshake's own deadline (or the caller's cancellation) first: whatever
	// the transport made of it, that is what happened.
	if what, ok := mcpwire.Interrupted(ctx, err); ok {
		if mcpwire.IsDialError(err) {
			return p.fail(ReasonTimeout, fmt.Sprintf("%s connecting to %s (handshake timeout %s)", what, p.url.Host, p.budget), err)
		}
		if re != nil && re.n > 0 {
			return p.fail(ReasonTimeout, fmt.Sprintf("%s after %d bytes of %s (handshake timeout %s)", what, re.n, step, p.budget), err)
		}
		return p.fail(ReasonTimeout, fmt.Sprintf("%s waiting for %s (handshake timeout %s)", what, step, p.budget), err)
	}
	if errors.Is(err, mcpwire.ErrTooLarge) {
		return p.fail(ReasonResponseTooLarge, fmt.Sprintf("%s is larger than %d bytes (MaxMessageBytes)", step, p.opts.MaxMessageBytes), err)
	}
	if strings.Contains(err.Error(), "response headers exceeded") {
		return p.fail(ReasonResponseTooLarge, fmt.Sprintf("the response headers of %s are too large", step), err)
	}

	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		why := dnsErr.Err
		switch {
		case dnsErr.IsNotFound:
			why = "no such host"
		case dnsErr.IsTimeout:
			why = "lookup timed out"
		}
		return p.fail(ReasonDNSError, fmt.Sprintf("cannot resolve %s: %s", hostOr(dnsErr.Name, p.url.Hostname()), why), err)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return p.fail(ReasonConnectionRefused, fmt.Sprintf("connection refused by %s", mcpwire.DialTarget(err, p.url.Host)), err)
	}
	if errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return p.fail(ReasonConnectionRefused, fmt.Sprintf("%s is unreachable (no route)", mcpwire.DialTarget(err, p.url.Host)), err)
	}
	if detail, ok := tlsDetail(err); ok {
		return p.fail(ReasonTLSError, fmt.Sprintf("TLS with %s failed: %s", p.url.Host, detail), err)
	}
	if mcpwire.IsConnectionDrop(err) {
		if re != nil && re.n > 0 {
			return p.fail(ReasonConnectionDropped, fmt.Sprintf("server closed the connection mid-answer after %d bytes of %s", re.n, step), err)
		}
		return p.fail(ReasonConnectionDropped, fmt.Sprintf("server closed the connection before %s", step), err)
	}
	var op *net.OpError
	if errors.As(err, &op) {
		if op.Op == "dial" {
			return p.fail(ReasonConnectionRefused, fmt.Sprintf("cannot connect to %s: %v", mcpwire.DialTarget(err, p.url.Host), op.Err), err)
		}
		return p.fail(ReasonConnectionDropped, fmt.Sprintf("connection failed during %s: %v", step, op.Err), err)
	}
	return p.fail(ReasonConnectionDropped, fmt.Sprintf("%s failed: %v", step, mcpwire.InnerError(err)), err)
}

// tlsDetail describes a TLS failure, ok=false when err is none.
func tlsDetail(err error) (string, bool) {
	if detail, ok := mcpwire.CertificateDetail(err); ok {
		return detail, true
	}
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return "the server sent alert: " + alert.Error(), true
	}
	if detail, ok := mcpwire.PlainHTTPDetail(err); ok {
		return detail, true
	}
	if strings.Contains(err.Error(), "tls: ") {
		return mcpwire.InnerError(err).Error(), true
	}
	return "", false
}

func hostOr(name, fallback string) string {
	if name != "" {
		return name
	}
	return fallback
}

// jsonErrorText shortens an encoding/json error.
func jsonErrorText(err error) string {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("%s (at byte %d)", syntax.Error(), syntax.Offset)
	}
	return mcpwire.ClipText(err.Error(), 200)
}
