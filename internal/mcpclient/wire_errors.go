package mcpclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
)

// Interrupted reports whether a failure is the end of ctx or a deadline, whatever the
// transport made of it; what is "cancelled" when ctx was cancelled, else "timed out".
func Interrupted(ctx context.Context, err error) (what string, ok bool) {
	if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
		return "", false
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return "cancelled", true
	}
	return "timed out", true
}

// IsDialError reports whether err is the failure to make a connection.
func IsDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// DialTarget is the address a dial failed on ("127.0.0.1:80"), or fallback.
func DialTarget(err error, fallback string) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		return op.Addr.String()
	}
	return fallback
}

// HeadersTooLarge reports whether err is an answer's headers exceeding 64 KiB, as the
// plain-HTTP pool or net/http's Transport (https) says it.
func HeadersTooLarge(err error) bool {
	return errors.Is(err, errHeadersTooLarge) || strings.Contains(err.Error(), "response headers exceeded")
}

// IsConnectionDrop reports whether err is the connection ending early: EOF, a reset,
// a broken pipe, an abort.
func IsConnectionDrop(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// CertificateDetail describes a failed TLS handshake for the certificate it was shown
// or a server that does not speak TLS; ok=false for anything else.
func CertificateDetail(err error) (string, bool) {
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
	}
	return "", false
}

// PlainHTTPDetail describes an https request answered in plain HTTP; ok=false for
// anything else.
func PlainHTTPDetail(err error) (string, bool) {
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return "the server answered in plain HTTP (use an http:// URL?)", true
	}
	return "", false
}

// InnerError drops the *url.Error wrapper, whose text repeats the whole URL, query
// included.
func InnerError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// readError is a failure while reading a body, after n bytes of it.
type readError struct {
	err error
	n   int64
}

func (e *readError) Error() string { return fmt.Sprintf("after %d bytes: %v", e.n, e.err) }
func (e *readError) Unwrap() error { return e.err }

// countingReader counts the bytes of an event stream, so that a failure says how much
// of it had come (a *readError).
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		err = &readError{err: err, n: c.n}
	}
	return n, err
}

// tlsHandshakeDetail describes a failed TLS handshake (the certificate, or a server
// that answered in plain HTTP), which precedes the request; ok=false for anything else.
func tlsHandshakeDetail(err error) (string, bool) {
	if detail, ok := CertificateDetail(err); ok {
		return detail, true
	}
	return PlainHTTPDetail(err)
}

// tlsDetail describes another TLS failure (an alert, or whatever crypto/tls says);
// ok=false when err is none.
func tlsDetail(err error) (string, bool) {
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return "the server sent alert: " + alert.Error(), true
	}
	if strings.Contains(err.Error(), "tls: ") {
		return InnerError(err).Error(), true
	}
	return "", false
}

// failure is what a transport error says, in the same reasons and words for the
// operator's handshake and the gateway's calls.
type failure struct {
	reason, detail string
	// notSent is true when no byte of the request can have left: the name lookup, the
	// connection or the TLS handshake failed.
	notSent bool
}

// describeFailure classifies err, a failure during step ("the answer to initialize
// from POST /mcp") of a request to server; maxBytes is the message limit it may have
// exceeded. A *readError says how much of the answer had arrived.
func describeFailure(ctx context.Context, err error, step string, server *url.URL, maxBytes int64) failure {
	host := server.Host
	var read *readError
	errors.As(err, &read)
	dial := IsDialError(err)
	if what, ok := Interrupted(ctx, err); ok {
		switch {
		case dial:
			return failure{ReasonTimeout, fmt.Sprintf("%s connecting to %s", what, host), true}
		case read != nil && read.n > 0:
			return failure{ReasonTimeout, fmt.Sprintf("%s after %d bytes of %s", what, read.n, step), false}
		}
		return failure{ReasonTimeout, fmt.Sprintf("%s waiting for %s", what, step), false}
	}
	if errors.Is(err, ErrTooLarge) {
		return failure{ReasonResponseTooLarge, fmt.Sprintf("%s is larger than %d bytes", step, maxBytes), false}
	}
	if HeadersTooLarge(err) {
		return failure{ReasonResponseTooLarge, fmt.Sprintf("the headers of %s are larger than %d bytes", step, maxResponseHeaderBytes), false}
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return failure{ReasonDNSError, fmt.Sprintf("cannot resolve %s: %s", hostOr(dnsErr.Name, server.Hostname()), lookupFailure(dnsErr)), true}
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return failure{ReasonConnectionRefused, "connection refused by " + DialTarget(err, host), dial}
	}
	if errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return failure{ReasonConnectionRefused, DialTarget(err, host) + " is unreachable (no route)", dial}
	}
	if detail, ok := tlsHandshakeDetail(err); ok {
		return failure{ReasonTLSError, fmt.Sprintf("TLS with %s failed: %s", host, detail), true}
	}
	if detail, ok := tlsDetail(err); ok {
		// An alert may end a connection at any time, not only its handshake.
		return failure{ReasonTLSError, fmt.Sprintf("TLS with %s failed: %s", host, detail), dial}
	}
	if IsConnectionDrop(err) {
		switch {
		case read == nil:
			return failure{ReasonConnectionDropped, "the server closed the connection during " + step, false}
		case read.n > 0:
			return failure{ReasonConnectionDropped, fmt.Sprintf("the server closed the connection mid-answer after %d bytes of %s", read.n, step), false}
		}
		return failure{ReasonConnectionDropped, "the server closed the connection before " + step, false}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		if dial {
			return failure{ReasonConnectionRefused, fmt.Sprintf("cannot connect to %s: %v", DialTarget(err, host), op.Err), true}
		}
		return failure{ReasonConnectionDropped, fmt.Sprintf("connection failed during %s: %v", step, op.Err), false}
	}
	return failure{ReasonConnectionDropped, fmt.Sprintf("%s failed: %v", step, InnerError(err)), false}
}

// lookupFailure says why a name did not resolve.
func lookupFailure(err *net.DNSError) string {
	switch {
	case err.IsNotFound:
		return "no such host"
	case err.IsTimeout:
		return "lookup timed out"
	}
	return err.Err
}

func hostOr(name, fallback string) string {
	if name != "" {
		return name
	}
	return fallback
}
