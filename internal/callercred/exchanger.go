// Package callercred obtains, for each caller of a gateway, the caller's own
// credential for a remote: an RFC 8693 token exchange of the caller's verified inbound
// token at a configured token endpoint, cached per caller until shortly before the
// exchanged token expires. The caller's own token is never the answer (ErrPassThrough).
//
// The protocol is github.com/zitadel/oidc's client (pkg/client/tokenexchange); this
// package adds the cache, client authentication from mounted files (read again at each
// exchange, so a rotated Secret applies without a restart), a pinned dialer, and errors
// that never carry a token. It links nothing of Kubernetes: the adapter runs it.
package callercred

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zitadel/oidc/v3/pkg/client/tokenexchange"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

const (
	// DefaultMaxCacheTTL bounds the reuse of an exchanged token when the config sets no
	// bound.
	DefaultMaxCacheTTL = 15 * time.Minute
	// DefaultRefreshBefore is how long before its expiry an exchanged token stops being
	// used, so that it does not expire on its way to the remote.
	DefaultRefreshBefore = 30 * time.Second
	// DefaultTimeout bounds one exchange.
	DefaultTimeout = 10 * time.Second
)

// Options tune an Exchanger; the zero value is the production setting.
type Options struct {
	// Name labels the metrics (an import "namespace/name" or the remote's URL); never a
	// caller. Defaults to the config's Resource without its query.
	Name string
	// Cache, when set, is shared with other exchangers; otherwise the exchanger makes
	// its own of CacheSize entries (DefaultCacheSize when 0).
	Cache     *Cache
	CacheSize int
	// Metrics, when set, count lookups and exchanges (and the size of a cache the
	// exchanger makes).
	Metrics *Metrics
	// Now is the clock the cache's expiries are read on (time.Now when nil).
	Now func() time.Time
	// RefreshBefore is DefaultRefreshBefore when 0.
	RefreshBefore time.Duration
	// Timeout bounds one exchange (DefaultTimeout when 0).
	Timeout time.Duration
}

