package tokenservice

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/url"
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

	// RedirectURIs, when set, let the client use the authorization code flow (with
	// PKCE S256, always) and the refresh_token grant; the redirect_uri of a request
	// must be one of them exactly. http is accepted on any host, for tests.
	RedirectURIs []string
	// Public makes the client a public one (token_endpoint_auth_method "none"): it
	// authenticates with nothing but its client_id and its PKCE verifier.
	Public bool
	// Audience is the "aud" of the code flow's tokens when the authorization request
	// names no resource (RFC 8707); without either, aud is the client_id.
	Audience []string
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

// opClient is a client as the op package sees it. A confidential client may exchange
// tokens and use client credentials; one with redirect URIs (any public one, and
// every Client ID Metadata Document client) logs users in through the login page.
type opClient struct {
	c Client
	// loginURL is the login page, which takes the auth request's id.
	loginURL string
}

var _ op.Client = opClient{}

func (o opClient) GetID() string                    { return o.c.ID }
func (o opClient) RedirectURIs() []string           { return o.c.RedirectURIs }
func (o opClient) PostLogoutRedirectURIs() []string { return nil }
func (o opClient) ApplicationType() op.ApplicationType {
	return op.ApplicationTypeWeb
}

func (o opClient) AuthMethod() oidc.AuthMethod {
	switch {
	case o.c.Public:
		return oidc.AuthMethodNone
	case o.c.PublicKey != nil:
		return oidc.AuthMethodPrivateKeyJWT
	default:
		return oidc.AuthMethodBasic
	}
}

func (o opClient) logsIn() bool { return len(o.c.RedirectURIs) > 0 }

func (o opClient) ResponseTypes() []oidc.ResponseType {
	if !o.logsIn() {
		return nil
	}
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}

func (o opClient) GrantTypes() []oidc.GrantType {
	var grants []oidc.GrantType
	if !o.c.Public {
		grants = append(grants, oidc.GrantTypeTokenExchange, oidc.GrantTypeClientCredentials)
	}
	if o.logsIn() {
		grants = append(grants, oidc.GrantTypeCode, oidc.GrantTypeRefreshToken)
	}
	return grants
}

func (o opClient) LoginURL(id string) string           { return o.loginURL + "?id=" + url.QueryEscape(id) }
func (o opClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (o opClient) IDTokenLifetime() time.Duration      { return time.Hour }

// DevMode lets a client use an http redirect URI (it must still be registered
// exactly): tests serve their callbacks on loopback without TLS.
func (o opClient) DevMode() bool                        { return true }
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
