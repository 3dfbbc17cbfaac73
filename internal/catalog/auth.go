package catalog

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
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

// viewer is who is asking and which namespaces they may see.
type viewer struct {
	user       authnv1.UserInfo
	namespaces map[string]bool
}

func (v *viewer) allowed(namespace string) bool { return v != nil && v.namespaces[namespace] }

func viewerFrom(ctx context.Context) *viewer {
	v, _ := ctx.Value(viewerKey{}).(*viewer)
	return v
}

// authenticate is the middleware in front of every catalog route: no token or a bad one
// is a 401, too many new tokens a 429, and the namespaces the caller may see are decided
// once per token for a short time (see access).
func (h *handler) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := h.access.viewerFor(r.Context(), bearerToken(r))
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
