// Package tokenservice runs, for tests, a real OAuth 2.0 authorization server: it
// exchanges tokens (RFC 8693), issues client-credentials tokens, and serves the
// authorization code flow with PKCE to users who sign in at its login page, with
// rotating refresh tokens and revocation. The protocol is github.com/zitadel/oidc's op
// package (served through op.RegisterLegacyServer, which authenticates clients with
// client_secret_basic and private_key_jwt, and with "none" for public clients); this
// package supplies its storage (which clients and users exist, which issuers' tokens
// may be exchanged, what an issued token says), a login page, Client ID Metadata
// Document resolution and dynamic client registration. It counts what it issued so
// that tests can assert, for example, one exchange per caller per token lifetime.
//
// An issued access token is a JWT signed by the service's key (Keys, JWKSURL): iss is
// URL(), exp the configured TokenLifetime (expires_in is rounded down to the second),
// jti its id, client_id the client, and:
//   - for an exchange: sub the subject token's sub, aud the requested audience (the op
//     package does not turn resource into aud; the resource received is recorded in
//     LastRequest), and act = {"sub": actor token's sub} when an actor token came;
//   - for the code flow and its refreshes: sub the user's name, aud the RFC 8707
//     resource parameters of the authorization request (else the client's Audience,
//     else the client_id; plus the client_id when "openid" was asked for, since the op
//     package gives the ID token the same aud), and scope the granted scopes,
//     space-delimited.
//
// # The authorization code flow
//
// Endpoints: AuthorizationEndpoint (/authorize), TokenEndpoint (/oauth/token),
// RevocationEndpoint (/oauth/revoke, RFC 7009), RegistrationEndpoint (/register, RFC
// 7591), JWKSURL (/keys), and the metadata at MetadataURL
// (/.well-known/oauth-authorization-server, RFC 8414; the same document at
// /.well-known/openid-configuration), which also says
// "client_id_metadata_document_supported": true.
//
// The rules: every authorization request carries a PKCE code_challenge with method
// S256 (otherwise the browser is redirected back with error=invalid_request), and
// every code exchange its code_verifier, confidential clients included; a refused
// verifier spends the code; a code used twice revokes what it issued. A request without
// a scope gets "offline_access", and every login gets a refresh token. An ID token is
// returned only when "openid" was asked for. Each refresh rotates the refresh token: a
// spent one is refused (RefreshRefused, RefreshReuses), and with
// Options.RevokeOnRefreshReuse revokes the whole family. Revoking a refresh token
// revokes its family and the access tokens issued from it; revoking an access token
// marks its jti (AccessTokenRevoked, which whoami.Options.Revoked takes, since a JWT is
// otherwise checked offline until exp). A token of another client is not revoked;
// an unknown one is answered 200.
//
// The clients that may log users in:
//   - registered ones with Client.RedirectURIs: confidential (Client.Secret, basic
//     auth) or public (Client.Public: client_id and PKCE alone);
//   - Client ID Metadata Document clients: a client_id that is an https URL (or http on
//     loopback) is fetched at each lookup with Options.HTTPClient (SetHTTPClient),
//     must be JSON whose client_id equals the URL, list redirect_uris, and ask for
//     token_endpoint_auth_method "none" (or none at all); such a client is public;
//   - clients registered at the registration endpoint (JSON with redirect_uris and
//     token_endpoint_auth_method "none" or "client_secret_basic", which gets a
//     client_secret); the answer is 201 with client_id (and client_secret).
//
// The redirect_uri of a request must be one of the client's exactly (http allowed, for
// tests); an unknown client or redirect_uri gets an error page, never a redirect.
//
// The login page (/login) is an HTML form (fields id, username, password, POST) that
// signs in Options.Users (AddUser); a user's name is the sub of their tokens. A wrong
// password shows the page again with 401 (LoginFailures). Tests drive it as a browser
// would with Authorize (stops at the redirect to the client's redirect_uri and returns
// that URL, with code and state) or Login (opens that redirect_uri too and returns its
// response); BrowserClient makes a client that keeps cookies and trusts the service's
// and other test CAs' certificates.
package tokenservice

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// DefaultTokenLifetime is how long an issued token lives unless Options say otherwise.
const DefaultTokenLifetime = 5 * time.Minute

