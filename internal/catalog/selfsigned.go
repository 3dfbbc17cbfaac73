package catalog

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// SelfSignedSecret is where the catalog keeps its self-signed certificate (tls.crt,
// tls.key), created by the first replica that starts and read by the others.
type SelfSignedSecret struct {
	Client    client.Client
	Namespace string
	Name      string
}

// CA is the PEM certificate bundle gateways trust the catalog's listener with: the
// self-signed certificate, or the certificate folder's ca.crt, else its tls.crt.
// Nil before the listener has started (self-signed) or when none can be read.
func (r *Runnable) CA() []byte {
	if r.CertDir != "" {
		for _, name := range []string{"ca.crt", "tls.crt"} {
			if data, err := os.ReadFile(filepath.Join(r.CertDir, name)); err == nil {
				return data
			}
		}
		return nil
	}
	if ca := r.ca.Load(); ca != nil {
		return *ca
	}
	return nil
}

// selfSignedCertificate makes the self-signed certificate, or reads the one another
// replica made.
func (r *Runnable) selfSignedCertificate(ctx context.Context) (tls.Certificate, error) {
	if r.SelfSigned == nil {
		cert, err := selfSigned(r.Hosts...)
		if err != nil {
			return tls.Certificate{}, err
		}
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
		r.ca.Store(&certPEM)
		return cert, nil
	}
	s := r.SelfSigned
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	for attempt := 0; attempt < 3; attempt++ {
		secret := &corev1.Secret{}
		err := s.Client.Get(ctx, key, secret)
		if err == nil {
			cert, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("catalog: the certificate in Secret %s: %w", key, err)
			}
			certPEM := secret.Data[corev1.TLSCertKey]
			r.ca.Store(&certPEM)
			return cert, nil
		}
		if !apierrors.IsNotFound(err) {
			return tls.Certificate{}, fmt.Errorf("catalog: read Secret %s: %w", key, err)
		}
		cert, err := selfSigned(r.Hosts...)
		if err != nil {
			return tls.Certificate{}, err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("catalog: encode key: %w", err)
		}
		secret = &corev1.Secret{
			// The operator's admission policy lets it write only objects it labels its own.
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: map[string]string{workload.LabelManagedBy: workload.FieldOwner}},
			Type:       corev1.SecretTypeTLS,
			Data: map[string][]byte{
				corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
				corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
			},
		}
		if err := s.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return tls.Certificate{}, fmt.Errorf("catalog: keep the self-signed certificate in Secret %s: %w", key, err)
		}
	}
	return tls.Certificate{}, fmt.Errorf("catalog: could not read or create Secret %s", key)
}
