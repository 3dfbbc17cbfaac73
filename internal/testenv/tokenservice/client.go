package tokenservice

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Client is an OAuth client registered at the token service.
type Client struct {
	ID string
	// Secret, when set, authenticates the client with client_secret_basic.
	Secret string
	// PublicKey, when set, authenticates the client with private_key_jwt: the
	// assertion's signature must verify with it. KeyID is the "kid" the assertion
	// names; it defaults to the key's RFC 7638 thumbprint (SHA-256, base64url).
	PublicKey crypto.PublicKey
	KeyID     string
	// ProbeAudience is the "aud" of the tokens the client_credentials grant issues to
	// this client (that grant takes no audience parameter here).
	ProbeAudience []string
}

func (c Client) keyID() string {
	if c.KeyID != "" || c.PublicKey == nil {
		return c.KeyID
	}
	return Thumbprint(c.PublicKey)
}

// Thumbprint is the RFC 7638 SHA-256 thumbprint of a public key, base64url without
// padding: the "kid" a private_key_jwt assertion names by default.
func Thumbprint(pub crypto.PublicKey) string {
	sum, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(sum)
}

// opClient is a registered client as the op package sees it: a confidential service
// client that may exchange tokens and use client credentials, and never logs a user in.
type opClient struct {
	c Client
}

var _ op.Client = opClient{}

func (o opClient) GetID() string                    { return o.c.ID }
func (o opClient) RedirectURIs() []string           { return nil }
func (o opClient) PostLogoutRedirectURIs() []string { return nil }
func (o opClient) ApplicationType() op.ApplicationType {
	return op.ApplicationTypeWeb
}

func (o opClient) AuthMethod() oidc.AuthMethod {
	if o.c.PublicKey != nil {
		return oidc.AuthMethodPrivateKeyJWT
	}
	return oidc.AuthMethodBasic
}

func (o opClient) ResponseTypes() []oidc.ResponseType { return nil }
func (o opClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeTokenExchange, oidc.GrantTypeClientCredentials}
}
func (o opClient) LoginURL(string) string               { return "" }
func (o opClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (o opClient) IDTokenLifetime() time.Duration       { return time.Hour }
func (o opClient) DevMode() bool                        { return false }
func (o opClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (o opClient) ClockSkew() time.Duration             { return 0 }
func (o opClient) IsScopeAllowed(string) bool           { return true }
func (o opClient) RestrictAdditionalIdTokenScopes() func([]string) []string { //nolint:revive // the op.Client interface names it so
	return func(s []string) []string { return s }
}

func (o opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// NewKeyClient makes a private_key_jwt client with a fresh P-256 key: the Client to
// register (Options.Clients or SetClient) and the private key as PEM (SEC 1), for the
// exchanger's PrivateKeyFile.
func NewKeyClient(t testing.TB, id string) (Client, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Client{ID: id, PublicKey: &key.PublicKey}, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}
