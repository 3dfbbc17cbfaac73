package mcpclient

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestInterrupted(t *testing.T) {
	t.Parallel()
	live := context.Background()
	if _, ok := Interrupted(live, io.EOF); ok {
		t.Error("io.EOF with a live context counts as interrupted")
	}
	if what, ok := Interrupted(live, fmt.Errorf("read: %w", os.ErrDeadlineExceeded)); !ok || what != "timed out" {
		t.Errorf("a deadline: %q, %v", what, ok)
	}
	cancelled, cancel := context.WithCancel(live)
	cancel()
	if what, ok := Interrupted(cancelled, io.EOF); !ok || what != "cancelled" {
		t.Errorf("a cancelled context: %q, %v", what, ok)
	}
}

func TestNetErrors(t *testing.T) {
	t.Parallel()
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	dial := &url.Error{Op: "Post", URL: "http://h/mcp?key=secret", Err: &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: syscall.ECONNREFUSED}}
	if !IsDialError(dial) || DialTarget(dial, "h") != "127.0.0.1:1" {
		t.Errorf("a dial error: IsDialError %v, DialTarget %q", IsDialError(dial), DialTarget(dial, "h"))
	}
	if IsDialError(io.EOF) || DialTarget(io.EOF, "h:80") != "h:80" {
		t.Error("io.EOF taken for a dial error")
	}
	if inner := InnerError(dial); !errors.Is(inner, dial.Err) {
		t.Errorf("InnerError = %v", inner)
	}
	if !errors.Is(InnerError(io.EOF), io.EOF) {
		t.Error("InnerError changed an error without a *url.Error")
	}
	for _, err := range []error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET, fmt.Errorf("write: %w", syscall.EPIPE), syscall.ECONNABORTED} {
		if !IsConnectionDrop(err) {
			t.Errorf("IsConnectionDrop(%v) = false", err)
		}
	}
	if IsConnectionDrop(syscall.ECONNREFUSED) {
		t.Error("a refused connection counts as dropped")
	}
}

func TestTLSDetails(t *testing.T) {
	t.Parallel()
	if d, ok := CertificateDetail(&url.Error{Op: "Get", URL: "https://h", Err: x509.UnknownAuthorityError{}}); !ok ||
		d != "the server's certificate is signed by an unknown authority (set the CA bundle)" {
		t.Errorf("an unknown authority: %q, %v", d, ok)
	}
	if _, ok := CertificateDetail(io.EOF); ok {
		t.Error("io.EOF described as a certificate failure")
	}
	if d, ok := PlainHTTPDetail(errors.New("http: server gave HTTP response to HTTPS client")); !ok || d != "the server answered in plain HTTP (use an http:// URL?)" {
		t.Errorf("plain HTTP: %q, %v", d, ok)
	}
	if _, ok := PlainHTTPDetail(io.EOF); ok {
		t.Error("io.EOF described as a plain HTTP answer")
	}
}

// TestDescribeFailure: each kind of transport failure gets its reason, its words and,
// above all, the right notSent, which decides whether the gateway may send a call again.
func TestDescribeFailure(t *testing.T) {
	t.Parallel()
	server, _ := url.Parse("http://remote.example:8080/mcp")
	dialOp := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 8080}, Err: err}
	}
	readOp := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ETIMEDOUT}
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	const step = "the answer to POST /mcp"
	cases := []struct {
		name    string
		ctx     context.Context
		err     error
		reason  string
		detail  string
		notSent bool
	}{
		{"timeout connecting", expired, dialOp(os.ErrDeadlineExceeded), ReasonTimeout, "cancelled connecting to remote.example:8080", true},
		{"timeout mid-answer", expired, &readError{err: os.ErrDeadlineExceeded, n: 40}, ReasonTimeout, "cancelled after 40 bytes of " + step, false},
		{"timeout waiting", expired, os.ErrDeadlineExceeded, ReasonTimeout, "cancelled waiting for " + step, false},
		{"answer too large", context.Background(), ErrTooLarge, ReasonResponseTooLarge, step + " is larger than 1024 bytes", false},
		{"headers too large", context.Background(), errHeadersTooLarge, ReasonResponseTooLarge, "the headers of " + step + " are larger than 65536 bytes", false},
		{"no such host", context.Background(), dialOp(&net.DNSError{Name: "remote.example", IsNotFound: true}), ReasonDNSError, "cannot resolve remote.example: no such host", true},
		{"refused", context.Background(), dialOp(syscall.ECONNREFUSED), ReasonConnectionRefused, "connection refused by 10.0.0.7:8080", true},
		{"no route", context.Background(), dialOp(syscall.EHOSTUNREACH), ReasonConnectionRefused, "10.0.0.7:8080 is unreachable (no route)", true},
		{"unknown CA", context.Background(), x509.UnknownAuthorityError{}, ReasonTLSError, "TLS with remote.example:8080 failed: the server's certificate is signed by an unknown authority", true},
		{"plain HTTP", context.Background(), errors.New("http: server gave HTTP response to HTTPS client"), ReasonTLSError, "answered in plain HTTP", true},
		{"dropped, unknown when", context.Background(), io.ErrUnexpectedEOF, ReasonConnectionDropped, "the server closed the connection during " + step, false},
		{"dropped before", context.Background(), &readError{err: io.EOF}, ReasonConnectionDropped, "the server closed the connection before " + step, false},
		{"dropped mid-answer", context.Background(), &readError{err: syscall.ECONNRESET, n: 12}, ReasonConnectionDropped, "mid-answer after 12 bytes of " + step, false},
		{"cannot connect", context.Background(), dialOp(syscall.EACCES), ReasonConnectionRefused, "cannot connect to 10.0.0.7:8080: permission denied", true},
		{"read failed", context.Background(), readOp, ReasonConnectionDropped, "connection failed during " + step, false},
		{"anything else", context.Background(), errors.New("malformed HTTP response"), ReasonConnectionDropped, step + " failed: malformed HTTP response", false},
	}
	for _, tc := range cases {
		f := describeFailure(tc.ctx, tc.err, step, server, 1024)
		if f.reason != tc.reason || !strings.Contains(f.detail, tc.detail) || f.notSent != tc.notSent {
			t.Errorf("%s: %s %q notSent=%v; want %s, a detail with %q, notSent=%v", tc.name, f.reason, f.detail, f.notSent, tc.reason, tc.detail, tc.notSent)
		}
	}
}
