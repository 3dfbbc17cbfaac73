package mcpclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"
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

// ClipText keeps s to one line of at most max bytes, cut on a rune boundary.
func ClipText(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
