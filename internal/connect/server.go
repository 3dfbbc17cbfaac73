// Package connect keeps the accounts callers connect at remotes' authorization servers
// (RemoteToolImport spec.callerCredentials.connect): the operator is the OAuth client.
// It serves, on the catalog's HTTPS listener, the connect links users open, the OAuth
// callback, its Client ID Metadata Document, the endpoint gateways fetch callers'
// access tokens from, and the endpoint where a caller disconnects. Tokens are kept
// encrypted (AES-256-GCM, keys from a Secret) in Secrets of the operator's namespace,
// and only the operator refreshes them.
package connect

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Authenticator says whom a bearer token belongs to (a TokenReview for an audience).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (authnv1.UserInfo, error)
}

// Handler serves the connect endpoints.
type Handler struct {
	// Client reads RemoteToolImports, SkillServers and service accounts (cached) and
	// Secrets (from the API server).
	Client client.Client
	Store  *Store
	// Gateways authenticates gateways' tokens for adapterconfig.ConnectAudience;
	// Callers authenticates callers' tokens for the catalog's audience (disconnect).
	Gateways Authenticator
	Callers  Authenticator
	// BaseURL is the operator's public HTTPS base URL: connect links, the callback and
	// the Client ID Metadata Document live under it. Empty: links use the host the
	// gateway reached the operator at, and only pre-registered clients work.
	BaseURL string
	// DialFor gives the dialer of an import's namespace: it connects only to addresses
	// its ToolSourcePolicies allow, checked when connecting. RootCAs are the CAs TLS to
	// authorization servers trusts (nil: the system's). HTTPClient replaces both, for
	// tests.
	DialFor    func(ctx context.Context, namespace string) (func(ctx context.Context, network, addr string) (net.Conn, error), error)
	RootCAs    *x509.CertPool
	HTTPClient *http.Client
	Log        logr.Logger
	Now        func() time.Time
}

// accessTokenMargin: an access token with less than this left is refreshed before it
// is handed out.
const accessTokenMargin = time.Minute

// refreshClaim is how long one replica may hold the refresh of an account.
const refreshClaim = 30 * time.Second

// Routes adds the connect endpoints to mux.
func (h *Handler) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+adapterconfig.ConnectTokenPath, h.token)
	mux.HandleFunc("GET "+adapterconfig.ConnectStartPath, h.start)
	mux.HandleFunc("GET "+adapterconfig.ConnectCallback, h.callback)
	mux.HandleFunc("GET "+adapterconfig.ConnectClientPath, h.clientMetadata)
	mux.HandleFunc("POST "+adapterconfig.ConnectDisconnect, h.disconnect)
	mux.HandleFunc("POST "+LinkPath, h.link)
}

// LinkPath gives a service account of an import's namespace its own connect link for
// the import, without a call through a gateway: for the account a probe identity
// (spec.callerCredentials.connect.probeIdentity.serviceAccount) names, whose import
// serves no tool before it has connected.
const LinkPath = "/connect/v1/link"

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// answer writes a ConnectTokenResponse.
func answer(w http.ResponseWriter, status int, resp adapterconfig.ConnectTokenResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp) //nolint:gosec // G117: the access token is this endpoint's answer to the gateway
}

func refuse(w http.ResponseWriter, status int, code, message string) {
	answer(w, status, adapterconfig.ConnectTokenResponse{Error: code, Message: message})
}

