package mcpclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"
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

const redacted = "[redacted]"

func (p *prober) redact(s string) string {
	for _, secret := range p.secrets {
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
	// Longest first, so that a whole value is replaced before its parts.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && len(out[j]) > len(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Sentinel errors of the body readers.
var (
	errTooLarge = errors.New("message over the size limit")
)

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
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		what := "timed out"
		if errors.Is(ctx.Err(), context.Canceled) {
			what = "cancelled"
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return p.fail(ReasonTimeout, fmt.Sprintf("%s connecting to %s (handshake timeout %s)", what, p.url.Host, p.budget), err)
		}
		if re != nil && re.n > 0 {
			return p.fail(ReasonTimeout, fmt.Sprintf("%s after %d bytes of %s (handshake timeout %s)", what, re.n, step, p.budget), err)
		}
		return p.fail(ReasonTimeout, fmt.Sprintf("%s waiting for %s (handshake timeout %s)", what, step, p.budget), err)
	}
	if errors.Is(err, errTooLarge) {
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
		return p.fail(ReasonConnectionRefused, fmt.Sprintf("connection refused by %s", dialTarget(err, p.url.Host)), err)
	}
	if errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return p.fail(ReasonConnectionRefused, fmt.Sprintf("%s is unreachable (no route)", dialTarget(err, p.url.Host)), err)
	}
	if detail, ok := tlsDetail(err); ok {
		return p.fail(ReasonTLSError, fmt.Sprintf("TLS with %s failed: %s", p.url.Host, detail), err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		if re != nil && re.n > 0 {
			return p.fail(ReasonConnectionDropped, fmt.Sprintf("server closed the connection mid-answer after %d bytes of %s", re.n, step), err)
		}
		return p.fail(ReasonConnectionDropped, fmt.Sprintf("server closed the connection before %s", step), err)
	}
	var op *net.OpError
	if errors.As(err, &op) {
		if op.Op == "dial" {
			return p.fail(ReasonConnectionRefused, fmt.Sprintf("cannot connect to %s: %v", dialTarget(err, p.url.Host), op.Err), err)
		}
		return p.fail(ReasonConnectionDropped, fmt.Sprintf("connection failed during %s: %v", step, op.Err), err)
	}
	return p.fail(ReasonConnectionDropped, fmt.Sprintf("%s failed: %v", step, innerError(err)), err)
}

// tlsDetail describes a TLS failure, ok=false when err is none.
func tlsDetail(err error) (string, bool) {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var alert tls.AlertError
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
	case errors.As(err, &alert):
		return "the server sent alert: " + alert.Error(), true
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "the server answered in plain HTTP (use an http:// URL?)", true
	case strings.Contains(err.Error(), "tls: "):
		return innerError(err).Error(), true
	}
	return "", false
}

// dialTarget is the address a dial failed on ("127.0.0.1:80"), or fallback.
func dialTarget(err error, fallback string) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		return op.Addr.String()
	}
	return fallback
}

func hostOr(name, fallback string) string {
	if name != "" {
		return name
	}
	return fallback
}

// innerError drops the *url.Error wrapper (whose text repeats the whole URL, query
// included).
func innerError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// jsonErrorText shortens an encoding/json error.
func jsonErrorText(err error) string {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("%s (at byte %d)", syntax.Error(), syntax.Offset)
	}
	return clipText(err.Error(), 200)
}

// clipText keeps s to one line of at most max characters.
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
