package tokenservice

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// codeLifetime is how long an authorization code (and the auth request behind it)
// may wait for its exchange.
const codeLifetime = 10 * time.Minute

// authRequest is one authorization request, from /authorize until its code is
// exchanged. The storage hands out copies, so that the op package reads a snapshot
// while the login page changes the stored one.
type authRequest struct {
	id           string
	clientID     string
	redirectURI  string
	state        string
	nonce        string
	scopes       []string
	responseType oidc.ResponseType
	responseMode oidc.ResponseMode
	challenge    *oidc.CodeChallenge
	// resources are the request's RFC 8707 resource indicators; audience is what the
	// tokens' "aud" will be (the resources, else the client's Audience).
	resources []string
	audience  []string
	created   time.Time

	// Set by the login page.
	subject  string
	authTime time.Time
	done     bool

	// Set when the code is issued and when it is exchanged.
	code    string
	grantID string
}

var _ op.AuthRequest = (*authRequest)(nil)

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return a.audience }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

func (a *authRequest) snapshot() *authRequest {
	c := *a
	c.scopes, c.resources, c.audience = slices.Clone(a.scopes), slices.Clone(a.resources), slices.Clone(a.audience)
	return &c
}

// grant is what a user's login gave a client: the refresh token family that the code
// exchange starts and every refresh continues. Revoking it ends the family and the
// access tokens issued from it.
type grant struct {
	id        string
	clientID  string
	subject   string
	scopes    []string
	resources []string
	audience  []string
	authTime  time.Time
	// refreshToken is the family's one valid refresh token: each refresh replaces it.
	refreshToken  string
	refreshExpiry time.Time
	revoked       bool
}

// refreshRequest is a refresh_token grant's request, as the op package sees it.
type refreshRequest struct {
	grantID   string
	clientID  string
	subject   string
	scopes    []string
	resources []string
	audience  []string
	authTime  time.Time
}

var _ op.RefreshTokenRequest = (*refreshRequest)(nil)

func (r *refreshRequest) GetAMR() []string                 { return []string{"pwd"} }
func (r *refreshRequest) GetAudience() []string            { return r.audience }
func (r *refreshRequest) GetAuthTime() time.Time           { return r.authTime }
func (r *refreshRequest) GetClientID() string              { return r.clientID }
func (r *refreshRequest) GetScopes() []string              { return r.scopes }
func (r *refreshRequest) GetSubject() string               { return r.subject }
func (r *refreshRequest) SetCurrentScopes(scopes []string) { r.scopes = scopes }

// accessToken is what the service remembers of an issued access token (by its jti):
// to whom it went and from which grant ("" for exchange and client credentials).
type accessToken struct {
	clientID string
	grantID  string
}

type resourcesKey struct{}

// withResources carries the authorization request's resource parameters to
// CreateAuthRequest, which the op package calls without the HTTP request.
func withResources(ctx context.Context, resources []string) context.Context {
	return context.WithValue(ctx, resourcesKey{}, resources)
}

func resourcesFrom(ctx context.Context) []string {
	r, _ := ctx.Value(resourcesKey{}).([]string)
	return r
}

// ---- authorization requests and codes ----

func (st *storage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	c, err := st.lookupClient(ctx, req.ClientID)
	if err != nil {
		return nil, err
	}
	resources := resourcesFrom(ctx)
	audience := slices.Clone(resources)
	if len(audience) == 0 {
		audience = slices.Clone(c.Audience)
	}
	scopes := slices.Clone([]string(req.Scopes))
	// Every login gets a refresh token: the op package issues one only when the
	// request holds offline_access, and MCP clients rarely ask for it.
	if !slices.Contains(scopes, oidc.ScopeOfflineAccess) {
		scopes = append(scopes, oidc.ScopeOfflineAccess)
	}
	// The op package gives the ID token the access token's audience; an ID token's
	// must hold the client.
	if slices.Contains(scopes, oidc.ScopeOpenID) && len(audience) > 0 && !slices.Contains(audience, req.ClientID) {
		audience = append(audience, req.ClientID)
	}
	a := &authRequest{
		id:           randomID(),
		clientID:     req.ClientID,
		redirectURI:  req.RedirectURI,
		state:        req.State,
		nonce:        req.Nonce,
		scopes:       scopes,
		responseType: req.ResponseType,
		responseMode: req.ResponseMode,
		challenge:    &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: req.CodeChallengeMethod},
		resources:    resources,
		audience:     audience,
		created:      time.Now(),
	}
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	st.s.authRequests[a.id] = a
	return a.snapshot(), nil
}

