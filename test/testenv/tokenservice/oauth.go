package tokenservice

import (
	"net/http"
	"slices"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// AuthorizationEndpoint is the URL of the authorization endpoint (RFC 6749 section 3.1).
func (s *Server) AuthorizationEndpoint() string { return s.issuer + authorizePath }

// RevocationEndpoint is the URL of the revocation endpoint (RFC 7009).
func (s *Server) RevocationEndpoint() string { return s.issuer + revocationPath }

// RegistrationEndpoint is the URL of the dynamic client registration endpoint
// (RFC 7591).
func (s *Server) RegistrationEndpoint() string { return s.issuer + registerPath }

// MetadataURL is the URL of the authorization server metadata (RFC 8414); the same
// document is at /.well-known/openid-configuration.
func (s *Server) MetadataURL() string { return s.issuer + oidc.AuthorizationServerMetadataEndpoint }

// AddUser lets a user sign in at the login page, or changes their password.
func (s *Server) AddUser(name, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[name] = password
}

// SetHTTPClient changes the client that fetches Client ID Metadata Documents
// (Options.HTTPClient), for a document server started after the service.
func (s *Server) SetHTTPClient(c *http.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.httpClient = c
}

// AccessTokenRevoked says whether the access token with this jti was revoked, alone or
// with its refresh token family: give it to whoami.Options.Revoked, since a JWT stays
// valid where it is checked offline.
func (s *Server) AccessTokenRevoked(jti string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revokedAccess[jti]
}

// Grants is the number of access tokens issued by the grant type
// (oidc.GrantTypeCode, oidc.GrantTypeRefreshToken, oidc.GrantTypeTokenExchange,
// oidc.GrantTypeClientCredentials).
func (s *Server) Grants(grantType oidc.GrantType) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grantCounts[grantType]
}

// CodesIssued is the number of authorization codes issued (one per completed login).
func (s *Server) CodesIssued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.codesIssued
}

// CodeReuses counts authorization codes presented again after their exchange (which
// revokes what they issued).
func (s *Server) CodeReuses() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.codeReuses
}

// PKCEFailures counts code exchanges refused for a missing or wrong code_verifier.
func (s *Server) PKCEFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pkceFailures
}

// LoginFailures counts logins refused for a wrong user or password.
func (s *Server) LoginFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loginFailures
}

// RefreshRefused counts refresh tokens refused: spent (rotated), revoked, expired or
// unknown.
func (s *Server) RefreshRefused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshRefused
}

// RefreshReuses counts spent refresh tokens presented again.
func (s *Server) RefreshReuses() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshReuses
}

// Revocations counts the tokens revoked through the revocation endpoint (a refresh
// token counts once, with its family).
func (s *Server) Revocations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revocations
}

// Registrations counts clients registered through the registration endpoint.
func (s *Server) Registrations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registrations
}

// MetadataDocumentFetches is the number of times the client's metadata document was
// fetched (it is fetched at each lookup of the client: authorize, login, token).
func (s *Server) MetadataDocumentFetches(clientID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.documentFetches[clientID]
}

// MetadataDocumentsRefused counts metadata documents refused (unreachable, not JSON,
// client_id not the URL, no redirect URI, an auth method other than none).
func (s *Server) MetadataDocumentsRefused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.documentsRefused
}

// IssuedRefreshTokens are the refresh tokens issued so far, in order (with
// IssuedTokens, what a test greps status, events, logs and metrics for).
func (s *Server) IssuedRefreshTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issuedRefresh)
}

func (s *Server) countPKCEFailure() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pkceFailures++
}

func (s *Server) countLoginFailure() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loginFailures++
}

// IssuedCodes are the authorization codes issued so far, in order: a code is a
// credential until it is exchanged, and shows in callback URLs.
func (s *Server) IssuedCodes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issuedCodes)
}
