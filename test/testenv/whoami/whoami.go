// Package whoami runs, for tests, a remote MCP server (mcp-go, streamable HTTP) that
// checks the credential of every HTTP request it gets and answers, to the tool
// "whoami", the subject it saw: "remote saw subject=<sub> act=<actor sub or ->". A
// credential is either a JWT from the token service (signature, issuer, audience and
// expiry checked, with no leeway) or one of a static set of API keys, each standing for
// a subject. A request without a valid one gets 401 with
// `WWW-Authenticate: Bearer error="invalid_token"`.
//
// With Options.AuthorizationServers, the remote is an OAuth protected resource (RFC
// 9728): it serves its metadata at /.well-known/oauth-protected-resource/mcp (and at
// /.well-known/oauth-protected-resource), naming URL() as its resource and the
// authorization servers, and every 401 carries
// `WWW-Authenticate: Bearer resource_metadata="<ResourceMetadataURL()>"` (with
// error="invalid_token" when a credential was sent, none when it was missing). It then
// accepts tokens whose aud is its resource URL, as an authorization server issues them
// for the RFC 8707 resource parameter, besides Audience.
package whoami

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ToolName is the tool the server serves.
const ToolName = "whoami"

// Options configure the remote.
type Options struct {
	// Issuer is the "iss" accepted tokens carry (the token service's URL); Keys verify
	// them. Without Keys, no JWT is accepted.
	Issuer string
	Keys   jose.JSONWebKeySet
	// Audience is the "aud" a token must hold (required when Keys are set, unless
	// AuthorizationServers are: then a token for the resource URL is accepted too).
	Audience string
	// AuthorizationServers, when set, make the remote an RFC 9728 protected resource
	// that names them (the token service's URL()) in its metadata and 401s.
	AuthorizationServers []string
	// Scopes are the scopes_supported of the protected resource metadata.
	Scopes []string
	// Revoked, when set, refuses a token whose jti it reports (give it
	// tokenservice.Server.AccessTokenRevoked): a JWT is otherwise valid until exp.
	Revoked func(jti string) bool
	// APIKeys maps a static API key to the subject it stands for.
	APIKeys map[string]string
	// APIKeyHeader carries an API key (default "Authorization"), after APIKeyPrefix
	// (default "Bearer " for Authorization, none otherwise).
	APIKeyHeader string
	APIKeyPrefix string
	// Stateless serves without sessions; by default the server keeps sessions and
	// refuses unknown session IDs.
	Stateless bool
	// TLS serves HTTPS with a test certificate.
	TLS bool
	// Now is the clock tokens' expiry is read on (time.Now when nil).
	Now func() time.Time
	// KeepNoCredentials does not keep the credentials sent (Credentials is empty), so
	// that a memory benchmark in the same process measures its subject alone.
	KeepNoCredentials bool
}

// Identity is who a request's credential says sent it.
type Identity struct {
	Subject string
	// Actor is the token's act.sub, "" without one.
	Actor string
}

func (i Identity) answer() string {
	actor := i.Actor
	if actor == "" {
		actor = "-"
	}
	return fmt.Sprintf("remote saw subject=%s act=%s", i.Subject, actor)
}

// Server is a running remote.
type Server struct {
	o   Options
	srv *httptest.Server

	mu          sync.Mutex
	requests    map[string]int
	calls       map[string]int
	credentials []string
	rejected    int
}

// Start runs the remote until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// New runs the remote until Close (the demo runs one outside a test).
func New(o Options) (*Server, error) {
	if len(o.Keys.Keys) > 0 && o.Audience == "" && len(o.AuthorizationServers) == 0 {
		return nil, errors.New("whoami: an Audience is required to accept tokens")
	}
	if o.APIKeyHeader == "" {
		o.APIKeyHeader = "Authorization"
		if o.APIKeyPrefix == "" {
			o.APIKeyPrefix = "Bearer "
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, requests: map[string]int{}, calls: map[string]int{}}

	mcpServer := server.NewMCPServer("whoami", "1.0.0", server.WithToolCapabilities(false))
	mcpServer.AddTool(mcp.NewTool(ToolName, mcp.WithDescription("Says which subject (and actor) the remote saw.")), s.whoami)
	httpOpts := []server.StreamableHTTPOption{server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		if id, ok := identityFrom(r.Context()); ok {
			return context.WithValue(ctx, identityKey{}, id)
		}
		return ctx
	})}
	if !o.Stateless {
		httpOpts = append(httpOpts, server.WithStateful(true))
	}
	mux := http.NewServeMux()
	mux.Handle(mcpPath, s.authenticate(server.NewStreamableHTTPServer(mcpServer, httpOpts...)))
	if len(o.AuthorizationServers) > 0 {
		mux.HandleFunc(resourceMetadataPath, s.resourceMetadata)
		mux.HandleFunc(resourceMetadataPath+mcpPath, s.resourceMetadata)
	}
	s.srv = httptest.NewUnstartedServer(mux)
	if o.TLS {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	return s, nil
}

// Close stops the remote.
func (s *Server) Close() {
	// Open streams would keep Close waiting (testkit.CloseAtEnd says why).
	s.srv.CloseClientConnections()
	s.srv.Close()
}

const (
	mcpPath              = "/mcp"
	resourceMetadataPath = "/.well-known/oauth-protected-resource"
)

// URL is the MCP endpoint, and the resource's identifier (RFC 9728 "resource").
func (s *Server) URL() string { return s.srv.URL + mcpPath }