// withDefaults fills in what o leaves to its defaults.
func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.RefreshBefore <= 0 {
		o.RefreshBefore = DefaultRefreshBefore
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Stats are an exchanger's counts since it was made.
type Stats struct {
	Hits, Misses uint64
	// Exchanges succeeded; Failures did not (including refused answers).
	Exchanges, Failures uint64
}

// Exchanger exchanges callers' tokens at one token endpoint for one remote.
type Exchanger struct {
	endpoint   string
	host       string
	resource   string
	audience   string
	scopes     []string
	actorFile  string
	maxTTL     time.Duration
	refresh    time.Duration
	httpClient *http.Client
	auth       *clientAuth

	// lookup's scope is the token endpoint, client, audience, resource and scopes.
	lookup
	series *series

	exchanges, failures atomic.Uint64
}

// NewExchanger checks cfg and makes an exchanger for it.
func NewExchanger(cfg *adapterconfig.TokenExchange, o Options) (*Exchanger, error) {
	if cfg == nil {
		return nil, errors.New("no token exchange config")
	}
	u, err := checkEndpoint(cfg.TokenEndpoint)
	if err != nil {
		return nil, err
	}
	if err := checkClient(cfg); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	hc, err := httpClient(cfg.Addresses, cfg.CAFile, o.Timeout)
	if err != nil {
		return nil, err
	}
	e := &Exchanger{
		endpoint:   cfg.TokenEndpoint,
		host:       u.Host,
		resource:   cfg.Resource,
		audience:   cfg.Audience,
		scopes:     slices.Clone(cfg.Scopes),
		actorFile:  cfg.ActorTokenFile,
		maxTTL:     cfg.MaxCacheTTL.Duration,
		refresh:    o.RefreshBefore,
		httpClient: hc,
		auth: &clientAuth{
			clientID: cfg.ClientID, secretFile: cfg.ClientSecretFile, keyFile: cfg.PrivateKeyFile,
			audience: cmpOr(cfg.Issuer, cfg.TokenEndpoint),
		},
	}
	if e.maxTTL <= 0 {
		e.maxTTL = DefaultMaxCacheTTL
	}
	remote := cmpOr(o.Name, withoutQuery(cfg.Resource))
	scope := strings.Join([]string{cfg.TokenEndpoint, cfg.ClientID, cfg.Audience, cfg.Resource, strings.Join(cfg.Scopes, " ")}, "\x00")
	if err := e.initLookup(scope, remote, o); err != nil {
		return nil, err
	}
	e.series = o.Metrics.series(remote)
	return e, nil
}

func checkClient(cfg *adapterconfig.TokenExchange) error {
	switch {
	case cfg.Resource == "":
		return errors.New("token exchange: resource (the remote's canonical URL) is required")
	case cfg.ClientID == "":
		return errors.New("token exchange: clientID is required")
	case (cfg.ClientSecretFile == "") == (cfg.PrivateKeyFile == ""):
		return errors.New("token exchange: exactly one of clientSecretFile and privateKeyFile is required")
	}
	return nil
}

// withoutQuery names a URL in a metric label: a query may carry a key.
func withoutQuery(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "unparsable-resource"
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Token returns the caller's token for the remote: the cached one while it is fresh,
// otherwise a new exchange of subjectToken (the caller's verified inbound token).
// Concurrent misses of one caller make one exchange. callerIdentity is the caller's
// adapterconfig identity (access.Caller.Identity), never "".
func (e *Exchanger) Token(ctx context.Context, callerIdentity, subjectToken string) (string, error) {
	if callerIdentity == "" {
		return "", errors.New("the caller has no identity of its own (a static token, or none), so it has no credential for this remote")
	}
	if subjectToken == "" {
		return "", errors.New("the caller presented no token to exchange")
	}
	tok, err := e.token(ctx, callerIdentity, func(ctx context.Context, key cacheKey) (string, error) {
		return e.exchange(ctx, key, subjectToken)
	})
	if err != nil && errors.Is(err, ctx.Err()) {
		return "", fmt.Errorf("waiting for the token exchange at %s: %w", e.host, err)
	}
	return tok, err
}

// Forget drops the caller's token (a revoked caller, or the remote answered 401 to
// it): the next call exchanges again.
func (e *Exchanger) Forget(callerIdentity string) { e.forget(callerIdentity) }

// Len is the number of tokens in the exchanger's cache (all exchangers', when shared).
func (e *Exchanger) Len() int { return e.cache.Len() }

// Stats are the exchanger's counts.
func (e *Exchanger) Stats() Stats {
	return Stats{Hits: e.hits.Load(), Misses: e.misses.Load(), Exchanges: e.exchanges.Load(), Failures: e.failures.Load()}
}

// exchange asks the token endpoint and caches the answer.
func (e *Exchanger) exchange(ctx context.Context, key cacheKey, subjectToken string) (string, error) {
	start := time.Now()
	tok, lifetime, err := e.ask(ctx, subjectToken)
	e.series.exchanged(err == nil, time.Since(start).Seconds())
	if err != nil {
		e.failures.Add(1)
		return "", err
	}
	e.exchanges.Add(1)
	if ttl := e.cacheFor(lifetime); ttl > 0 {
		e.cache.add(key, &entry{token: tok, expires: e.now().Add(ttl).UnixNano()})
	}
	return tok, nil
}

// cacheFor is how long a token of the given lifetime is reused:
// min(lifetime − RefreshBefore, maxCacheTTL). A token too short-lived for that margin
// is reused for half its lifetime rather than never, so that a token service issuing
// tokens of under a minute is not asked on every call.
func (e *Exchanger) cacheFor(lifetime time.Duration) time.Duration {
	return cacheTTL(lifetime, e.refresh, e.maxTTL)
}

// ask makes one exchange and returns the token and its lifetime.
func (e *Exchanger) ask(ctx context.Context, subjectToken string) (string, time.Duration, error) {
	authz, err := e.auth.authorization()
	if err != nil {
		return "", 0, &ExchangeError{Host: e.host, err: err}
	}
	var actor string
	var actorType oidc.TokenType
	if e.actorFile != "" {
		if actor, err = readTrimmed(e.actorFile, "actor token"); err != nil {
			return "", 0, &ExchangeError{Host: e.host, err: err}
		}
		actorType = oidc.JWTTokenType
	}
	var audience []string
	if e.audience != "" {
		audience = []string{e.audience}
	}
	te := &endpoint{url: e.endpoint, client: e.httpClient, authz: authz}
	resp, err := tokenexchange.ExchangeToken(ctx, te, subjectToken, oidc.JWTTokenType, actor, actorType,
		[]string{e.resource}, audience, e.scopes, oidc.AccessTokenType)
	if err != nil {
		return "", 0, exchangeError(e.host, err, subjectToken, actor)
	}
	if err := e.check(resp, subjectToken, actor); err != nil {
		return "", 0, err
	}
	return resp.AccessToken, e.lifetime(resp), nil
}

// check refuses an answer the remote must not get: no token, a token of another kind,
// or the caller's (or the gateway's) own token or audience.
func (e *Exchanger) check(resp *oidc.TokenExchangeResponse, subjectToken, actor string) error {
	switch {
	case resp.AccessToken == "":
		return &ExchangeError{Host: e.host, err: errors.New("the answer holds no access_token")}
	case resp.IssuedTokenType != "" && resp.IssuedTokenType != oidc.AccessTokenType && resp.IssuedTokenType != oidc.JWTTokenType:
		return &ExchangeError{Host: e.host, err: fmt.Errorf("the answer's issued_token_type is %q, not an access token", resp.IssuedTokenType)}
	case resp.TokenType != "" && !strings.EqualFold(resp.TokenType, oidc.BearerToken):
		return &ExchangeError{Host: e.host, err: fmt.Errorf("the answer's token_type is %q, not Bearer", clipped(resp.TokenType))}
	case resp.AccessToken == subjectToken || (actor != "" && resp.AccessToken == actor):
		return &ExchangeError{Host: e.host, err: ErrPassThrough}
	case sharesAudience(resp.AccessToken, subjectToken):
		return &ExchangeError{Host: e.host, err: ErrPassThrough}
	}
	return nil
}

// lifetime is the token's from expires_in, else from its own exp claim, else the
// cache's bound.
func (e *Exchanger) lifetime(resp *oidc.TokenExchangeResponse) time.Duration {
	if resp.ExpiresIn > 0 {
		return time.Duration(resp.ExpiresIn) * time.Second
	}
	if _, exp, ok := peekClaims(resp.AccessToken); ok && exp > 0 {
		return time.Until(time.Unix(exp, 0))
	}
	return e.maxTTL
}

// endpoint is the token endpoint as zitadel's tokenexchange client takes it. Its
// authorization is made per exchange, from the files as they are now.
type endpoint struct {
	url    string
	client *http.Client
	authz  any
}

func (t *endpoint) TokenEndpoint() string    { return t.url }
func (t *endpoint) HttpClient() *http.Client { return t.client } //nolint:revive // the interface's name
func (t *endpoint) AuthFn() (any, error)     { return t.authz, nil }

var _ tokenexchange.TokenExchanger = (*endpoint)(nil)

func isTransportError(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// Close lets the exchanger's idle connections to the token endpoint go (a config
// reload replaced it). Calls in flight finish.
func (e *Exchanger) Close() { e.httpClient.CloseIdleConnections() }
