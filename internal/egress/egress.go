// Package egress holds what the operator's and the adapter's outbound clients share:
// dialling only the addresses a policy check accepted, and trusting only a given CA
// bundle. It imports the standard library only, so that every side may link it (the
// adapter links nothing of Kubernetes).
package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
)

// DialFirst connects with d to the first of addrs, tried in order, that answers at
// port. Its error joins every address's: a host with several checked addresses fails
// only when none of them answers.
func DialFirst(ctx context.Context, d *net.Dialer, network string, addrs []netip.Addr, port uint16) (net.Conn, error) {
	var errs []error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, port).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// ErrNoCertificate is the error for a CA bundle without a PEM certificate.
var ErrNoCertificate = errors.New("the CA bundle holds no PEM certificate")

// CertPool returns the pool of the certificates of bundle (PEM), to be a client's only
// trust; ErrNoCertificate when it holds none.
func CertPool(bundle []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, ErrNoCertificate
	}
	return pool, nil
}

// CertPoolFile is CertPool of the bundle in file. Its errors name the file.
func CertPoolFile(file string) (*x509.CertPool, error) {
	bundle, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool, err := CertPool(bundle)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return pool, nil
}
