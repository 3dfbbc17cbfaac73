package catalog

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"

	"github.com/cantus-dev/cantus-operator/internal/access"
)

// Every catalog request would otherwise cost one TokenReview and one SubjectAccessReview
// per namespace, made with the manager's own API budget: any token, even a bad one,
// could keep that budget busy. Decisions are therefore cached per token for a short
// time, reviews of a new token are rate limited (429 past the limit), and the reviews of
// one token run with bounded parallelism.
const (
	// decisionTTL is how long an access decision (allowed, refused or unknown token) is
	// reused: a revoked RoleBinding shows within this time.
	decisionTTL = 10 * time.Second
	// maxCachedDecisions bounds the cache; past it, expired entries go, then all.
	maxCachedDecisions = 4096
	// reviewRate and reviewBurst bound how many tokens per second get reviewed.
	reviewRate  = 10
	reviewBurst = 20
	// clientReviewRate and clientReviewBurst bound the new tokens of one client (an IPv4
	// address or an IPv6 /64), so that one client sending random tokens cannot use up
	// reviewRate for everyone.
	clientReviewRate  = 2
	clientReviewBurst = 5
	// maxTrackedClients bounds the per-address limiters; past it, idle ones go, then all.
	maxTrackedClients = 4096
	clientIdleAfter   = time.Minute
	// maxParallelReviews bounds the SubjectAccessReviews of one request in flight.
	maxParallelReviews = 8
)

// errTooManyReviews is answered with 429.
var errTooManyReviews = errors.New("too many catalog requests with new tokens: retry in a second")

// reviews decides what a token may see, caching the decision.
type reviews struct {
	auth    authorizer
	catalog *Catalog
	limit   *rate.Limiter
	now     func() time.Time

	mu        sync.Mutex
	decisions map[[sha256.Size]byte]decision
	clients   map[string]*clientLimit
}

// clientLimit is one client's share of the reviews.
type clientLimit struct {
	limit    *rate.Limiter
	lastSeen time.Time
}

// authorizer is what the Authorizer does, so that tests can count the reviews.
type authorizer interface {
	Authenticate(ctx context.Context, token string) (authnv1.UserInfo, error)
	MayList(ctx context.Context, user authnv1.UserInfo, namespace string) (bool, error)
}

// offlineChecker is an authorizer that can refuse some tokens without asking the API
// server (Authorizer does, from the cluster issuer's keys); those cost no review.
type offlineChecker interface {
	RefuseOffline(ctx context.Context, token string) error
}

type decision struct {
	viewer  *viewer
	err     error // errUnauthenticated, cached like a viewer
	expires time.Time
}

func newReviews(auth authorizer, c *Catalog) *reviews {
	return &reviews{auth: auth, catalog: c, limit: rate.NewLimiter(reviewRate, reviewBurst), now: time.Now,
		decisions: map[[sha256.Size]byte]decision{}, clients: map[string]*clientLimit{}}
}

// viewerFor returns who token is and which namespaces they may see; client names the
// caller (its IPv4 address or IPv6 /64), whose share of the reviews of new tokens is
// bounded.
func (a *reviews) viewerFor(ctx context.Context, token, client string) (*viewer, error) {
	if token == "" {
		return nil, errUnauthenticated
	}
	// Keyed by a digest: the cache never holds a token.
	key := sha256.Sum256([]byte(token))
	if d, ok := a.cached(key); ok {
		return d.viewer, d.err
	}
	if err := a.refuseBadJWT(token); err != nil {
		return nil, err
	}
	if offline, ok := a.auth.(offlineChecker); ok {
		if err := offline.RefuseOffline(ctx, token); err != nil {
			return nil, err
		}
	}
	if !a.clientAllowed(client) || !a.limit.Allow() {
		return nil, errTooManyReviews
	}
	v, err := a.review(ctx, token)
	if err == nil || errors.Is(err, errUnauthenticated) {
		a.store(key, decision{viewer: v, err: err, expires: a.now().Add(decisionTTL)})
	}
	return v, err
}

func (a *reviews) review(ctx context.Context, token string) (*viewer, error) {
	user, err := a.auth.Authenticate(ctx, token)
	if err != nil {
		return nil, err
	}
	namespaces, err := a.catalog.Namespaces(ctx)
	if err != nil {
		return nil, err
	}
	allowed := make([]bool, len(namespaces))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxParallelReviews)
	for i, ns := range namespaces {
		g.Go(func() error {
			ok, err := a.auth.MayList(gctx, user, ns)
			allowed[i] = ok
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("access review: %w", err)
	}
	v := &viewer{user: user, namespaces: make(map[string]bool, len(namespaces)), caller: callerOf(user, token), rendered: &a.catalog.rendered,
		decisions: &decisionMemo{}}
	for i, ns := range namespaces {
		v.namespaces[ns] = allowed[i]
	}
	return v, nil
}

// refuseBadJWT refuses, without a TokenReview, a token shaped like a JWT whose claims do
// not decode or that has expired. Other tokens (opaque ones an authentication webhook may
// accept) go to review.
func (a *reviews) refuseBadJWT(token string) error {
	if strings.Count(token, ".") != 2 {
		return nil
	}
	var claims struct {
		Expiry *float64 `json:"exp"`
	}
	if !access.UnverifiedClaims(token, &claims) {
		return fmt.Errorf("%w: the token is not a well-formed JWT", errUnauthenticated)
	}
	if claims.Expiry != nil && a.now().After(time.Unix(int64(*claims.Expiry), 0)) {
		return fmt.Errorf("%w: the token has expired", errUnauthenticated)
	}
	return nil
}

// clientAllowed takes one review from the client's share.
func (a *reviews) clientAllowed(client string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	c, ok := a.clients[client]
	if !ok {
		if len(a.clients) >= maxTrackedClients {
			a.forgetIdleClients(now)
		}
		c = &clientLimit{limit: rate.NewLimiter(clientReviewRate, clientReviewBurst)}
		a.clients[client] = c
	}
	c.lastSeen = now
	return c.limit.AllowN(now, 1)
}

func (a *reviews) forgetIdleClients(now time.Time) {
	for k, c := range a.clients {
		if now.Sub(c.lastSeen) > clientIdleAfter {
			delete(a.clients, k)
		}
	}
	if len(a.clients) >= maxTrackedClients {
		clear(a.clients)
	}
}

func (a *reviews) cached(key [sha256.Size]byte) (decision, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d, ok := a.decisions[key]
	if !ok || a.now().After(d.expires) {
		return decision{}, false
	}
	return d, true
}

func (a *reviews) store(key [sha256.Size]byte, d decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.decisions) >= maxCachedDecisions {
		now := a.now()
		for k, old := range a.decisions {
			if now.After(old.expires) {
				delete(a.decisions, k)
			}
		}
		if len(a.decisions) >= maxCachedDecisions {
			clear(a.decisions)
		}
	}
	a.decisions[key] = d
}

// statusOf maps an access error to its HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, errTooManyReviews):
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}
