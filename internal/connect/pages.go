package connect

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// start is ConnectStartPath: the link a user opens. It works once: opening it marks
// the pending connect started, with a fresh state the callback must bring back, and
// sends the browser to the authorization server.
func (h *Handler) start(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, secret, err := h.Store.readPending(ctx, r.URL.Query().Get("s"), func(p *pending) string { return p.Nonce })
	if err != nil {
		h.linkFailed(w, err)
		return
	}
	switch {
	case p.Started:
		h.linkFailed(w, errLinkUsed)
		return
	case !h.now().Before(p.ExpiresAt):
		h.linkFailed(w, errLinkExpired)
		return
	}
	imp, err := h.importOf(r, p.Import)
	if err != nil {
		page(w, http.StatusServiceUnavailable, "Cannot connect", "The import this link is for cannot be connected now: "+err.Error())
		return
	}
	redirectURI := h.base(r) + adapterconfig.ConnectCallback
	oc, err := h.clientFor(ctx, imp, redirectURI)
	if err != nil {
		page(w, http.StatusServiceUnavailable, "Cannot connect", "The import this link is for cannot be connected now: "+err.Error())
		return
	}
	p.Started, p.State, p.RedirectURI = true, randomString(), redirectURI
	if issuer, _, ok := oidcCaller(p.Caller); ok {
		// The import may have changed since the link was handed out.
		if why := checkOIDCCaller(imp, issuer); why != "" {
			page(w, http.StatusForbidden, "Cannot connect", "This link cannot connect an account: "+why+".")
			return
		}
		p.IDNonce = randomString()
		oc.askForIDToken()
	}
	// Saved over the version read: of two opens of the link, one wins.
	if err := h.Store.savePending(ctx, secret.Name, p, secret); err != nil {
		if apierrors.IsConflict(errors.Unwrap(err)) || apierrors.IsConflict(err) {
			h.linkFailed(w, errLinkUsed)
			return
		}
		h.linkFailed(w, err)
		return
	}
	digest := strings.TrimPrefix(secret.Name, pendingName(""))
	http.Redirect(w, r, oc.authCodeURL(digest+"."+p.State, p.Verifier, p.IDNonce), http.StatusFound)
}

// callback is ConnectCallback: the authorization server sends the browser back with a
// code, which is exchanged (with the PKCE verifier) for the caller's tokens; the
// pending connect is deleted first, so that a state is used once.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	p, secret, err := h.Store.readPending(ctx, q.Get("state"), func(p *pending) string { return p.State })
	if err != nil {
		h.linkFailed(w, err)
		return
	}
	if err := h.Store.Client.Delete(ctx, secret, client.Preconditions{UID: &secret.UID, ResourceVersion: &secret.ResourceVersion}); err != nil {
		h.linkFailed(w, errLinkUsed)
		return
	}
	if e := q.Get("error"); e != "" {
		page(w, http.StatusBadRequest, "Not connected", "The authorization server did not authorize the connection ("+e+"). Ask your agent to try again to get a new link.")
		return
	}
	if !h.now().Before(p.ExpiresAt) {
		h.linkFailed(w, errLinkExpired)
		return
	}
	imp, oc, err := h.importClient(r, p.Import, p.RedirectURI)
	if err != nil {
		page(w, http.StatusServiceUnavailable, "Not connected", "The import cannot be connected now: "+err.Error())
		return
	}
	tok, err := oc.exchange(oc.withHTTPClient(ctx), q.Get("code"), p.Verifier)
	if err != nil {
		h.Log.Info("an authorization code exchange failed", "import", p.Import, "error", redactedError(err))
		page(w, http.StatusBadGateway, "Not connected", "The authorization server did not give the tokens. Ask your agent to try again to get a new link.")
		return
	}
	if p.IDNonce != "" {
		oc.askForIDToken()
		if !h.signedInAsCaller(w, r, imp, oc, p, tok) {
			return
		}
	}
	acct := &Account{
		Import: p.Import, Caller: p.Caller, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, Issued: h.now(),
		Issuer: oc.issuer, TokenURL: oc.config.Endpoint.TokenURL, RevokeURL: oc.revokeURL, ClientID: oc.config.ClientID,
		Scopes: oc.config.Scopes, Resource: oc.resource,
	}
	if err := h.Store.save(ctx, acct, nil); err != nil {
		h.Log.Error(err, "store a connected account", "import", p.Import)
		page(w, http.StatusServiceUnavailable, "Not connected", "The operator could not store the connection. Ask your agent to try again to get a new link.")
		return
	}
	h.Log.Info("an account was connected", "import", p.Import)
	page(w, http.StatusOK, "Connected", "Your account is connected to "+p.Import+". Go back to your agent: its next call goes through.")
}

