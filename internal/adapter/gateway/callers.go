package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/callercred"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// The codes that begin the failed result of a call that needs the caller's own
// credential for the remote and could not get one. Nothing was sent to the remote.
const (
	// CodeCallerIdentityRequired: the caller presented no identity of its own (a static
	// bearer token), so there is nobody to act for.
	CodeCallerIdentityRequired = "caller_identity_required"
	// CodeCallerCredentialsMissing: the caller has no per-caller Secret for the import.
	CodeCallerCredentialsMissing = "caller_credentials_missing" //nolint:gosec // G101: an error code, not a credential
	// CodeTokenExchangeFailed: the token endpoint refused or failed the exchange.
	CodeTokenExchangeFailed = "token_exchange_failed"
	// CodeUpstreamUnauthorized: the remote refused the credential sent, after one renewal.
	CodeUpstreamUnauthorized = "upstream_unauthorized"
	// CodeConnectRequired: the caller has not connected an account for the import (or
	// must connect it again); the error's Connect says where.
	CodeConnectRequired = adapterconfig.ConnectRequiredErr
	// CodeConnectUnavailable: the operator's connect endpoint failed or refused the
	// gateway, so no caller's connected account can be had.
	CodeConnectUnavailable = "connect_unavailable"
)

// CallerCredentialError is why a call could not be given its caller's credential. Its
// Error() never holds a credential nor the connect URL (it may be logged); the caller
// gets the URL through credentialFailure and the connect answers.
type CallerCredentialError struct {
	Code    string
	Message string
	// Connect, for CodeConnectRequired, is where the caller's user connects.
	Connect *ConnectPrompt
}

func (e *CallerCredentialError) Error() string { return e.Code + ": " + e.Message }

// CredentialSource gives a caller's credential for a remote (the header value after the
// configured prefix). Implementations cache what they can; Forget drops what is cached
// for an identity (a revoked caller, or a credential the remote refused).
type CredentialSource interface {
	Credential(ctx context.Context, caller *access.Caller) (string, error)
	Forget(identity string)
}

// callerRemotes are the per-caller remotes of one remote whose import names caller
// credentials. A caller's remote is a client of its own (the remote's headers plus the
// caller's credential, on the remote's shared connection pool) and a session of its own,
// so that no upstream session ever carries two callers. They are bounded (the least
// recently used goes first) and closed when idle.
type callerRemotes struct {
	parent   *remote
	cfg      *adapterconfig.CallerCredentials
	source   CredentialSource
	children *childRemotes
}

func newCallerRemotes(parent *remote, cfg *adapterconfig.CallerCredentials, source CredentialSource) (*callerRemotes, error) {
	size, idle := cfg.MaxCallers, cfg.IdleTimeout.Duration
	if size <= 0 {
		size = adapterconfig.DefaultMaxCallers
	}
	if idle <= 0 {
		idle = adapterconfig.DefaultCallerIdleTimeout
	}
	children, err := newChildRemotes(parent, size, idle)
	if err != nil {
		return nil, fmt.Errorf("caller sessions: %w", err)
	}
	children.counted = func(n int) { parent.metrics.callerSessions.WithLabelValues(parent.importRef).Set(float64(n)) }
	return &callerRemotes{parent: parent, cfg: cfg, source: source, children: children}, nil
}

// remoteFor returns the remote of the caller ctx carries, holding its current
// credential; an error is a *CallerCredentialError and means nothing may be sent.
func (c *callerRemotes) remoteFor(ctx context.Context) (*remote, error) {
	caller, _ := access.CallerFrom(ctx)
	identity := caller.Identity()
	if identity == "" {
		return nil, &CallerCredentialError{Code: CodeCallerIdentityRequired, Message: fmt.Sprintf(
			"import %s sends each caller's own credential to the remote, and this caller presented no identity of its own (a service-account or OIDC token); call with one", c.parent.importRef)}
	}
	value, err := c.source.Credential(ctx, caller)
	if err != nil {
		c.parent.metrics.callerFailures.WithLabelValues(c.parent.importRef, failureCode(err)).Inc()
		return nil, err
	}
	r, err := c.remoteOf(identity)
	if err != nil {
		return nil, err
	}
	r.lastCaller.Store(caller)
	if err := r.useCredential(c.cfg.ValuePrefix + value); err != nil {
		return nil, err
	}
	return r, nil
}