// Options configure a token service.
type Options struct {
	// Trusted are the issuers whose tokens may be exchanged (subject and actor tokens).
	Trusted []*TrustedIssuer
	// Clients are the registered clients.
	Clients []Client
	// TokenLifetime is the lifetime of issued access tokens, of every grant
	// (DefaultTokenLifetime when 0). Short lifetimes (seconds) work: exp is not
	// rounded up (expires_in is rounded down).
	TokenLifetime time.Duration
	// TLS serves HTTPS with a test certificate (see CAFile); otherwise plain HTTP on
	// loopback, which the policy allows.
	TLS bool
	// RequireAudience refuses an exchange without an audience parameter.
	RequireAudience bool
	// KeepNoTokens does not keep the issued tokens and codes (IssuedTokens,
	// IssuedRefreshTokens and IssuedCodes are empty), so that a memory benchmark in the
	// same process measures its subject alone.
	KeepNoTokens bool

	// Users are the users the login page accepts: name → password. A user's name is
	// the sub of the tokens issued for them.
	Users map[string]string
	// RefreshTokenLifetime bounds a refresh token family from its last rotation (0:
	// refresh tokens do not expire).
	RefreshTokenLifetime time.Duration
	// RevokeOnRefreshReuse revokes a refresh token family when one of its spent refresh
	// tokens is presented again (OAuth 2.1 reuse detection); by default the spent token
	// alone is refused.
	RevokeOnRefreshReuse bool
	// HTTPClient fetches Client ID Metadata Documents: give it the roots that trust the
	// documents' server (a client with a 10 s timeout and the system roots when nil).
	HTTPClient *http.Client
}

// Request is what the service saw in an issued token's request.
type Request struct {
	// GrantType is oidc.GrantTypeTokenExchange, oidc.GrantTypeClientCredentials,
	// oidc.GrantTypeCode or oidc.GrantTypeRefreshToken.
	GrantType oidc.GrantType
	ClientID  string
	// Subject is the issued token's sub: the subject token's sub, the client (client
	// credentials), or the user who signed in (code and refresh).
	Subject string
	// Actor is the actor token's sub, "" without one.
	Actor string
	// Resource are the RFC 8707 resource indicators (of the exchange, or of the
	// authorization request for code and refresh).
	Resource []string
	Audience []string
	Scopes   []string
}

// Server is a running token service.
type Server struct {
	srv             *httptest.Server
	issuer          string
	trusted         []*TrustedIssuer
	requireAudience bool
	keepNoTokens    bool
	store           *storage

	mu           sync.Mutex
	clients      map[string]Client
	tokenTTL     time.Duration
	bySubject    map[string]int
	total        int
	clientGrants map[string]int
	last         Request
	issued       []string
	authFailures int
	refused      int

	users          map[string]string
	refreshTTL     time.Duration
	revokeOnReuse  bool
	httpClient     *http.Client
	authRequests   map[string]*authRequest
	codes          map[string]string // code → auth request id
	spentCodes     map[string]string // code → grant id
	grants         map[string]*grant
	refreshTokens  map[string]string // current refresh token → grant id
	spentRefresh   map[string]string // rotated refresh token → grant id
	accessTokens   map[string]accessToken
	revokedAccess  map[string]bool
	issuedRefresh  []string
	issuedCodes    []string
	grantCounts    map[oidc.GrantType]int
	codesIssued    int
	codeReuses     int
	pkceFailures   int
	loginFailures  int
	refreshRefused int
	refreshReuses  int
	revocations    int
	registrations  int

	documentFetches  map[string]int
	documentsRefused int
}

