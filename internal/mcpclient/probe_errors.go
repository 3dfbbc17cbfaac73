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
)

// fail builds an *Error, scrubbing every header value from the detail (a server may
// echo a token back in an error page or a JSON-RPC message).
func (p *prober) fail(reason, detail string, err error) *Error {
	return &Error{Reason: reason, Detail: p.redact(detail), Err: err, marker: HandshakeMarker}
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
	if what, ok := Interrupted(ctx, err); ok {
		if IsDialError(err) {
			return p.fail(ReasonTimeout, fmt.Sprintf("%s connecting to %s (handshake timeout %s)", what, p.url.Host, p.budget), err)
		}
		if re != nil && re.n > 0 {
			return p.fail(ReasonTimeout, fmt.Sprintf("%s after %d bytes of %s (handshake timeout %s)", what, re.n, step, p.budget), err)
		}
		return p.fail(ReasonTimeout, fmt.Sprintf("%s waiting for %s (handshake timeout %s)", what, step, p.budget), err)
	}
	if errors.Is(err, ErrTooLarge) {
		return p.fail(ReasonResponseTooLarge, fmt.Sprintf("%s is larger than %d bytes (MaxMessageBytes)", step, p.opts.MaxMessageBytes), err)
	}
	if HeadersTooLarge(err) {
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
		return p.fail(ReasonConnectionRefused, fmt.Sprintf("connection refused by %s", DialTarget(err, p.url.Host)), err)
	}
	if errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return p.fail(ReasonConnectionRefused, fmt.Sprintf("%s is unreachable (no route)", DialTarget(err, p.url.Host)), err)
	}
	if detail, ok := tlsDetail(err); ok {
		return p.fail(ReasonTLSError, fmt.Sprintf("TLS with %s failed: %s", p.url.Host, detail), err)
	}
	if IsConnectionDrop(err) {
		if re != nil && re.n > 0 {
			return p.fail(ReasonConnectionDropped, fmt.Sprintf("server closed the connection mid-answer after %d bytes of %s", re.n, step), err)
		}
		return p.fail(ReasonConnectionDropped, fmt.Sprintf("server closed the connection before %s", step), err)
	}
	var op *net.OpError
	if errors.As(err, &op) {
		if op.Op == "dial" {
			return p.fail(ReasonConnectionRefused, fmt.Sprintf("cannot connect to %s: %v", DialTarget(err, p.url.Host), op.Err), err)
		}
		return p.fail(ReasonConnectionDropped, fmt.Sprintf("connection failed during %s: %v", step, op.Err), err)
	}
	return p.fail(ReasonConnectionDropped, fmt.Sprintf("%s failed: %v", step, InnerError(err)), err)
}

// tlsDetail describes a TLS failure, ok=false when err is none.
func tlsDetail(err error) (string, bool) {
	if detail, ok := CertificateDetail(err); ok {
		return detail, true
	}
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return "the server sent alert: " + alert.Error(), true
	}
	if detail, ok := PlainHTTPDetail(err); ok {
		return detail, true
	}
	if strings.Contains(err.Error(), "tls: ") {
		return InnerError(err).Error(), true
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
	return ClipText(err.Error(), 200)
}
