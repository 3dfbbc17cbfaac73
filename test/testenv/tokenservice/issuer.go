package tokenservice

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TrustedIssuer is an issuer whose JWTs the token service accepts as subject_token and
// actor_token: the test's stand-in for the cluster's service-account issuer or an OIDC
// provider. One made by NewTrustedIssuer also mints such tokens.
type TrustedIssuer struct {
	// URL is the tokens' "iss".
	URL string
	// Keys verify the tokens' signatures (public keys only).
	Keys jose.JSONWebKeySet
	// Audiences, when set, are the only "aud" values accepted (any one of them).
	Audiences []string

	signer jose.Signer
}

// NewTrustedIssuer makes an issuer at url with a fresh RSA key, which mints tokens with
// ServiceAccountToken and Mint.
func NewTrustedIssuer(t testing.TB, url string) *TrustedIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	kid := "trusted-1"
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &TrustedIssuer{
		URL:    url,
		Keys:   jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: kid, Algorithm: string(jose.RS256), Use: "sig"}}},
		signer: signer,
	}
}

// JWKS is the issuer's public keys as a JWKS document, the form the adapter's config
// takes (adapterconfig.Issuer.JWKS).
func (i *TrustedIssuer) JWKS(t testing.TB) json.RawMessage {
	t.Helper()
	data, err := json.Marshal(i.Keys)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// ServiceAccountToken mints a token shaped like the one a Kubernetes TokenRequest
// returns for the service account namespace/name with the given UID, valid for an
// hour, for the audiences.
func (i *TrustedIssuer) ServiceAccountToken(t testing.TB, namespace, name, uid string, audiences ...string) string {
	t.Helper()
	return i.Mint(t, map[string]any{
		"sub": "system:serviceaccount:" + namespace + ":" + name,
		"aud": audiences,
		"kubernetes.io": map[string]any{
			"namespace":      namespace,
			"serviceaccount": map[string]any{"name": name, "uid": uid},
		},
	})
}

// Mint signs claims as the issuer. "iss" is always the issuer's URL; "iat" defaults
// to now and "exp" to an hour from now.
func (i *TrustedIssuer) Mint(t testing.TB, claims map[string]any) string {
	t.Helper()
	if i.signer == nil {
		t.Fatal("this TrustedIssuer has no signing key: make it with NewTrustedIssuer")
	}
	now := time.Now()
	std := jwt.Claims{Issuer: i.URL, IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	extra := map[string]any{}
	for k, v := range claims {
		if k != "iss" {
			extra[k] = v
		}
	}
	raw, err := jwt.Signed(i.signer).Claims(std).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

var signatureAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.PS256, jose.EdDSA}

// verifiedToken is what a trusted token says, once checked.
type verifiedToken struct {
	subject string
	claims  map[string]any
}

// verify checks a JWT from one of the issuers: signature, "iss", "exp"/"nbf" (no
// leeway, so that short-lived tokens expire when the test says) and "aud".
func verify(issuers []*TrustedIssuer, raw string, now time.Time) (*verifiedToken, error) {
	tok, err := jwt.ParseSigned(raw, signatureAlgorithms)
	if err != nil {
		return nil, fmt.Errorf("not a signed JWT: %w", err)
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	idx := slices.IndexFunc(issuers, func(i *TrustedIssuer) bool { return i.URL == unverified.Issuer })
	if idx < 0 {
		return nil, fmt.Errorf("issuer %q is not trusted", unverified.Issuer)
	}
	iss := issuers[idx]
	var std jwt.Claims
	claims := map[string]any{}
	if err := verifyWithAnyKey(tok, iss.Keys, &std, &claims); err != nil {
		return nil, err
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: iss.URL, Time: now}, 0); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	if len(iss.Audiences) > 0 && !slices.ContainsFunc(iss.Audiences, std.Audience.Contains) {
		return nil, errors.New("token: audience not accepted")
	}
	if std.Subject == "" {
		return nil, errors.New("token: no subject")
	}
	return &verifiedToken{subject: std.Subject, claims: claims}, nil
}

func verifyWithAnyKey(tok *jwt.JSONWebToken, keys jose.JSONWebKeySet, out ...any) error {
	candidates := keys.Keys
	if len(tok.Headers) > 0 && tok.Headers[0].KeyID != "" {
		candidates = keys.Key(tok.Headers[0].KeyID)
	}
	for _, k := range candidates {
		if err := tok.Claims(k.Key, out...); err == nil {
			return nil
		}
	}
	return errors.New("token: signature does not verify with the issuer's keys")
}
