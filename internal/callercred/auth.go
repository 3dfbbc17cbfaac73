package callercred

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/client"
	httphelper "github.com/zitadel/oidc/v3/pkg/http"
)

// assertionLifetime is how long a private_key_jwt assertion is valid: one request's
// worth, so that a leaked one is soon useless.
const assertionLifetime = time.Minute

// clientAuth authenticates the exchanger at the token endpoint. Its files are read at
// every exchange (a miss, so rarely), so that a rotated Secret applies to the next
// exchange without a restart; a private key is parsed again only when its file changed.
type clientAuth struct {
	clientID   string
	secretFile string
	keyFile    string
	// audience of private_key_jwt assertions: the issuer, or the token endpoint.
	audience string

	mu     sync.Mutex
	keyRaw []byte
	signer jose.Signer
}

// authorization returns what zitadel's client adds to the token request: a Basic
// header (client_secret_basic) or the assertion form fields (private_key_jwt).
func (a *clientAuth) authorization() (any, error) {
	if a.secretFile != "" {
		secret, err := readTrimmed(a.secretFile, "client secret")
		if err != nil {
			return nil, err
		}
		return httphelper.AuthorizeBasic(a.clientID, secret), nil
	}
	signer, err := a.currentSigner()
	if err != nil {
		return nil, err
	}
	assertion, err := client.SignedJWTProfileAssertion(a.clientID, []string{a.audience}, assertionLifetime, signer)
	if err != nil {
		return nil, fmt.Errorf("sign the client assertion: %w", err)
	}
	return client.ClientAssertionFormAuthorization(assertion), nil
}

func (a *clientAuth) currentSigner() (jose.Signer, error) {
	raw, err := os.ReadFile(a.keyFile)
	if err != nil {
		return nil, fmt.Errorf("read the client's private key file: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.signer != nil && bytes.Equal(raw, a.keyRaw) {
		return a.signer, nil
	}
	signer, err := signerFromKeyFile(raw)
	if err != nil {
		return nil, fmt.Errorf("the client's private key file %s: %w", a.keyFile, err)
	}
	a.keyRaw, a.signer = raw, signer
	return signer, nil
}

// readTrimmed reads a one-value file (a mounted Secret key), refusing an empty one.
func readTrimmed(path, what string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the %s file: %w", what, err)
	}
	value := strings.TrimSpace(string(data))
	if value == "" {
		return "", fmt.Errorf("the %s file %s is empty", what, path)
	}
	return value, nil
}

// signerFromKeyFile makes a signer from a PEM private key (PKCS #1, PKCS #8 or SEC 1)
// or a private JWK. A PEM key's "kid" is its RFC 7638 thumbprint, which the
// authorization server can compute from the public key it registered.
func signerFromKeyFile(raw []byte) (jose.Signer, error) {
	if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && trimmed[0] == '{' {
		var jwk jose.JSONWebKey
		if err := json.Unmarshal(trimmed, &jwk); err != nil {
			return nil, fmt.Errorf("not a JWK: %w", err)
		}
		if jwk.IsPublic() {
			return nil, errors.New("the JWK is a public key; a private key is needed")
		}
		return newSigner(jwk.Key, jwk.KeyID, jose.SignatureAlgorithm(jwk.Algorithm))
	}
	key, err := parsePEMPrivateKey(raw)
	if err != nil {
		return nil, err
	}
	return newSigner(key, "", "")
}

func parsePEMPrivateKey(raw []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("not a PKCS #1, PKCS #8 or SEC 1 private key")
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key type %T", k)
	}
	return signer, nil
}

func newSigner(key any, kid string, alg jose.SignatureAlgorithm) (jose.Signer, error) {
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key type %T", key)
	}
	if alg == "" {
		var err error
		if alg, err = algorithmFor(s); err != nil {
			return nil, err
		}
	}
	if kid == "" {
		sum, err := (&jose.JSONWebKey{Key: s.Public()}).Thumbprint(crypto.SHA256)
		if err != nil {
			return nil, fmt.Errorf("key thumbprint: %w", err)
		}
		kid = base64.RawURLEncoding.EncodeToString(sum)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: s, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("signer: %w", err)
	}
	return signer, nil
}

func algorithmFor(s crypto.Signer) (jose.SignatureAlgorithm, error) {
	switch k := s.(type) {
	case *rsa.PrivateKey:
		return jose.RS256, nil
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return jose.ES256, nil
		case elliptic.P384():
			return jose.ES384, nil
		case elliptic.P521():
			return jose.ES512, nil
		}
		return "", errors.New("unsupported elliptic curve")
	case ed25519.PrivateKey:
		return jose.EdDSA, nil
	default:
		return "", fmt.Errorf("unsupported private key type %T", s)
	}
}