func (st *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	a, ok := st.s.authRequests[id]
	if !ok || time.Since(a.created) > codeLifetime {
		return nil, fmt.Errorf("auth request %q is unknown or expired", id)
	}
	return a.snapshot(), nil
}

// AuthRequestByCode finds a code's request. A code used a second time revokes what
// its first use issued (OAuth 2.1 section 4.1.3).
func (st *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	if gid, spent := st.s.spentCodes[code]; spent {
		st.s.codeReuses++
		st.s.revokeGrantLocked(gid)
		return nil, fmt.Errorf("code used twice: what it issued is revoked")
	}
	a, ok := st.s.authRequests[st.s.codes[code]]
	if !ok || time.Since(a.created) > codeLifetime {
		return nil, fmt.Errorf("code unknown or expired")
	}
	return a.snapshot(), nil
}

func (st *storage) SaveAuthCode(_ context.Context, id, code string) error {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	a, ok := st.s.authRequests[id]
	if !ok {
		return fmt.Errorf("auth request %q is unknown", id)
	}
	a.code = code
	st.s.codes[code] = id
	st.s.codesIssued++
	if !st.s.keepNoTokens {
		st.s.issuedCodes = append(st.s.issuedCodes, code)
	}
	return nil
}

// DeleteAuthRequest ends a request once its code is exchanged (or refused): the code
// is spent.
func (st *storage) DeleteAuthRequest(_ context.Context, id string) error {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	a, ok := st.s.authRequests[id]
	if !ok {
		return nil
	}
	if a.code != "" {
		delete(st.s.codes, a.code)
		st.s.spentCodes[a.code] = a.grantID
	}
	delete(st.s.authRequests, id)
	return nil
}

// completeLogin marks the request as signed in by subject.
func (s *Server) completeLogin(id, subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.authRequests[id]
	if !ok || a.done || time.Since(a.created) > codeLifetime {
		return fmt.Errorf("auth request %q is unknown, expired or already signed in", id)
	}
	a.subject, a.authTime, a.done = subject, time.Now(), true
	return nil
}

// ---- refresh tokens ----

// CreateAccessAndRefreshTokens starts a refresh token family at the code exchange and
// rotates it at each refresh: the refresh token used is spent.
func (st *storage) CreateAccessAndRefreshTokens(_ context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var g *grant
	switch r := req.(type) {
	case *authRequest:
		g = &grant{
			id: randomID(), clientID: r.clientID, subject: r.subject,
			scopes: slices.Clone(r.scopes), resources: slices.Clone(r.resources), audience: slices.Clone(r.audience),
			authTime: r.authTime,
		}
		s.grants[g.id] = g
		if stored, ok := s.authRequests[r.id]; ok {
			stored.grantID = g.id
		}
	case *refreshRequest:
		g = s.grants[r.grantID]
		if g == nil || g.revoked || g.refreshToken != current {
			s.refreshRefused++
			return "", "", time.Time{}, oidc.ErrInvalidGrant().WithDescription("refresh token already used or revoked")
		}
		delete(s.refreshTokens, current)
		s.spentRefresh[current] = g.id
	default:
		return "", "", time.Time{}, oidc.ErrInvalidRequest().WithDescription("the test token service issues refresh tokens to logged-in users only")
	}
	g.refreshToken = "rt-" + randomID()
	if s.refreshTTL > 0 {
		g.refreshExpiry = time.Now().Add(s.refreshTTL)
	}
	s.refreshTokens[g.refreshToken] = g.id
	jti := randomID()
	s.accessTokens[jti] = accessToken{clientID: g.clientID, grantID: g.id}
	s.recordLocked(req)
	return jti, g.refreshToken, time.Now().Add(s.tokenTTL), nil
}