// token is ConnectTokenPath: a gateway asks for a caller's access token.
func (h *Handler) token(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	user, err := h.Gateways.Authenticate(ctx, bearerToken(r))
	if err != nil {
		refuse(w, http.StatusUnauthorized, "unauthorized", "a service-account token of the gateway, issued for audience "+adapterconfig.ConnectAudience+", is required")
		return
	}
	var req adapterconfig.ConnectTokenRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10)).Decode(&req); err != nil || req.Import == "" || req.Caller == "" {
		refuse(w, http.StatusBadRequest, "invalid_request", "the body must be a JSON ConnectTokenRequest with import and caller")
		return
	}
	imp, status, why := h.importServedBy(ctx, user, req.Import)
	if why != "" {
		refuse(w, status, "forbidden", why)
		return
	}
	if why := h.checkCaller(ctx, imp, req.Caller); why != "" {
		refuse(w, http.StatusForbidden, "caller_refused", why)
		return
	}
	acct, err := h.account(ctx, imp, req)
	switch {
	case err == nil:
		answer(w, http.StatusOK, adapterconfig.ConnectTokenResponse{AccessToken: acct.AccessToken, ExpiresIn: h.expiresIn(acct)})
	case errors.Is(err, errNoAccount), errors.Is(err, errReconnect):
		h.connectRequired(w, r, imp, req, errors.Is(err, errReconnect))
	case errors.Is(err, ErrNoKeys):
		h.Log.Error(err, "connect mode cannot read or store accounts")
		refuse(w, http.StatusServiceUnavailable, "connect_unavailable", "the operator cannot read or store connected accounts now: its connect key Secret is missing; ask the cluster's administrators")
	default:
		h.Log.Error(err, "fetch a caller's access token", "import", req.Import)
		refuse(w, http.StatusBadGateway, "temporarily_unavailable", "the operator could not get the caller's access token from the authorization server; try again")
	}
}

// account is the caller's account with an access token fit to hand out: refreshed
// when it expires soon or was refused.
func (h *Handler) account(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, req adapterconfig.ConnectTokenRequest) (*Account, error) {
	acct, secret, err := h.Store.load(ctx, req.Import, req.Caller)
	if err == nil && (req.Refused || h.expiring(acct)) {
		acct, err = h.refreshOnce(ctx, imp, req, secret)
	}
	return acct, err
}

// ErrNotConnected says the caller has no usable account for the import.
var ErrNotConnected = errors.New("no connected account: the caller must connect (again)")

// AccessToken is the access token of caller's account for imp, refreshed if needed, for
// the operator's own probes (spec.callerCredentials.connect.probeIdentity).
func (h *Handler) AccessToken(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, caller string) (string, error) {
	acct, err := h.account(ctx, imp, adapterconfig.ConnectTokenRequest{Import: imp.Namespace + "/" + imp.Name, Caller: caller})
	if errors.Is(err, errNoAccount) || errors.Is(err, errReconnect) {
		return "", ErrNotConnected
	}
	if err != nil {
		return "", err
	}
	return acct.AccessToken, nil
}

func (h *Handler) expiring(acct *Account) bool {
	if acct.Expiry.IsZero() {
		return false
	}
	margin := accessTokenMargin
	if !acct.Issued.IsZero() {
		margin = min(margin, acct.Expiry.Sub(acct.Issued)/2)
	}
	return acct.Expiry.Sub(h.now()) < margin
}

func (h *Handler) expiresIn(acct *Account) int64 {
	if acct.Expiry.IsZero() {
		return 0
	}
	return int64(max(acct.Expiry.Sub(h.now())/time.Second, 1))
}

