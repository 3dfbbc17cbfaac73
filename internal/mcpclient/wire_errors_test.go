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

func TestClipText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{" two\nlines\t here ", 20, "two lines here"},
		{"abcdefghij", 4, "abcd…"},
		{"ééé", 3, "é…"}, // no cut inside a rune
	} {
		if got := ClipText(tc.in, tc.max); got != tc.want {
			t.Errorf("ClipText(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