// Start runs a token service until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// New runs a token service until Close (the demo runs one outside a test).
func New(o Options) (*Server, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	s := &Server{
		trusted:         o.Trusted,
		requireAudience: o.RequireAudience,
		keepNoTokens:    o.KeepNoTokens,
		clients:         map[string]Client{},
		tokenTTL:        o.TokenLifetime,
		bySubject:       map[string]int{},
		clientGrants:    map[string]int{},
		users:           map[string]string{},
		refreshTTL:      o.RefreshTokenLifetime,
		revokeOnReuse:   o.RevokeOnRefreshReuse,
		httpClient:      o.HTTPClient,
		authRequests:    map[string]*authRequest{},
		codes:           map[string]string{},
		spentCodes:      map[string]string{},
		grants:          map[string]*grant{},
		refreshTokens:   map[string]string{},
		spentRefresh:    map[string]string{},
		accessTokens:    map[string]accessToken{},
		revokedAccess:   map[string]bool{},
		grantCounts:     map[oidc.GrantType]int{},
		documentFetches: map[string]int{},
	}
	for name, password := range o.Users {
		s.users[name] = password
	}
	if s.tokenTTL <= 0 {
		s.tokenTTL = DefaultTokenLifetime
	}
	for _, c := range o.Clients {
		s.clients[c.ID] = c
	}
	s.store = &storage{s: s, key: key, kid: "tokenservice-1"}

	s.srv = httptest.NewUnstartedServer(nil)
	scheme := "http"
	if o.TLS {
		scheme = "https"
	}
	// The issuer must be known before the provider is made, and the listener before
	// the server starts: both come from the listener httptest already opened.
	s.issuer = scheme + "://" + s.srv.Listener.Addr().String()
	handler, err := s.handler(o.TLS)
	if err != nil {
		return nil, err
	}
	s.srv.Config.Handler = s.recordIssued(handler)
	if o.TLS {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	return s, nil
}

// Close stops the service.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) handler(tls bool) (http.Handler, error) {
	config := &op.Config{AuthMethodPrivateKeyJWT: true, CodeMethodS256: true, GrantTypeRefreshToken: true}
	if _, err := rand.Read(config.CryptoKey[:]); err != nil {
		return nil, err
	}
	var opts []op.Option
	if !tls {
		opts = append(opts, op.WithAllowInsecure())
	}
	provider, err := op.NewProvider(config, s.store, op.StaticIssuer(s.issuer), opts...)
	if err != nil {
		return nil, err
	}
	endpoints := op.Endpoints{
		Authorization: op.NewEndpoint(authorizePath),
		Token:         op.NewEndpoint(tokenPath),
		Revocation:    op.NewEndpoint(revocationPath),
		JwksURI:       op.NewEndpoint(keysPath),
	}
	server := &opServer{LegacyServer: op.NewLegacyServer(provider, endpoints), s: s}
	protocol := op.RegisterLegacyServer(server, op.AuthorizeCallbackHandler(provider))
	mux := http.NewServeMux()
	mux.HandleFunc(loginPath, s.login)
	mux.HandleFunc(registerPath, s.register)
	mux.Handle("/", defaultScope(rfc8414Path(protocol)))
	return mux, nil
}

// rfc8414Path serves the metadata at RFC 8414's well-known path too, where OAuth
// clients (MCP's among them) look first; the op package serves OpenID's.
func rfc8414Path(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == oidc.AuthorizationServerMetadataEndpoint {
			r = r.Clone(r.Context())
			r.URL.Path = oidc.DiscoveryEndpoint
		}
		next.ServeHTTP(w, r)
	})
}

// defaultScope gives an authorization request without a scope the default scope
// offline_access (RFC 6749 section 3.3 lets the server choose one): the op package
// refuses a request without a scope, and MCP clients often send none.
func defaultScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == authorizePath && r.Method == http.MethodGet && r.URL.Query().Get("scope") == "" {
			r = r.Clone(r.Context())
			q := r.URL.Query()
			q.Set("scope", oidc.ScopeOfflineAccess)
			r.URL.RawQuery = q.Encode()
		}
		next.ServeHTTP(w, r)
	})
}

const (
	tokenPath = "/oauth/token"
	keysPath  = "/keys"
)

// URL is the service's issuer URL (the "iss" of its tokens).
func (s *Server) URL() string { return s.issuer }

// TokenEndpoint is the URL of the token endpoint.
func (s *Server) TokenEndpoint() string { return s.issuer + tokenPath }

// JWKSURL is the URL of the service's public keys.
func (s *Server) JWKSURL() string { return s.issuer + keysPath }

// Keys are the public keys that verify the service's tokens.
func (s *Server) Keys() jose.JSONWebKeySet {
	return jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: &s.store.key.PublicKey, KeyID: s.store.kid, Algorithm: string(jose.RS256), Use: "sig",
	}}}
}

