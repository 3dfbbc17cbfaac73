package access

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Authentication failures. Neither says anything about the token itself.
var (
	ErrNoToken      = errors.New("send Authorization: Bearer <token>")
	ErrInvalidToken = errors.New("the bearer token was not accepted")
)

// Settings are what authentication and authorization are built from.
type Settings struct {
	// BearerTokenFile holds shared tokens, one per line; re-read as it changes.
	BearerTokenFile string
	// BearerTokens are shared tokens given in memory; they replace BearerTokenFile.
	BearerTokens []string
	// Auth holds the JWT issuers and the authorization rules.
	Auth *adapterconfig.AuthConfig
}

// Enabled says whether the settings ask callers to authenticate at all.
func (s Settings) Enabled() bool {
	return s.BearerTokenFile != "" || len(s.BearerTokens) > 0 || s.Auth != nil
}

// Authenticator says who presents a request's token and what they may call. Update
// swaps its settings while requests are served.
type Authenticator struct {
	state atomic.Pointer[state]
}

type state struct {
	settings Settings
	static   *staticTokens
	issuers  []*issuer
	rules    *Rules
}

// New builds an Authenticator; invalid settings (no token in the file, an unusable key
// set, a rule that does not compile) are an error.
func New(s Settings) (*Authenticator, error) {
	a := &Authenticator{}
	if err := a.Update(s); err != nil {
		return nil, err
	}
	return a, nil
}

// Update replaces the settings. Issuers whose settings did not change are kept with
// the keys they discovered; on error the previous settings stay.
func (a *Authenticator) Update(s Settings) error {
	next, err := a.build(s)
	if err != nil {
		return err
	}
	a.state.Store(next)
	return nil
}

// Check says whether Update would accept the settings, changing nothing.
func (a *Authenticator) Check(s Settings) error {
	_, err := a.build(s)
	return err
}

// Enabled says whether callers must authenticate.
func (a *Authenticator) Enabled() bool {
	return a.state.Load().settings.Enabled()
}

func (a *Authenticator) build(s Settings) (*state, error) {
	next := &state{settings: s}
	var err error
	if s.BearerTokenFile != "" || len(s.BearerTokens) > 0 {
		path := s.BearerTokenFile
		if len(s.BearerTokens) > 0 {
			path = ""
		}
		if next.static, err = newStaticTokens(path, s.BearerTokens); err != nil {
			return nil, err
		}
	}
	if s.Auth != nil {
		if next.rules, err = CompileRules(s.Auth.Authorization); err != nil {
			return nil, err
		}
		if next.issuers, err = a.issuersFor(s.Auth.Issuers); err != nil {
			return nil, err
		}
	}
	return next, nil
}

// ValidateAuth checks what the operator renders before it is served: issuers and
// rules.
func ValidateAuth(auth *adapterconfig.AuthConfig) error {
	if auth == nil {
		return nil
	}
	for _, cfg := range auth.Issuers {
		if err := validIssuer(cfg); err != nil {
			return err
		}
	}
	if err := oidcAtServiceAccountURL(auth.Issuers); err != nil {
		return err
	}
	_, err := CompileRules(auth.Authorization)
	return err
}

// oidcAtServiceAccountURL refuses an OIDC issuer whose URL is a service-account
// issuer's: it would take the cluster's tokens past the service-account checks.
func oidcAtServiceAccountURL(configs []adapterconfig.Issuer) error {
	norm := func(u string) string { return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(u)), "/") }
	for _, sa := range configs {
		if sa.Kind != adapterconfig.IssuerServiceAccount {
			continue
		}
		for _, o := range configs {
			if o.Kind == adapterconfig.IssuerOIDC && norm(o.URL) == norm(sa.URL) {
				return fmt.Errorf("OIDC issuer %s is the service-account issuer: the cluster's tokens are accepted only as service-account tokens", o.URL)
			}
		}
	}
	return nil
}

