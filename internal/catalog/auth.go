package catalog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
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
	return v.rendered.of(ss).Authorization.Allows(v.caller, kind, name)
}

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

// clientAddress is the caller's IP address without its port.
func clientAddress(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
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
		v, err := h.reviews.viewerFor(r.Context(), bearerToken(r), clientAddress(r))
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
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	})
}
