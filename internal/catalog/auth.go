package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/saissuer"
)

// Authorizer asks the API server who a token belongs to (TokenReview) and whether that
// user may list SkillServers in a namespace (SubjectAccessReview), so the catalog shows
// each caller exactly what `kubectl get skillservers` would.
type Authorizer struct {
	Client client.Client
	// Audience is the audience a token must be issued for: a token minted for an MCP
	// server, or the API server's default audience, is not accepted here. Empty means
	// DefaultAudience.
	Audience string
	// Issuer, when set, gives the cluster's service-account issuer keys: a token that
	// names that issuer is checked against them before any TokenReview, so a forged one
	// costs no review and none of the review budget.
	Issuer ServiceAccountIssuer

	mu       sync.Mutex
	verified saissuer.Keys // the keys verifier was built from
	verifier *access.KeyVerifier
	// keysRetry is when the keys may be asked for again after they could not be read:
	// until the watcher has them, asking reads the API server, which no caller should
	// be able to make the catalog do on every request.
	keysRetry time.Time
}

// keysRetryAfter is how long the catalog leaves the TokenReview to decide alone after
// the cluster issuer's keys could not be read.
const keysRetryAfter = 30 * time.Second

// ServiceAccountIssuer gives the cluster's service-account issuer and its keys
// (saissuer.Watcher).
type ServiceAccountIssuer interface {
	Current(ctx context.Context) (saissuer.Keys, error)
}

// DefaultAudience is the catalog's audience unless --catalog-audience says otherwise:
// `kubectl create token <account> --audience cantus.dev/catalog`.
const DefaultAudience = "cantus.dev/catalog"

func (a *Authorizer) audience() string {
	if a.Audience == "" {
		return DefaultAudience
	}
	return a.Audience
}

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// errUnauthenticated is answered with 401.
var errUnauthenticated = errors.New("a valid Kubernetes bearer token for the catalog's audience is required (kubectl create token <account> --audience cantus.dev/catalog, or the operator's --catalog-audience)")

// Authenticate returns the user a bearer token belongs to.
func (a *Authorizer) Authenticate(ctx context.Context, token string) (authnv1.UserInfo, error) {
	if token == "" {
		return authnv1.UserInfo{}, errUnauthenticated
	}
	review := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{a.audience()}}}
	if err := a.Client.Create(ctx, review); err != nil {
		return authnv1.UserInfo{}, fmt.Errorf("token review: %w", err)
	}
	// An authenticator that ignores audiences answers without them; such a token was
	// not shown to be meant for the catalog.
	if !review.Status.Authenticated || !slices.Contains(review.Status.Audiences, a.audience()) {
		return authnv1.UserInfo{}, errUnauthenticated
	}
	return review.Status.User, nil
}

// RefuseOffline refuses, without asking the API server, a JWT that no issuer signed (no
// signature, "none" or an HMAC algorithm) and a token of the cluster's service-account
// issuer that its keys do not verify for the catalog's audience. Anything else (opaque
// tokens, other issuers, no keys at hand) is left to the TokenReview.
func (a *Authorizer) RefuseOffline(ctx context.Context, token string) error {
	if strings.Count(token, ".") != 2 {
		return nil
	}
	if !access.SignedWithPublicKey(token) {
		return fmt.Errorf("%w: the token is not signed with a public-key algorithm", errUnauthenticated)
	}
	verifier := a.clusterVerifier(ctx, token)
	if verifier == nil {
		return nil
	}
	if err := verifier.Verify(ctx, token); err != nil {
		return fmt.Errorf("%w: the cluster's service-account issuer did not sign this token for the catalog's audience: %w", errUnauthenticated, err)
	}
	return nil
}