func (a *Authenticator) issuersFor(configs []adapterconfig.Issuer) ([]*issuer, error) {
	var previous []*issuer
	if cur := a.state.Load(); cur != nil {
		previous = cur.issuers
	}
	if err := oidcAtServiceAccountURL(configs); err != nil {
		return nil, err
	}
	out := make([]*issuer, 0, len(configs))
	for _, cfg := range configs {
		if err := validIssuer(cfg); err != nil {
			return nil, err
		}
		if kept := findIssuer(previous, cfg); kept != nil {
			out = append(out, kept)
			continue
		}
		iss, err := newIssuer(cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, iss)
	}
	return out, nil
}

func findIssuer(issuers []*issuer, cfg adapterconfig.Issuer) *issuer {
	for _, i := range issuers {
		if i.sameConfig(cfg) {
			return i
		}
	}
	return nil
}

func validIssuer(cfg adapterconfig.Issuer) error {
	switch {
	case cfg.Kind != adapterconfig.IssuerServiceAccount && cfg.Kind != adapterconfig.IssuerOIDC:
		return fmt.Errorf("issuer kind %q: use %q or %q", cfg.Kind, adapterconfig.IssuerServiceAccount, adapterconfig.IssuerOIDC)
	case cfg.URL == "":
		return fmt.Errorf("%s issuer: the URL is empty", cfg.Kind)
	case len(cfg.Audiences) == 0:
		return fmt.Errorf("issuer %s: name at least one audience", cfg.URL)
	case cfg.Kind == adapterconfig.IssuerServiceAccount && len(cfg.JWKS) == 0:
		return fmt.Errorf("issuer %s: service-account tokens need the cluster's keys (jwks)", cfg.URL)
	}
	return nil
}

// Authenticate returns who presented the request's bearer token: a static token first,
// then the issuer the token names. Errors are ErrNoToken or wrap ErrInvalidToken.
func (a *Authenticator) Authenticate(r *http.Request) (*Caller, error) {
	st := a.state.Load()
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return nil, ErrNoToken
	}
	if st.static != nil && st.static.accepts(token) {
		return &Caller{Kind: KindBearer}, nil
	}
	iss, isJWT := unverifiedIssuer(token)
	if !isJWT {
		return nil, ErrInvalidToken
	}
	var errs []error
	for _, i := range st.issuers {
		if i.cfg.URL != iss {
			continue
		}
		caller, err := i.verify(r.Context(), token)
		if err == nil {
			return caller, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, ErrInvalidToken
	}
	return nil, fmt.Errorf("%w: %w", ErrInvalidToken, errors.Join(errs...))
}

// Allows says whether the caller may call the tool under the current rules.
func (a *Authenticator) Allows(c *Caller, tool string) bool {
	return a.state.Load().rules.Allows(c, tool)
}

// AllowsKind says whether the caller may use the prompt, resource or skill (or tool)
// under the current rules.
func (a *Authenticator) AllowsKind(c *Caller, kind ItemKind, name string) bool {
	return a.state.Load().rules.AllowsKind(c, kind, name)
}

// AllowsKindWithin is AllowsKind spending the CEL work from budget (nil: unbounded);
// once it is spent, rules with an expression do not allow.
func (a *Authenticator) AllowsKindWithin(c *Caller, kind ItemKind, name string, budget *Budget) bool {
	allowed, _ := a.state.Load().rules.AllowsKindWithin(c, kind, name, budget)
	return allowed
}

// HasRules says whether authorization rules restrict the tools callers see.
func (a *Authenticator) HasRules() bool {
	return a.state.Load().rules != nil
}

// AuthorizationServers are the OIDC issuers, which MCP clients that speak OAuth can get
// a token from (RFC 9728's authorization_servers).
func (a *Authenticator) AuthorizationServers() []string {
	var out []string
	for _, i := range a.state.Load().issuers {
		if i.cfg.Kind == adapterconfig.IssuerOIDC {
			out = append(out, i.cfg.URL)
		}
	}
	return out
}

// bearerToken extracts the token of a Bearer Authorization header; the scheme is
// case-insensitive (RFC 9110 §11.1).
func bearerToken(header string) (string, bool) {
	scheme, token, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