// signedInAsCaller checks, for an OIDC caller, that the user who signed in is the
// caller: the ID token of the sign-in, verified against the authorization server's
// keys (read through the import's policy-checked client), must name the caller's
// subject. When not, it answers the page, logs and counts the refusal; the pending
// connect is used up already and nothing is stored.
func (h *Handler) signedInAsCaller(w http.ResponseWriter, r *http.Request, imp *cantusv1alpha1.RemoteToolImport, oc *oauthClient, p *pending, tok *oauth2.Token) bool {
	err := h.checkSignIn(r.Context(), imp, oc, p, tok)
	if err == nil {
		return true
	}
	// The tokens the sign-in gave are not kept: revoke them where the server offers it.
	if rerr := oc.revoke(oc.withHTTPClient(r.Context()), &Account{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, RevokeURL: oc.revokeURL}); rerr != nil {
		h.Log.Info("revoking a refused sign-in's token failed", "import", p.Import, "error", rerr.Error())
	}
	reason := idTokenFailure(err)
	refusedSignIns.WithLabelValues(imp.Namespace, imp.Name, reason).Inc()
	if errors.Is(err, errOtherSubject) {
		h.Log.Info("a connect was refused: the user signed in as another subject than the OIDC caller's", "import", p.Import, "reason", reason)
		page(w, http.StatusForbidden, "Not connected", "You signed in as a different user than the agent's. Nothing was connected. "+
			"Ask your agent to try again to get a new link, and sign in as the same user the agent acts for.")
		return false
	}
	h.Log.Info("a connect was refused: the sign-in's ID token could not be verified", "import", p.Import, "reason", reason)
	page(w, http.StatusBadGateway, "Not connected", "The operator could not verify who signed in (the authorization server's ID token). Nothing was connected. Ask your agent to try again to get a new link.")
	return false
}

// checkSignIn verifies the sign-in's ID token and that it names the OIDC caller's
// subject; the import must still have the caller's issuer as its authorization server.
func (h *Handler) checkSignIn(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, oc *oauthClient, p *pending, tok *oauth2.Token) error {
	issuer, subject, _ := oidcCaller(p.Caller)
	if why := checkOIDCCaller(imp, issuer); why != "" {
		return errors.New(why)
	}
	md, err := Discover(ctx, oc.http, "", oc.issuer)
	if err != nil {
		return err
	}
	raw, _ := tok.Extra("id_token").(string)
	return verifyIDToken(ctx, raw, idTokenCheck{issuer: oc.issuer, clientID: oc.config.ClientID, nonce: p.IDNonce, subject: subject, jwksURL: md.JWKSURI, http: oc.http})
}

// redactedError is an OAuth error without the response body, which may echo a code.
func redactedError(err error) string {
	var re interface{ Error() string }
	if errors.As(err, &re) {
		msg := re.Error()
		if i := strings.Index(msg, "Response:"); i >= 0 {
			return msg[:i]
		}
		return msg
	}
	return "unknown"
}

func (h *Handler) linkFailed(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errLinkUnknown), errors.Is(err, errLinkUsed), errors.Is(err, errLinkExpired):
		page(w, http.StatusBadRequest, "Link not valid", err.Error())
	case errors.Is(err, ErrNoKeys):
		page(w, http.StatusServiceUnavailable, "Cannot connect", "The operator cannot store connected accounts now (its key Secret is missing); ask the cluster's administrators.")
	default:
		h.Log.Error(err, "a connect link failed")
		page(w, http.StatusServiceUnavailable, "Cannot connect", "Something failed on the operator's side; ask your agent to try again.")
	}
}

func (h *Handler) importOf(r *http.Request, importRef string) (*cantusv1alpha1.RemoteToolImport, error) {
	namespace, name, _ := strings.Cut(importRef, "/")
	imp := &cantusv1alpha1.RemoteToolImport{}
	if err := h.Client.Get(r.Context(), types.NamespacedName{Namespace: namespace, Name: name}, imp); err != nil {
		return nil, errors.New("the import is not there any more")
	}
	if imp.Spec.CallerCredentials == nil || imp.Spec.CallerCredentials.Connect == nil {
		return nil, errors.New("the import no longer uses connect mode")
	}
	return imp, nil
}

