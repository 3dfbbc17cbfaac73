package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// An address that refuses is passed over for the next; the error of a host none of
// whose addresses answers names each refusal.
func TestDialFirst_TriesTheNextAddressWhenOneRefuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	refusing := netip.MustParseAddr("127.0.0.2") // loopback, nothing listens at port
	listening := netip.MustParseAddr("127.0.0.1")

	conn, err := DialFirst(context.Background(), &net.Dialer{}, "tcp", []netip.Addr{refusing, listening}, port)
	if err != nil {
		t.Fatalf("dial with a listening address second: %v", err)
	}
	_ = conn.Close()

	_, err = DialFirst(context.Background(), &net.Dialer{}, "tcp", []netip.Addr{refusing, refusing}, port)
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 2 {
		t.Fatalf("dial with no listening address: %v, want both refusals joined", err)
	}
}

// A file without a certificate is refused with ErrNoCertificate and its name.
func TestCertPoolFile_RefusesAFileWithoutACertificate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := CertPoolFile(file)
	if !errors.Is(err, ErrNoCertificate) {
		t.Fatalf("got %v, want ErrNoCertificate", err)
	}
	if _, err := CertPoolFile(filepath.Join(t.TempDir(), "absent.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("absent file: got %v, want os.ErrNotExist", err)
	}
}