func (c *callerRemotes) remoteOf(identity string) (*remote, error) {
	return c.children.remoteOf(identity, func(s *callerState) {
		s.identity, s.credHeader = identity, c.cfg.Header
	})
}

// renew drops r's credential and gets a new one, after the remote refused it.
func (c *callerRemotes) renew(ctx context.Context, r *remote) {
	c.source.Forget(r.identity)
	r.mustConnect.Store(nil)
	caller := r.lastCaller.Load()
	value, err := c.source.Credential(ctx, caller)
	if err != nil {
		r.log.V(1).Info("renewing a caller's credential failed", "error", err.Error())
		var ce *CallerCredentialError
		if errors.As(err, &ce) && ce.Connect != nil {
			r.mustConnect.Store(ce)
		}
		return
	}
	if err := r.useCredential(c.cfg.ValuePrefix + value); err != nil {
		r.log.V(1).Info("a caller's renewed credential is unusable", "error", err.Error())
	}
}

// forgetRevoked drops the remotes and credentials of the service accounts whose UIDs
// are revoked (deleted accounts); their calls are refused before they get here.
func (c *callerRemotes) forgetRevoked(uids map[string]bool) {
	for _, identity := range c.children.cache.Keys() {
		_, uid, ok := strings.Cut(identity, "#")
		if ok && strings.HasPrefix(identity, "serviceaccount:") && uids[uid] {
			c.source.Forget(identity)
			c.children.cache.Remove(identity)
		}
	}
	c.children.count()
}

// ForgetRevoked drops the caller sessions and cached credentials of the service
// accounts whose UIDs are revoked.
func (p *Pool) ForgetRevoked(uids map[string]bool) {
	if len(uids) == 0 {
		return
	}
	p.mu.Lock()
	remotes := slices.Collect(maps.Values(p.remotes))
	p.mu.Unlock()
	for _, r := range remotes {
		if r.callers != nil {
			r.callers.forgetRevoked(uids)
		}
	}
}

// remotes are the callers' remotes open now.
func (c *callerRemotes) remotes() []*remote { return c.children.all() }

func (c *callerRemotes) close() {
	c.children.close()
	if closer, ok := c.source.(interface{ Close() }); ok {
		closer.Close()
	}
	c.parent.metrics.callerSessions.WithLabelValues(c.parent.importRef).Set(0)
}

// credentialFailure is the text of a failure about credentials, which tells the caller
// what to do rather than that the call failed: a caller's credential that could not be
// had, or credentials the remote refused even after one renewal.
func (r *remote) credentialFailure(err error) (string, bool) {
	var ce *CallerCredentialError
	if errors.As(err, &ce) {
		if ce.Connect != nil {
			return ce.Error() + ". " + ce.Connect.instructions(), true
		}
		return ce.Error(), true
	}
	var e *mcpclient.Error
	if !errors.As(err, &e) || e.Reason != mcpclient.ReasonUnauthorized {
		return "", false
	}
	todo := "the import's headers (spec.headers) were refused: put a valid credential in the Secret they name"
	if r.callers != nil {
		todo = "this caller's own credential was refused, after one renewal: " + r.callers.todo()
	}
	return fmt.Sprintf("%s: the remote %s refused the credentials of import %s (%s); %s",
		CodeUpstreamUnauthorized, r.name, r.importRef, e.Detail, todo), true
}