// clusterVerifier is the verifier of the cluster issuer's current keys when the token
// names that issuer, nil otherwise; it is built again when the keys change.
func (a *Authorizer) clusterVerifier(ctx context.Context, token string) *access.KeyVerifier {
	if a.Issuer == nil {
		return nil
	}
	iss, ok := access.UnverifiedIssuer(token)
	if !ok {
		return nil
	}
	keys, ok := a.clusterKeys(ctx)
	if !ok || keys.URL != iss {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verifier == nil || a.verified.URL != keys.URL || !bytes.Equal(a.verified.JWKS, keys.JWKS) {
		v, err := access.NewKeyVerifier(keys.URL, keys.JWKS, a.audience())
		if err != nil {
			return nil
		}
		a.verifier, a.verified = v, keys
	}
	return a.verifier
}

// clusterKeys are the cluster issuer's keys, unless they could not be read lately.
func (a *Authorizer) clusterKeys(ctx context.Context) (saissuer.Keys, bool) {
	a.mu.Lock()
	wait := time.Now().Before(a.keysRetry)
	a.mu.Unlock()
	if wait {
		return saissuer.Keys{}, false
	}
	keys, err := a.Issuer.Current(ctx)
	if err != nil {
		a.mu.Lock()
		a.keysRetry = time.Now().Add(keysRetryAfter)
		a.mu.Unlock()
		return saissuer.Keys{}, false
	}
	return keys, true
}

// MayList says whether user may list SkillServers in namespace.
func (a *Authorizer) MayList(ctx context.Context, user authnv1.UserInfo, namespace string) (bool, error) {
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	review := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: namespace, Verb: "list", Group: cantusv1alpha1.GroupVersion.Group, Resource: "skillservers",
		},
	}}
	if err := a.Client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	return review.Status.Allowed, nil
}

// bearerToken reads "Authorization: Bearer <token>".
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

type viewerKey struct{}

// viewer is who is asking, which namespaces they may see, and who they are to the
// servers' authorization rules.
type viewer struct {
	user       authnv1.UserInfo
	namespaces map[string]bool
	caller     *access.Caller
	rendered   *renderCache
	// decisions remembers this caller's answers per server generation and item, for as
	// long as the viewer is cached: a repeated request evaluates no CEL.
	decisions *decisionMemo
	// budget bounds the CEL work of one request; set on the request's copy (forRequest).
	budget *access.Budget
}

// catalogCELBudget is the CEL cost one catalog request may spend on the servers' rules
// (ten rules at the 100,000 per-rule limit). Past it, the remaining decisions are "not
// allowed" and the response carries HeaderIncomplete.
const catalogCELBudget = 1_000_000

// HeaderIncomplete is set on a catalog response whose CEL budget ran out: some tools,
// prompts, resources or skills the caller may use may be missing from it.
const HeaderIncomplete = "Cantus-Catalog-Incomplete"

// forRequest is the viewer for one request: the same caller and memory, a fresh budget.
func (v *viewer) forRequest() *viewer {
	if v == nil {
		return nil
	}
	r := *v
	r.budget = access.NewBudget(catalogCELBudget)
	return &r
}

// decisionKey names one decision for one caller: the server (by UID and generation, so
// that a changed spec is judged again), the kind and the name.
type decisionKey struct {
	uid        types.UID
	generation int64
	kind       access.ItemKind
	name       string
}

// decisionMemo is a caller's remembered decisions.
type decisionMemo struct {
	mu      sync.Mutex
	allowed map[decisionKey]bool
}

// maxRememberedDecisions bounds one caller's memory; past it, it starts again.
const maxRememberedDecisions = 16384

func (m *decisionMemo) get(k decisionKey) (allowed, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	allowed, ok = m.allowed[k]
	return allowed, ok
}

func (m *decisionMemo) put(k decisionKey, allowed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.allowed == nil || len(m.allowed) >= maxRememberedDecisions {
		m.allowed = map[decisionKey]bool{}
	}
	m.allowed[k] = allowed
}

// SeesNamespace says whether the caller may list SkillServers in namespace.
func (v *viewer) SeesNamespace(namespace string) bool { return v != nil && v.namespaces[namespace] }

// MayCall says whether the server's rules let the caller call tool, as the server's
// adapter would decide for the same token's account; a server without rules lets every
// caller it authenticates call every tool.
func (v *viewer) MayCall(ss *cantusv1alpha1.SkillServer, tool string) bool {
	return v.MayUse(ss, access.ItemTool, tool)
}

// MayUse says whether the server's rules let the caller use the prompt, resource or
// skill (or tool), as its adapter decides for lists and reads.
func (v *viewer) MayUse(ss *cantusv1alpha1.SkillServer, kind access.ItemKind, name string) bool {
	if v == nil {
		return false
	}
	if ss.Spec.Authorization == nil {
		return true
	}
	key := decisionKey{uid: ss.UID, generation: ss.Generation, kind: kind, name: name}
	if v.decisions != nil {
		if allowed, ok := v.decisions.get(key); ok {
			return allowed
		}
	}
	allowed, complete := v.rendered.of(ss).Authorization.AllowsWithin(v.caller, kind, name, v.budget)
	if complete && v.decisions != nil {
		v.decisions.put(key, allowed)
	}
	return allowed
}

// incomplete says whether this request's budget ran out.
func (v *viewer) incomplete() bool { return v != nil && v.budget.Cut() }