// importClient is the import named and the OAuth client that connects its callers at
// its authorization server, sending them back to redirectURI.
func (h *Handler) importClient(r *http.Request, importRef, redirectURI string) (*cantusv1alpha1.RemoteToolImport, *oauthClient, error) {
	imp, err := h.importOf(r, importRef)
	if err != nil {
		return nil, nil, err
	}
	oc, err := h.clientFor(r.Context(), imp, redirectURI)
	if err != nil {
		return nil, nil, err
	}
	return imp, oc, nil
}

// clientMetadata is ConnectClientPath: the operator's Client ID Metadata Document, a
// public client whose client_id is the document's own URL.
func (h *Handler) clientMetadata(w http.ResponseWriter, _ *http.Request) {
	if h.BaseURL == "" {
		http.NotFound(w, nil)
		return
	}
	base := strings.TrimSuffix(h.BaseURL, "/")
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"client_id":                  h.clientMetadataURL(),
		"client_name":                "cantus operator",
		"redirect_uris":              []string{base + adapterconfig.ConnectCallback},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
}

// disconnect is ConnectDisconnect: a caller, authenticated like at the catalog (its own
// token for the catalog's audience), forgets its account for one import (?import=
// namespace/name) or for all, revoking the tokens at the authorization server where it
// offers revocation (RFC 7009).
func (h *Handler) disconnect(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	user, err := h.Callers.Authenticate(ctx, bearerToken(r))
	if err != nil {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "a Kubernetes bearer token for the catalog's audience is required"})
		return
	}
	namespace, name, ok := splitServiceAccountUser(user.Username)
	if !ok || user.UID == "" {
		writeJSON(w, http.StatusForbidden, map[string]any{"error": "only service-account callers connect accounts"})
		return
	}
	caller := adapterconfig.ServiceAccountCaller(namespace+"/"+name, user.UID)
	list := &corev1.SecretList{}
	if err := h.Store.Client.List(ctx, list, client.InNamespace(h.Store.Namespace), client.MatchingLabels{LabelAccount: kindAccount, LabelCallerUID: user.UID}); err != nil {
		h.Log.Error(err, "list a caller's connected accounts")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "could not list the accounts; try again"})
		return
	}
	only := r.URL.Query().Get("import")
	disconnected, revoked := 0, 0
	for i := range list.Items {
		secret := &list.Items[i]
		ref := secret.Labels[LabelImportNamespace] + "/" + secret.Labels[LabelImport]
		if (only != "" && ref != only) || secret.Name != AccountName(ref, caller) {
			continue
		}
		if h.revokeAccount(r, ref, secret) {
			revoked++
		}
		if err := h.Store.forget(ctx, secret); err != nil {
			h.Log.Error(err, "forget a connected account")
			continue
		}
		disconnected++
	}
	h.Log.Info("a caller disconnected", "accounts", disconnected, "revoked", revoked)
	writeJSON(w, http.StatusOK, map[string]any{"disconnected": disconnected, "revoked": revoked})
}

// revokeAccount revokes the account's token at its authorization server, when the
// account can be read and the server offers revocation.
func (h *Handler) revokeAccount(r *http.Request, importRef string, secret *corev1.Secret) bool {
	var acct Account
	if err := h.Store.open(r.Context(), secret, &acct); err != nil || acct.RevokeURL == "" {
		return false
	}
	_, oc, err := h.importClient(r, importRef, "")
	if err != nil {
		return false
	}
	oc.config.ClientID = acct.ClientID
	if err := oc.revoke(r.Context(), &acct); err != nil {
		h.Log.Info("revoking a disconnected account's token failed", "import", importRef, "error", err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// link is LinkPath: POST ?import=<namespace>/<name>, authenticated like the catalog (the
// caller's own token for its audience), answers a ConnectTokenResponse with the
// caller's connect link, for a service account of the import's namespace.
func (h *Handler) link(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	user, err := h.Callers.Authenticate(ctx, bearerToken(r))
	if err != nil {
		refuse(w, http.StatusUnauthorized, "unauthorized", "a Kubernetes bearer token for the catalog's audience is required")
		return
	}
	namespace, name, ok := splitServiceAccountUser(user.Username)
	importRef := r.URL.Query().Get("import")
	importNS, _, _ := strings.Cut(importRef, "/")
	if !ok || user.UID == "" || importNS != namespace {
		refuse(w, http.StatusForbidden, "forbidden", "a service account gets a link only for an import of its own namespace")
		return
	}
	imp, err := h.importOf(r, importRef)
	if err != nil {
		refuse(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	h.connectRequired(w, r, imp, adapterconfig.ConnectTokenRequest{Import: importRef, Caller: adapterconfig.ServiceAccountCaller(namespace+"/"+name, user.UID)}, false)
}