// Addr is the host:port the service listens on (for pinned-address tests).
func (s *Server) Addr() *net.TCPAddr {
	addr, _ := s.srv.Listener.Addr().(*net.TCPAddr)
	return addr
}

// HTTPClient is a client that trusts the service's certificate.
func (s *Server) HTTPClient() *http.Client { return s.srv.Client() }

// CAPEM is the service's TLS certificate as PEM (nil without TLS).
func (s *Server) CAPEM() []byte {
	cert := s.srv.Certificate()
	if cert == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// CAFile writes CAPEM to a file in the test's temporary directory and returns its path.
func (s *Server) CAFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokenservice-ca.pem")
	if err := os.WriteFile(path, s.CAPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// SetClient registers or replaces a client: a new Secret takes effect for the next
// request (secret rotation).
func (s *Server) SetClient(c Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[c.ID] = c
}

// SetTokenLifetime changes the lifetime of tokens issued from now on.
func (s *Server) SetTokenLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenTTL = d
}

// Exchanges is the number of tokens issued by exchange for the subject (the subject
// token's sub).
func (s *Server) Exchanges(subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bySubject[subject]
}

// TotalExchanges is the number of tokens issued by exchange.
func (s *Server) TotalExchanges() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// ClientCredentialsGrants is the number of tokens issued to the client by the client
// credentials grant.
func (s *Server) ClientCredentialsGrants(clientID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clientGrants[clientID]
}

// LastRequest is the request of the last issued token.
func (s *Server) LastRequest() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.last
	r.Resource, r.Audience, r.Scopes = slices.Clone(r.Resource), slices.Clone(r.Audience), slices.Clone(r.Scopes)
	return r
}

// IssuedTokens are the access tokens issued so far, in order: for tests that check
// that no token shows in status, logs or metrics.
func (s *Server) IssuedTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// ClientAuthFailures counts client authentications refused (wrong secret, unknown
// client or key).
func (s *Server) ClientAuthFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authFailures
}

// RefusedTokens counts subject and actor tokens refused (untrusted issuer, bad
// signature, expired, wrong audience).
func (s *Server) RefusedTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func (s *Server) countAuthFailure() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authFailures++
}

func (s *Server) countRefusedToken() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused++
}

// recordLocked counts a token about to be issued.
func (s *Server) recordLocked(req op.TokenRequest) {
	r := Request{Subject: req.GetSubject(), Audience: slices.Clone(req.GetAudience()), Scopes: slices.Clone(req.GetScopes())}
	switch req := req.(type) {
	case op.TokenExchangeRequest:
		r.GrantType, r.ClientID = oidc.GrantTypeTokenExchange, req.GetClientID()
		r.Actor, r.Resource = req.GetExchangeActor(), slices.Clone(req.GetResourses())
		s.bySubject[r.Subject]++
		s.total++
	case *clientCredentialsRequest:
		r.GrantType, r.ClientID = oidc.GrantTypeClientCredentials, req.clientID
		s.clientGrants[req.clientID]++
	case *authRequest:
		r.GrantType, r.ClientID, r.Resource = oidc.GrantTypeCode, req.clientID, slices.Clone(req.resources)
	case *refreshRequest:
		r.GrantType, r.ClientID, r.Resource = oidc.GrantTypeRefreshToken, req.clientID, slices.Clone(req.resources)
	}
	s.grantCounts[r.GrantType]++
	s.last = r
}

// recordIssued keeps the access tokens the token endpoint answers with.
func (s *Server) recordIssued(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != tokenPath {
			next.ServeHTTP(w, r)
			return
		}
		rec := &capture{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		if rec.status != http.StatusOK {
			return
		}
		var answer struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		}
		if !s.keepNoTokens && json.Unmarshal(rec.body.Bytes(), &answer) == nil && answer.AccessToken != "" {
			s.mu.Lock()
			s.issued = append(s.issued, answer.AccessToken)
			if answer.RefreshToken != "" {
				s.issuedRefresh = append(s.issuedRefresh, answer.RefreshToken)
			}
			s.mu.Unlock()
		}
	})
}

type capture struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *capture) WriteHeader(status int) {
	c.status = status
	c.ResponseWriter.WriteHeader(status)
}

func (c *capture) Write(p []byte) (int, error) {
	c.body.Write(p)
	return c.ResponseWriter.Write(p)
}
