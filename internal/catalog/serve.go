package catalog

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Runnable serves the catalog over HTTPS inside the manager, on every replica (it only
// reads). With CertDir it serves tls.crt/tls.key from there and follows their rotation;
// without, a self-signed certificate made at start.
type Runnable struct {
	Addr    string
	CertDir string
	Handler http.Handler
	Log     logr.Logger
	// SelfSigned, when set and CertDir is empty, keeps the self-signed certificate in a
	// Secret, so that every replica serves the same one and gateways can trust it.
	SelfSigned *SelfSignedSecret
	// Hosts are names the self-signed certificate is valid for besides localhost.
	Hosts []string

	ca       atomic.Pointer[[]byte]
	prepared *tls.Config
}

// Prepare makes (or reads) the self-signed certificate before the listener starts, so
// that CA has it from the first reconcile on. Nothing to do with CertDir.
func (r *Runnable) Prepare(ctx context.Context) error {
	if r.CertDir != "" {
		return nil
	}
	cfg, err := r.tlsConfig(ctx)
	if err != nil {
		return err
	}
	r.prepared = cfg
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (r *Runnable) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (r *Runnable) Start(ctx context.Context) error {
	tlsConfig := r.prepared
	if tlsConfig == nil {
		var err error
		if tlsConfig, err = r.tlsConfig(ctx); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", r.Addr)
	if err != nil {
		return fmt.Errorf("catalog: listen on %s: %w", r.Addr, err)
	}
	srv := &http.Server{Handler: r.Handler, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second}
	go func() { //nolint:gosec // G118: shutdown begins when ctx has ended, so it needs a context of its own
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	r.Log.Info("serving the discovery catalog", "address", ln.Addr().String())
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("catalog: %w", err)
	}
	return nil
}

func (r *Runnable) tlsConfig(ctx context.Context) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if r.CertDir == "" {
		cert, err := r.selfSignedCertificate(ctx)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
		return cfg, nil
	}
	watcher, err := certwatcher.New(filepath.Join(r.CertDir, "tls.crt"), filepath.Join(r.CertDir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("catalog: load certificate from %s: %w", r.CertDir, err)
	}
	go func() {
		if err := watcher.Start(ctx); err != nil {
			r.Log.Error(err, "catalog certificate watcher stopped")
		}
	}()
	cfg.GetCertificate = watcher.GetCertificate
	return cfg, nil
}

func selfSigned(hosts ...string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("catalog: generate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "cantus-catalog"},
		DNSNames:     append([]string{"localhost", "cantus-catalog"}, hosts...),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("catalog: self-sign: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
