package tokenservice

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage is the token service's op.Storage: it issues access tokens for the token
// exchange and client credentials grants (trusting the test's issuers for the
// exchanged tokens), and access and refresh tokens for the authorization code flow
// of the users the login page signs in (authcode.go). The op package speaks the
// protocol; this decides who may have what.
type storage struct {
	s   *Server
	key *rsa.PrivateKey
	kid string
}

var (
	_ op.Storage                            = (*storage)(nil)
	_ op.ClientCredentialsStorage           = (*storage)(nil)
	_ op.TokenExchangeStorage               = (*storage)(nil)
	_ op.TokenExchangeTokensVerifierStorage = (*storage)(nil)
	_ op.CanGetPrivateClaimsFromRequest     = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest          = (*storage)(nil)
)

var errNotServed = errors.New("the test token service serves no userinfo, introspection or logout")

// ---- clients ----

func (st *storage) client(id string) (Client, bool) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	c, ok := st.s.clients[id]
	return c, ok
}

// lookupClient finds a registered client or, for a client_id that is an https URL
// (http on loopback), fetches its Client ID Metadata Document (cimd.go).
func (st *storage) lookupClient(ctx context.Context, clientID string) (Client, error) {
	if c, ok := st.client(clientID); ok {
		return c, nil
	}
	if isMetadataDocumentURL(clientID) {
		return st.s.fetchMetadataDocument(ctx, clientID)
	}
	return Client{}, fmt.Errorf("client %q is not registered", clientID)
}

func (st *storage) GetClientByClientID(ctx context.Context, clientID string) (op.Client, error) {
	c, err := st.lookupClient(ctx, clientID)
	if err != nil {
		return nil, err
	}
	return opClient{c: c, loginURL: st.s.issuer + loginPath}, nil
}

func (st *storage) AuthorizeClientIDSecret(_ context.Context, clientID, clientSecret string) error {
	c, ok := st.client(clientID)
	if !ok || c.Secret == "" || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(clientSecret)) != 1 {
		st.s.countAuthFailure()
		return errors.New("client authentication failed")
	}
	return nil
}

func (st *storage) GetKeyByIDAndClientID(_ context.Context, keyID, clientID string) (*jose.JSONWebKey, error) {
	c, ok := st.client(clientID)
	if !ok || c.PublicKey == nil || (keyID != "" && keyID != c.keyID()) {
		st.s.countAuthFailure()
		return nil, fmt.Errorf("no key %q for client %q", keyID, clientID)
	}
	return &jose.JSONWebKey{Key: c.PublicKey, KeyID: c.keyID(), Use: "sig"}, nil
}

func (st *storage) ClientCredentials(ctx context.Context, clientID, clientSecret string) (op.Client, error) {
	if err := st.AuthorizeClientIDSecret(ctx, clientID, clientSecret); err != nil {
		return nil, err
	}
	return st.GetClientByClientID(ctx, clientID)
}

// clientCredentialsRequest is what the client_credentials grant issues a token for:
// the client itself.
type clientCredentialsRequest struct {
	clientID string
	audience []string
	scopes   []string
}

func (r *clientCredentialsRequest) GetSubject() string    { return r.clientID }
func (r *clientCredentialsRequest) GetAudience() []string { return r.audience }
func (r *clientCredentialsRequest) GetScopes() []string   { return r.scopes }

func (st *storage) ClientCredentialsTokenRequest(_ context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	c, ok := st.client(clientID)
	if !ok {
		return nil, fmt.Errorf("client %q is not registered", clientID)
	}
	return &clientCredentialsRequest{clientID: clientID, audience: slices.Clone(c.ProbeAudience), scopes: scopes}, nil
}

func (st *storage) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

// ---- token exchange ----

func (st *storage) VerifyExchangeSubjectToken(_ context.Context, token string, _ oidc.TokenType) (string, string, map[string]any, error) {
	v, err := verify(st.s.trusted, token, time.Now())
	if err != nil {
		st.s.countRefusedToken()
		return "", "", nil, err
	}
	return token, v.subject, v.claims, nil
}

func (st *storage) VerifyExchangeActorToken(ctx context.Context, token string, tokenType oidc.TokenType) (string, string, map[string]any, error) {
	return st.VerifyExchangeSubjectToken(ctx, token, tokenType)
}

// ValidateTokenExchangeRequest issues access tokens only: an absent requested_token_type
// means one (RFC 8693 lets the server choose).
func (st *storage) ValidateTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) error {
	if req.GetRequestedTokenType() == "" {
		req.SetRequestedTokenType(oidc.AccessTokenType)
	}
	if req.GetRequestedTokenType() != oidc.AccessTokenType {
		return oidc.ErrInvalidRequest().WithDescription("the test token service issues access tokens only")
	}
	if st.s.requireAudience && len(req.GetAudience()) == 0 {
		return oidc.ErrInvalidTarget().WithDescription("audience is required")
	}
	return nil
}

func (st *storage) CreateTokenExchangeRequest(context.Context, op.TokenExchangeRequest) error {
	return nil
}

// GetPrivateClaimsFromTokenExchangeRequest names the actor (RFC 8693 section 4.1) when
// an actor_token came with the request.
func (st *storage) GetPrivateClaimsFromTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) (map[string]any, error) {
	if req.GetExchangeActor() == "" {
		return nil, nil
	}
	return map[string]any{"act": map[string]any{"sub": req.GetExchangeActor()}}, nil
}

func (st *storage) SetUserinfoFromTokenExchangeRequest(context.Context, *oidc.UserInfo, op.TokenExchangeRequest) error {
	return nil
}

// ---- tokens ----

// CreateAccessToken issues an access token without a refresh token (exchange, client
// credentials); its id is the JWT's jti.
func (st *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	id := randomID()
	s.accessTokens[id] = accessToken{clientID: clientOf(req)}
	s.recordLocked(req)
	return id, time.Now().Add(s.tokenTTL), nil
}

func clientOf(req op.TokenRequest) string {
	switch r := req.(type) {
	case op.TokenExchangeRequest:
		return r.GetClientID()
	case *clientCredentialsRequest:
		return r.clientID
	}
	return ""
}

func (st *storage) TerminateSession(context.Context, string, string) error { return errNotServed }

// ---- keys ----

type signingKey struct {
	kid string
	key *rsa.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.kid }

type publicKey struct {
	kid string
	key *rsa.PublicKey
}

func (k publicKey) ID() string                         { return k.kid }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.key }

func (st *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{kid: st.kid, key: st.key}, nil
}

func (st *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (st *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{kid: st.kid, key: &st.key.PublicKey}}, nil
}

// ---- what the service does not do ----

func (st *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}
func (st *storage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errNotServed
}
func (st *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errNotServed
}
func (st *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}
func (st *storage) Health(context.Context) error { return nil }

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