// TokenRequestByRefreshToken accepts the family's current refresh token only. A spent
// one is refused and counted; with Options.RevokeOnRefreshReuse it also revokes the
// family (OAuth 2.1 section 4.3.1's reuse detection).
func (st *storage) TokenRequestByRefreshToken(_ context.Context, token string) (op.RefreshTokenRequest, error) {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	gid, ok := s.refreshTokens[token]
	if !ok {
		if spent, reused := s.spentRefresh[token]; reused {
			s.refreshReuses++
			if s.revokeOnReuse {
				s.revokeGrantLocked(spent)
			}
		}
		s.refreshRefused++
		return nil, op.ErrInvalidRefreshToken
	}
	g := s.grants[gid]
	if g.revoked || (!g.refreshExpiry.IsZero() && time.Now().After(g.refreshExpiry)) {
		s.refreshRefused++
		return nil, op.ErrInvalidRefreshToken
	}
	return &refreshRequest{
		grantID: g.id, clientID: g.clientID, subject: g.subject,
		scopes: slices.Clone(g.scopes), resources: slices.Clone(g.resources), audience: slices.Clone(g.audience),
		authTime: g.authTime,
	}, nil
}

// GetRefreshTokenInfo names a current refresh token for revocation; the token is its
// own id.
func (st *storage) GetRefreshTokenInfo(_ context.Context, _ string, token string) (string, string, error) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	gid, ok := st.s.refreshTokens[token]
	if !ok {
		return "", "", op.ErrInvalidRefreshToken
	}
	return st.s.grants[gid].subject, token, nil
}

// RevokeToken revokes a refresh token (its whole family, with the access tokens issued
// from it) or an access token (by its jti). A token the service does not know is
// answered with success, as RFC 7009 section 2.2 says; one of another client is refused.
func (st *storage) RevokeToken(_ context.Context, tokenOrID, _ string, clientID string) *oidc.Error {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if gid, ok := s.refreshTokens[tokenOrID]; ok {
		if s.grants[gid].clientID != clientID {
			return oidc.ErrUnauthorizedClient().WithDescription("the token was issued to another client")
		}
		s.revokeGrantLocked(gid)
		s.revocations++
		return nil
	}
	if at, ok := s.accessTokens[tokenOrID]; ok {
		if at.clientID != "" && at.clientID != clientID {
			return oidc.ErrUnauthorizedClient().WithDescription("the token was issued to another client")
		}
		if !s.revokedAccess[tokenOrID] {
			s.revokedAccess[tokenOrID] = true
			s.revocations++
		}
	}
	return nil
}

// revokeGrantLocked ends a refresh token family and its access tokens.
func (s *Server) revokeGrantLocked(gid string) {
	g, ok := s.grants[gid]
	if !ok || g.revoked {
		return
	}
	g.revoked = true
	delete(s.refreshTokens, g.refreshToken)
	for jti, at := range s.accessTokens {
		if at.grantID == gid {
			s.revokedAccess[jti] = true
		}
	}
}

// GetPrivateClaimsFromRequest adds the granted scopes to the access token ("scope",
// space-delimited), which the op package leaves out.
func (st *storage) GetPrivateClaimsFromRequest(_ context.Context, req op.TokenRequest, _ []string) (map[string]any, error) {
	if len(req.GetScopes()) == 0 {
		return nil, nil
	}
	return map[string]any{"scope": strings.Join(req.GetScopes(), " ")}, nil
}

// SetUserinfoFromRequest names the user in the ID token: the op package takes its sub
// from the userinfo, which is otherwise empty.
func (st *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, _ []string) error {
	info.Subject = req.GetSubject()
	return nil
}