// ResourceMetadataURL is where the protected resource metadata is served (the path
// form of RFC 9728 section 3.1, for the MCP endpoint's path), "" without
// Options.AuthorizationServers.
func (s *Server) ResourceMetadataURL() string {
	if len(s.o.AuthorizationServers) == 0 {
		return ""
	}
	return s.srv.URL + resourceMetadataPath + mcpPath
}

// resourceMetadata serves the protected resource metadata (RFC 9728 section 2).
func (s *Server) resourceMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"resource":                 s.URL(),
		"authorization_servers":    s.o.AuthorizationServers,
		"bearer_methods_supported": []string{"header"},
		"scopes_supported":         s.o.Scopes,
		"resource_name":            "whoami",
	})
}

// HTTPClient trusts the server's certificate.
func (s *Server) HTTPClient() *http.Client { return s.srv.Client() }

// CAPEM is the server's TLS certificate as PEM (nil without TLS), for a client's CA
// file.
func (s *Server) CAPEM() []byte {
	cert := s.srv.Certificate()
	if cert == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// Requests is the number of authenticated HTTP requests of the subject.
func (s *Server) Requests(subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[subject]
}

// Calls is the number of whoami calls of the subject.
func (s *Server) Calls(subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[subject]
}

// Credentials are the credentials of every request, in order, as sent (the
// Authorization header's token without "Bearer ", or the API key header's value),
// valid or not; "" for a request without one.
func (s *Server) Credentials() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.credentials)
}

// Rejected counts requests answered 401.
func (s *Server) Rejected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected
}

type identityKey struct{}

func identityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

func (s *Server) whoami(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, ok := identityFrom(ctx)
	if !ok {
		return mcp.NewToolResultError("whoami: the request carried no identity"), nil
	}
	s.mu.Lock()
	s.calls[id.Subject]++
	s.mu.Unlock()
	return mcp.NewToolResultText(id.answer()), nil
}

// authenticate checks every request's credential before mcp-go sees it.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, id, err := s.identify(r)
		s.mu.Lock()
		if !s.o.KeepNoCredentials {
			s.credentials = append(s.credentials, cred)
		}
		if err != nil {
			s.rejected++
		} else {
			s.requests[id.Subject]++
		}
		s.mu.Unlock()
		if err != nil {
			w.Header().Set("WWW-Authenticate", s.challenge(cred, err))
			http.Error(w, "invalid_token: "+err.Error(), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

// challenge is a 401's WWW-Authenticate (RFC 6750 section 3): as a protected resource,
// it names the resource metadata, and an error only when a credential was sent.
func (s *Server) challenge(cred string, err error) string {
	invalid := fmt.Sprintf(`error="invalid_token", error_description=%q`, err.Error())
	metadata := s.ResourceMetadataURL()
	switch {
	case metadata == "":
		return "Bearer " + invalid
	case cred == "":
		return fmt.Sprintf(`Bearer resource_metadata=%q`, metadata)
	default:
		return fmt.Sprintf(`Bearer %s, resource_metadata=%q`, invalid, metadata)
	}
}

// identify returns the request's credential and whom it stands for.
func (s *Server) identify(r *http.Request) (string, Identity, error) {
	if key, ok := s.apiKey(r); ok {
		if sub, known := s.o.APIKeys[key]; known {
			return key, Identity{Subject: sub}, nil
		}
	}
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || token == "" {
		if key, has := s.apiKey(r); has {
			return key, Identity{}, errors.New("unknown API key")
		}
		return "", Identity{}, errors.New("no bearer token")
	}
	id, err := s.verify(token)
	return token, id, err
}

func (s *Server) apiKey(r *http.Request) (string, bool) {
	if len(s.o.APIKeys) == 0 {
		return "", false
	}
	v := r.Header.Get(s.o.APIKeyHeader)
	if v == "" {
		return "", false
	}
	key, ok := strings.CutPrefix(v, s.o.APIKeyPrefix)
	return key, ok && key != ""
}

var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256}

// audiences are the "aud" values a token may hold: Audience, and the resource URL for
// a protected resource.
func (s *Server) audiences() jwt.Audience {
	var aud jwt.Audience
	if s.o.Audience != "" {
		aud = append(aud, s.o.Audience)
	}
	if len(s.o.AuthorizationServers) > 0 {
		aud = append(aud, s.URL())
	}
	return aud
}

// verify checks a token of the token service: signature, issuer, audience, expiry.
func (s *Server) verify(raw string) (Identity, error) {
	if len(s.o.Keys.Keys) == 0 {
		return Identity{}, errors.New("tokens are not accepted here")
	}
	tok, err := jwt.ParseSigned(raw, algorithms)
	if err != nil {
		return Identity{}, errors.New("not a signed JWT")
	}
	var std jwt.Claims
	var extra struct {
		Act *struct {
			Sub string `json:"sub"`
		} `json:"act"`
	}
	verified := false
	for _, k := range s.o.Keys.Keys {
		if tok.Claims(k.Key, &std, &extra) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Identity{}, errors.New("signature does not verify")
	}
	expected := jwt.Expected{Issuer: s.o.Issuer, AnyAudience: s.audiences(), Time: s.o.Now()}
	if err := std.ValidateWithLeeway(expected, 0); err != nil {
		return Identity{}, fmt.Errorf("token refused: %w", err)
	}
	if s.o.Revoked != nil && s.o.Revoked(std.ID) {
		return Identity{}, errors.New("token refused: revoked")
	}
	if std.Subject == "" {
		return Identity{}, errors.New("token has no subject")
	}
	id := Identity{Subject: std.Subject}
	if extra.Act != nil {
		id.Actor = extra.Act.Sub
	}
	return id, nil
}