// todo says what to do when the remote refuses a caller's credential.
func (c *callerRemotes) todo() string {
	if c.cfg.PerCallerSecret != nil {
		return "replace the key in the caller's Secret (labelled " + c.cfg.PerCallerSecret.Label + ")"
	}
	if c.cfg.Connect != nil {
		return "the remote refused this caller's connected account even after the operator refreshed its token: disconnect the account (the catalog's disconnect endpoint) and call again to be given a URL to connect it anew"
	}
	return "ask the owner of the token service to let the gateway's client exchange this caller's tokens for the remote's audience and scopes"
}

func failureCode(err error) string {
	var ce *CallerCredentialError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return "error"
}

// useCredential makes r's client carry value in the credential header, on top of the
// parent's current headers. A change retires r's session: the next call connects
// with the new credential.
func (r *remote) useCredential(value string) error {
	base, headers := r.parent.inUse(false)
	return r.derive(base, headers, value)
}

// derive switches r to a client made from base with headers plus the credential,
// unless that is the one in use.
func (r *remote) derive(base *mcpclient.Client, headers map[string]string, credential string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil && base == r.base && credential == r.credential {
		return nil
	}
	client := base
	if !r.ofSession {
		all := maps.Clone(headers)
		if all == nil {
			all = map[string]string{}
		}
		all[r.credHeader] = credential
		var err error
		if client, err = base.WithHeaders(all); err != nil {
			return &CallerCredentialError{Code: CodeCallerCredentialsMissing, Message: fmt.Sprintf(
				"the caller's credential for import %s cannot be sent in header %s: %s", r.importRef, r.credHeader, err.Error())}
		}
	}
	r.client, r.base, r.credential = client, base, credential
	if c := r.current; c != nil {
		r.current = nil
		r.retireLocked(c)
	}
	return nil
}

// inUse is the parent's client and header values after a refresh (force: a re-read of
// its files in any case).
func (r *remote) inUse(force bool) (*mcpclient.Client, map[string]string) {
	client := r.refresh(force)
	r.mu.Lock()
	defer r.mu.Unlock()
	return client, r.headers
}

// withCallers makes r serve each caller on a remote of its own when its backend names
// caller credentials.
func (r *remote) withCallers(cfg *adapterconfig.CallerCredentials, tokens *callercred.Cache) error {
	if cfg == nil {
		return nil
	}
	source, err := newCredentialSource(r.importRef, cfg, tokens, r.metrics.tokens)
	if err != nil {
		return err
	}
	callers, err := newCallerRemotes(r, cfg, source)
	if err != nil {
		return err
	}
	r.callers = callers
	return nil
}

// callerState is what a caller's remote keeps besides a remote's: whose it is, the
// credential it sends and the client it derived that from.
type callerState struct {
	parent *remote
	// ofSession is set on a downstream session's remote (sessions.go), which sends
	// what its parent sends: no credential of its own. downstream is that session's id.
	ofSession  bool
	downstream string
	identity   string
	credHeader string
	credential string
	base       *mcpclient.Client
	lastCaller atomic.Pointer[access.Caller]
	lastUsed   atomic.Int64
	// listening counts the subscription listeners holding a stream on this remote's
	// session: a downstream session's remote is not idle while one does.
	listening atomic.Int32
	// mustConnect is set when renewing a refused credential found that the caller must
	// connect its account again: the refused call is answered with that.
	mustConnect atomic.Pointer[CallerCredentialError]
}

// refused is the error of a call whose credentials the remote refused and that is not
// retried: the caller's connect prompt when the renewal asked for one, else err.
func (r *remote) refused(err error) error {
	if r.parent == nil {
		return err
	}
	if r.ofSession {
		return r.parent.refused(err)
	}
	if ce := r.mustConnect.Swap(nil); ce != nil {
		return ce
	}
	return err
}

// rederive is refresh for a caller's remote: the parent's files, re-read when they
// changed, under the caller's credential.
func (r *remote) rederive(force bool) *mcpclient.Client {
	base, headers := r.parent.inUse(force)
	r.mu.Lock()
	credential := r.credential
	r.mu.Unlock()
	if err := r.derive(base, headers, credential); err != nil {
		r.log.Error(err, "the remote's new header files are unusable with the caller's credential; keeping the values in use")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.client
}
