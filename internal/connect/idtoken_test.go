package connect

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// idTokenIssuer signs ID tokens with a key whose public half it serves as a JWKS.
type idTokenIssuer struct {
	url    string
	signer jose.Signer
	http   *http.Client
}

func startIDTokenIssuer(t *testing.T) *idTokenIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk := jose.JSONWebKey{Key: key, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jwk}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk.Public()}})
	}))
	t.Cleanup(srv.Close)
	return &idTokenIssuer{url: srv.URL, signer: signer, http: srv.Client()}
}

func (i *idTokenIssuer) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	raw, err := jwt.Signed(i.signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// The ID token of a connect's sign-in is checked (signature, iss, aud, exp, nonce) and
// must name the OIDC caller's subject; each check refuses a token that fails only it.
func TestCallerCredentials_ConnectIDTokenChecks(t *testing.T) {
	iss := startIDTokenIssuer(t)
	other := startIDTokenIssuer(t)
	check := idTokenCheck{issuer: iss.url, clientID: "cantus-connect", nonce: "nonce-1", subject: "alice", jwksURL: iss.url + "/keys", http: iss.http}
	now := time.Now()
	valid := func() map[string]any {
		return map[string]any{"iss": iss.url, "sub": "alice", "aud": []string{"https://remote.example/mcp", "cantus-connect"}, "azp": "cantus-connect",
			"nonce": "nonce-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	}
	with := func(key string, value any) map[string]any {
		c := valid()
		c[key] = value
		return c
	}
	if err := verifyIDToken(context.Background(), iss.sign(t, valid()), check); err != nil {
		t.Fatalf("a valid ID token of the caller's subject: %v", err)
	}
	for _, tc := range []struct {
		name, raw, reason string
	}{
		{"wrong nonce", iss.sign(t, with("nonce", "nonce-2")), "nonce"},
		{"no nonce", iss.sign(t, with("nonce", "")), "nonce"},
		{"wrong aud", iss.sign(t, with("aud", []string{"another-client"})), "audience"},
		{"wrong iss", iss.sign(t, with("iss", "https://other.example")), "issuer"},
		{"wrong sub", iss.sign(t, with("sub", "mallory")), "other_subject"},
		{"expired", iss.sign(t, with("exp", now.Add(-time.Minute).Unix())), "expired"},
		{"signed by another key", other.sign(t, valid()), "signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifyIDToken(context.Background(), tc.raw, check)
			if err == nil {
				t.Fatal("accepted")
			}
			if got := idTokenFailure(err); got != tc.reason {
				t.Fatalf("refused for %q (%v), want %q", got, err, tc.reason)
			}
		})
	}
	if err := verifyIDToken(context.Background(), "", check); err == nil {
		t.Fatal("no ID token at all was accepted")
	}
}
