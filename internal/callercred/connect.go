package callercred

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Connect mode: each caller connects their own account at the remote's authorization
// server, and the operator alone holds and refreshes the tokens. A Connector fetches a
// caller's access token from the operator's token endpoint for gateways
// (adapterconfig.ConnectTokenPath), presenting the gateway's own token, and caches it
// like an exchanged token. A caller who has not connected gets a *ConnectRequired
// carrying where to connect.

const (
	// DefaultConnectMaxCacheTTL bounds the reuse of a token fetched from the operator:
	// shorter than an exchange's, so that a user's disconnect reaches every gateway
	// within it even when the remote does not check revocation.
	DefaultConnectMaxCacheTTL = 5 * time.Minute
	// maxConnectAnswer bounds the operator's answer read.
	maxConnectAnswer = 64 << 10
	// maxRefusedMarks bounds the callers remembered as refused by the remote.
	maxRefusedMarks = 4096
)

// ConnectRequired is the operator's answer for a caller who has not connected an
// account for the import, or must connect again. Its Error() names neither the URL
// nor the caller: the URL is a capability (whoever opens it links an account to the
// caller), so it goes to the caller only, never to a log.
type ConnectRequired struct {
	Import string
	// URL is where the caller's user connects: single-use, valid until Expires.
	URL     string
	Expires time.Time
	// Message is the operator's explanation for people.
	Message string
}

func (e *ConnectRequired) Error() string {
	return "the caller has not connected an account for import " + e.Import + " (or must connect it again)"
}

// ConnectError is a failed fetch from the operator: it names the endpoint's host, the
// HTTP status and the operator's error code and message; never a token.
type ConnectError struct {
	Host    string
	Status  int
	Code    string
	Message string
	err     error
}

func (e *ConnectError) Error() string {
	s := "fetching the caller's token from the operator at " + e.Host + " failed"
	if e.Status != 0 {
		s += fmt.Sprintf(": HTTP %d", e.Status)
	}
	if e.Code != "" {
		s += ": " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *ConnectError) Unwrap() error { return e.err }

// Connector fetches callers' tokens for one import from the operator.
type Connector struct {
	importRef  string
	endpoint   string
	host       string
	tokenFile  string
	maxTTL     time.Duration
	refresh    time.Duration
	httpClient *http.Client

	// lookup's scope is the operator's endpoint and the import.
	lookup
	series *connectSeries
	// refused are the callers whose last token the remote refused: their next fetch
	// asks the operator to refresh rather than hand the same token out again.
	refused *lru.Cache[string, struct{}]

	fetches, failures atomic.Uint64
}

// NewConnector checks cfg and makes a connector for the import importRef
// ("namespace/name"). o.Name labels the metrics (importRef when empty).
func NewConnector(importRef string, cfg *adapterconfig.Connect, o Options) (*Connector, error) {
	if cfg == nil {
		return nil, errors.New("no connect config")
	}
	u, err := checkEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if cfg.TokenFile == "" {
		return nil, errors.New("connect: tokenFile (the gateway's token for the operator) is required")
	}
	o = o.withDefaults()
	hc, err := httpClient(nil, cfg.CAFile, o.Timeout)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	refused, err := lru.New[string, struct{}](maxRefusedMarks)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	c := &Connector{
		importRef: importRef, endpoint: cfg.Endpoint, host: u.Host, tokenFile: cfg.TokenFile,
		maxTTL: DefaultConnectMaxCacheTTL, refresh: o.RefreshBefore, httpClient: hc, refused: refused,
	}
	remote := cmpOr(o.Name, importRef)
	if err := c.initLookup("connect\x00"+cfg.Endpoint+"\x00"+importRef, remote, o); err != nil {
		return nil, err
	}
	c.series = o.Metrics.connectSeries(remote)
	return c, nil
}

// Token returns the caller's access token for the remote: the cached one while it is
// fresh, otherwise one fetched from the operator. Concurrent misses of one caller make
// one fetch. The error is a *ConnectRequired when the caller must connect, else a
// *ConnectError.
func (c *Connector) Token(ctx context.Context, callerIdentity string) (string, error) {
	if callerIdentity == "" {
		return "", errors.New("the caller has no identity of its own (a static token, or none), so it has no connected account")
	}
	tok, err := c.token(ctx, callerIdentity, c.fetch)
	if err != nil && errors.Is(err, ctx.Err()) {
		return "", &ConnectError{Host: c.host, err: fmt.Errorf("waiting for the operator: %w", err)}
	}
	return tok, err
}

// Forget drops the caller's token (the remote refused it, or the caller is revoked);
// the next fetch tells the operator the last token was refused, so that it refreshes.
func (c *Connector) Forget(callerIdentity string) {
	c.forget(callerIdentity)
	c.refused.Add(callerIdentity, struct{}{})
}

// Stats are the connector's counts (Exchanges: tokens fetched).
func (c *Connector) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Exchanges: c.fetches.Load(), Failures: c.failures.Load()}
}