// connectRequired answers 409 with a connect link for the caller.
func (h *Handler) connectRequired(w http.ResponseWriter, r *http.Request, imp *cantusv1alpha1.RemoteToolImport, req adapterconfig.ConnectTokenRequest, again bool) {
	link, valid, err := h.Store.connectURL(r.Context(), h.base(r), req.Import, req.Caller, h.now())
	if err != nil {
		if errors.Is(err, ErrNoKeys) {
			refuse(w, http.StatusServiceUnavailable, "connect_unavailable", "the operator cannot store connected accounts now: its connect key Secret is missing; ask the cluster's administrators")
			return
		}
		h.Log.Error(err, "make a connect link", "import", req.Import)
		refuse(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the operator could not make a connect link; try again")
		return
	}
	what := "has not connected an account"
	if again {
		what = "must connect the account again"
	}
	server := ""
	if s := imp.Status.CallerCredentials; s != nil && s.AuthorizationServer != "" {
		server = " at " + s.AuthorizationServer
	}
	answer(w, http.StatusConflict, adapterconfig.ConnectTokenResponse{
		Error: adapterconfig.ConnectRequiredErr, ConnectURL: link, ExpiresIn: int64(valid / time.Second),
		Message: fmt.Sprintf("the caller %s for %s%s: open %s (valid %d minutes, once), sign in, then try again",
			what, req.Import, server, link, int(valid/time.Minute)),
	})
}

// base is the public base URL of the connect pages.
func (h *Handler) base(r *http.Request) string {
	if h.BaseURL != "" {
		return h.baseURL()
	}
	return "https://" + r.Host
}

func (h *Handler) baseURL() string { return strings.TrimSuffix(h.BaseURL, "/") }

// importServedBy finds the import a gateway asks for, and checks that the gateway's
// service account is that of a SkillServer in the import's namespace which re-exports
// it, in connect mode. The HTTP status and why, when not.
func (h *Handler) importServedBy(ctx context.Context, user authnv1.UserInfo, importRef string) (*cantusv1alpha1.RemoteToolImport, int, string) {
	gwNamespace, gwAccount, ok := splitServiceAccountUser(user.Username)
	if !ok {
		return nil, http.StatusForbidden, "only a gateway's service account may fetch callers' tokens"
	}
	namespace, name, ok := strings.Cut(importRef, "/")
	if !ok || namespace != gwNamespace {
		return nil, http.StatusForbidden, "a gateway fetches tokens only for the imports it re-exports, in its own namespace"
	}
	servers := &cantusv1alpha1.SkillServerList{}
	if err := h.Client.List(ctx, servers, client.InNamespace(namespace)); err != nil {
		h.Log.Error(err, "list SkillServers for a gateway's token request")
		return nil, http.StatusServiceUnavailable, "the operator could not check the gateway; try again"
	}
	serves := slices.ContainsFunc(servers.Items, func(ss cantusv1alpha1.SkillServer) bool {
		return GatewayServiceAccount(&ss) == gwAccount && slices.ContainsFunc(ss.Spec.Imports, func(i cantusv1alpha1.SkillImport) bool { return i.Name == name })
	})
	if !serves {
		return nil, http.StatusForbidden, fmt.Sprintf("no SkillServer running as service account %s re-exports import %s", gwAccount, importRef)
	}
	imp := &cantusv1alpha1.RemoteToolImport{}
	if err := h.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, imp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, http.StatusForbidden, "import " + importRef + " does not exist"
		}
		return nil, http.StatusServiceUnavailable, "the operator could not read the import; try again"
	}
	if imp.Spec.CallerCredentials == nil || imp.Spec.CallerCredentials.Connect == nil {
		return nil, http.StatusForbidden, "import " + importRef + " does not use spec.callerCredentials.connect"
	}
	return imp, 0, ""
}

// GatewayServiceAccount is the service account a SkillServer's pods run as.
func GatewayServiceAccount(ss *cantusv1alpha1.SkillServer) string {
	if ss.Spec.Pod != nil && ss.Spec.Pod.ServiceAccountName != "" {
		return ss.Spec.Pod.ServiceAccountName
	}
	return "default"
}

func splitServiceAccountUser(username string) (namespace, name string, ok bool) {
	return cutPair(username, "system:serviceaccount:", ":")
}

// checkCaller refuses callers connect mode does not serve: OIDC callers whose identity
// provider is not the import's authorization server (the operator could not verify
// that the user who connects is the caller, so a link could connect someone else's
// account to them), other callers that are not service accounts, and service accounts
// that no longer exist with the UID the identity names (their account is forgotten).
func (h *Handler) checkCaller(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, caller string) string {
	if issuer, _, ok := oidcCaller(caller); ok {
		return checkOIDCCaller(imp, issuer)
	}
	namespace, name, uid, ok := serviceAccountCaller(caller)
	if !ok {
		return "connect mode serves service-account and OIDC callers only"
	}
	sa := &metav1.PartialObjectMetadata{}
	sa.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	if err := h.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, sa); err != nil || string(sa.UID) != uid {
		return "the caller's service account no longer exists"
	}
	return ""
}