// callerOf is the catalog's caller as a server's rules see it: a service account as
// namespace/name, the user's groups from the TokenReview, and the token's claims. The
// claims are read without checking the signature because the API server has just
// authenticated the token; a token that is not a JWT has none.
func callerOf(user authnv1.UserInfo, token string) *access.Caller {
	c := &access.Caller{Kind: "kubernetes", Subject: user.Username, Groups: user.Groups, Claims: unverifiedClaims(token)}
	if rest, ok := strings.CutPrefix(user.Username, serviceAccountUserPrefix); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			c.Kind, c.ServiceAccount = adapterconfig.IssuerServiceAccount, ns+"/"+name
		}
	}
	return c
}

// serviceAccountUserPrefix starts the user name of a service account: system:serviceaccount:<ns>:<name>.
const serviceAccountUserPrefix = "system:serviceaccount:"

func unverifiedClaims(token string) map[string]any {
	claims := map[string]any{}
	if !access.UnverifiedClaims(token, &claims) {
		return map[string]any{}
	}
	return claims
}

// renderCache renders each server once per generation, so that a catalog request
// neither renders nor compiles the rules of every server it lists. Rendering is the
// controller's own (render.SkillServer), so the catalog judges calls by the rules the
// adapter applies.
type renderCache struct {
	mu    sync.Mutex
	byUID map[types.UID]rendered
}

type rendered struct {
	generation int64
	result     render.Result
}

// maxCachedRenders bounds the cache; past it (deleted servers), it starts again.
const maxCachedRenders = 8192

func (c *renderCache) of(ss *cantusv1alpha1.SkillServer) render.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	if got, ok := c.byUID[ss.UID]; ok && got.generation == ss.Generation {
		return got.result
	}
	if c.byUID == nil || len(c.byUID) >= maxCachedRenders {
		c.byUID = map[types.UID]rendered{}
	}
	// The catalog reads no imports nor issuer keys: it needs the rules and the memory
	// tool, which the spec alone decides. An encoding error leaves a Result whose
	// Authorization allows nothing and whose Config is nil.
	result, err := render.SkillServer(ss, render.Inputs{})
	if err != nil {
		result = render.Result{Authorization: render.Refuse(err)}
	}
	c.byUID[ss.UID] = rendered{generation: ss.Generation, result: result}
	return result
}

// clientKey names the client whose share of the reviews a request takes: its IPv4
// address, or its IPv6 /64, since one host commonly holds a whole /64 and could
// otherwise take a share per address.
func clientKey(r *http.Request) string {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

func viewerFrom(ctx context.Context) *viewer {
	v, _ := ctx.Value(viewerKey{}).(*viewer)
	return v
}

// authenticate is the middleware in front of every catalog route: no token or a bad one
// is a 401, too many new tokens a 429, and the namespaces the caller may see are decided
// once per token for a short time (see reviews).
func (h *handler) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := h.reviews.viewerFor(r.Context(), bearerToken(r), clientKey(r))
		if err != nil {
			status := statusOf(err)
			switch status {
			case http.StatusUnauthorized:
				w.Header().Set("WWW-Authenticate", `Bearer realm="cantus-catalog"`)
			case http.StatusTooManyRequests:
				w.Header().Set("Retry-After", "1")
			}
			http.Error(w, err.Error(), status)
			return
		}
		v = v.forRequest()
		next.ServeHTTP(&markIncomplete{ResponseWriter: w, viewer: v}, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	})
}

// markIncomplete sets HeaderIncomplete before the answer's first byte when the
// request's CEL budget ran out while it was computed (every route decides first and
// writes after).
type markIncomplete struct {
	http.ResponseWriter
	viewer *viewer
	marked bool
}

func (m *markIncomplete) mark() {
	if !m.marked {
		m.marked = true
		if m.viewer.incomplete() {
			m.Header().Set(HeaderIncomplete, fmt.Sprintf("the CEL budget of one request (%d units) ran out: some items this caller may use are missing; ask again, answers already decided are remembered", catalogCELBudget))
		}
	}
}

func (m *markIncomplete) WriteHeader(status int) {
	m.mark()
	m.ResponseWriter.WriteHeader(status)
}

func (m *markIncomplete) Write(b []byte) (int, error) {
	m.mark()
	return m.ResponseWriter.Write(b)
}

// Flush lets streamed answers (the MCP endpoint) through.
func (m *markIncomplete) Flush() {
	m.mark()
	if f, ok := m.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (m *markIncomplete) Unwrap() http.ResponseWriter { return m.ResponseWriter }