// Close lets the idle connections to the operator go.
func (c *Connector) Close() { c.httpClient.CloseIdleConnections() }

// fetch asks the operator and caches a token it gives.
func (c *Connector) fetch(ctx context.Context, key cacheKey) (string, error) {
	_, refused := c.refused.Peek(key.caller)
	tok, lifetime, err := c.ask(ctx, key.caller, refused)
	c.series.fetched(err)
	if err != nil {
		// A caller told to connect is an answer, not a failed fetch.
		if required := (*ConnectRequired)(nil); !errors.As(err, &required) {
			c.failures.Add(1)
		}
		return "", err
	}
	c.fetches.Add(1)
	c.refused.Remove(key.caller)
	if ttl := cacheTTL(lifetime, c.refresh, c.maxTTL); ttl > 0 {
		c.cache.add(key, &entry{token: tok, expires: c.now().Add(ttl).UnixNano()})
	}
	return tok, nil
}

// ask makes one request to the operator's token endpoint.
func (c *Connector) ask(ctx context.Context, caller string, refused bool) (string, time.Duration, error) {
	bearer, err := readTrimmed(c.tokenFile, "gateway's connect token")
	if err != nil {
		return "", 0, &ConnectError{Host: c.host, err: err}
	}
	body, err := json.Marshal(adapterconfig.ConnectTokenRequest{Import: c.importRef, Caller: caller, Refused: refused})
	if err != nil {
		return "", 0, &ConnectError{Host: c.host, err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", 0, &ConnectError{Host: c.host, err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := c.httpClient.Do(req)
	if err != nil {
		return "", 0, &ConnectError{Host: c.host, err: transportError(err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxConnectAnswer+1))
	if err != nil {
		return "", 0, &ConnectError{Host: c.host, Status: resp.StatusCode, err: transportError(err)}
	}
	if len(data) > maxConnectAnswer {
		return "", 0, &ConnectError{Host: c.host, Status: resp.StatusCode, err: fmt.Errorf("the answer is over %d bytes", maxConnectAnswer)}
	}
	var answer adapterconfig.ConnectTokenResponse
	decodeErr := json.Unmarshal(data, &answer)
	return c.interpret(resp.StatusCode, &answer, decodeErr, bearer)
}

// interpret turns the operator's answer into a token and its lifetime, or the error
// it says.
func (c *Connector) interpret(status int, answer *adapterconfig.ConnectTokenResponse, decodeErr error, bearer string) (string, time.Duration, error) {
	switch {
	case status == http.StatusOK && decodeErr == nil && answer.AccessToken != "":
		lifetime := c.maxTTL
		if answer.ExpiresIn > 0 {
			lifetime = time.Duration(answer.ExpiresIn) * time.Second
		}
		return answer.AccessToken, lifetime, nil
	case status == http.StatusOK:
		return "", 0, &ConnectError{Host: c.host, Status: status, err: errors.New("the answer holds no access token")}
	case status == http.StatusConflict && decodeErr == nil && answer.Error == adapterconfig.ConnectRequiredErr:
		return "", 0, c.connectRequired(answer)
	case decodeErr != nil:
		return "", 0, &ConnectError{Host: c.host, Status: status, err: errors.New("the answer is not a connect token response")}
	}
	secrets := []string{bearer, answer.AccessToken}
	return "", 0, &ConnectError{Host: c.host, Status: status, Code: clipped(redact(answer.Error, secrets)), Message: clipped(redact(answer.Message, secrets))}
}

// connectRequired checks the connect URL the operator gave: the caller is sent to it,
// so it must be an absolute http(s) URL.
func (c *Connector) connectRequired(answer *adapterconfig.ConnectTokenResponse) error {
	u, err := url.Parse(answer.ConnectURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return &ConnectError{Host: c.host, Status: http.StatusConflict, Code: adapterconfig.ConnectRequiredErr,
			err: errors.New("the operator gave no usable connect URL")}
	}
	expires := time.Time{}
	if answer.ExpiresIn > 0 {
		expires = c.now().Add(time.Duration(answer.ExpiresIn) * time.Second)
	}
	return &ConnectRequired{Import: c.importRef, URL: answer.ConnectURL, Expires: expires, Message: clipped(answer.Message)}
}

// transportError keeps the network's words but not the URL's query (there is none to
// hide today; the endpoint is the operator's path).
func transportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// cacheTTL is how long a token of the given lifetime is reused:
// min(lifetime − refresh, maxTTL), and half its lifetime for a token too short-lived
// for that margin.
func cacheTTL(lifetime, refresh, maxTTL time.Duration) time.Duration {
	ttl := lifetime - refresh
	if half := lifetime / 2; ttl < half {
		ttl = half
	}
	return min(ttl, maxTTL)
}