// refreshOnce refreshes the account, as the only writer: it claims the refresh with an
// update of the Secret as read (resourceVersion), so that of several replicas (or
// requests) one uses the refresh token, which the authorization server may rotate, and
// the others wait for its result.
func (h *Handler) refreshOnce(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, req adapterconfig.ConnectTokenRequest, secret *corev1.Secret) (*Account, error) {
	for attempt := 0; attempt < 20; attempt++ {
		if until, err := time.Parse(time.RFC3339, secret.Annotations[annotationRefreshing]); err == nil && h.now().Before(until) {
			// Another writer refreshes: wait for its result.
			if err := sleep(ctx, 250*time.Millisecond); err != nil {
				return nil, err
			}
		} else {
			claimed, err := h.claimRefresh(ctx, secret)
			if err != nil {
				return nil, err
			}
			if claimed != nil {
				return h.refresh(ctx, imp, req, claimed)
			}
			// Another writer changed the account first: its refresh may be done.
		}
		acct, fresh, err := h.Store.load(ctx, req.Import, req.Caller)
		if err != nil {
			return nil, err
		}
		if fresh.Annotations[annotationRefreshing] == "" && !h.expiring(acct) {
			return acct, nil
		}
		secret = fresh
	}
	return nil, errors.New("the refresh of the account stayed claimed by another replica")
}

// claimRefresh marks the account's Secret as being refreshed by this writer, with an
// update of the Secret as read: it returns the claimed Secret, or nil when another
// writer changed the Secret first (a conflict).
func (h *Handler) claimRefresh(ctx context.Context, secret *corev1.Secret) (*corev1.Secret, error) {
	claimed := secret.DeepCopy()
	if claimed.Annotations == nil {
		claimed.Annotations = map[string]string{}
	}
	claimed.Annotations[annotationRefreshing] = h.now().Add(refreshClaim).UTC().Format(time.RFC3339)
	if err := h.Store.Client.Update(ctx, claimed); err != nil {
		if apierrors.IsConflict(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("claim the refresh of an account: %w", err)
	}
	return claimed, nil
}

// refresh uses the refresh token of the account kept in claimed, which this writer
// holds.
func (h *Handler) refresh(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, req adapterconfig.ConnectTokenRequest, claimed *corev1.Secret) (*Account, error) {
	var acct Account
	if err := h.Store.open(ctx, claimed, &acct); err != nil {
		return nil, err
	}
	if acct.RefreshToken == "" {
		countFailedRefresh(imp)
		return nil, errors.Join(errReconnect, h.Store.markReconnect(ctx, claimed))
	}
	oc, err := h.clientFor(ctx, imp, "")
	if err != nil {
		return nil, err
	}
	tok, err := oc.refresh(oc.withHTTPClient(ctx), &acct)
	if err != nil {
		countFailedRefresh(imp)
		if refusedGrant(err) {
			h.Log.Info("a connected account's refresh was refused; the caller must connect again", "import", req.Import)
			return nil, errors.Join(errReconnect, h.Store.markReconnect(ctx, claimed))
		}
		released := claimed.DeepCopy()
		delete(released.Annotations, annotationRefreshing)
		_ = h.Store.Client.Update(ctx, released)
		return nil, err
	}
	acct.AccessToken, acct.Expiry, acct.Issued = tok.AccessToken, tok.Expiry, h.now()
	if tok.RefreshToken != "" {
		acct.RefreshToken = tok.RefreshToken
	}
	if err := h.Store.save(ctx, &acct, claimed); err != nil {
		return nil, err
	}
	return &acct, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// bearerToken reads "Authorization: Bearer <token>".
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// page answers a small HTML page to the user's browser.
func page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, map[string]string{"Title": title, "Text": text})
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body><h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))
