package connect

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// errNotReady: the import's authorization server has not been checked (yet).
var errNotReady = errors.New("the import's authorization server has not passed the operator's checks yet (see its status.callerCredentials)")

// oauthClient is how the operator speaks to an import's authorization server.
type oauthClient struct {
	config    oauth2.Config
	issuer    string
	revokeURL string
	resource  string
	// http dials only what the import's namespace's ToolSourcePolicy allows.
	http *http.Client
}

// clientFor is the OAuth client of the import: its pre-registered client, or the
// operator's Client ID Metadata Document (a public client), with the endpoints the
// import's status says were checked against the ToolSourcePolicies.
func (h *Handler) clientFor(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, redirectURI string) (*oauthClient, error) {
	spec := imp.Spec.CallerCredentials.Connect
	status := imp.Status.CallerCredentials
	if status == nil || !status.AuthorizationServerChecked || status.Endpoints == nil {
		return nil, errNotReady
	}
	hc, err := h.httpClientFor(ctx, imp.Namespace)
	if err != nil {
		return nil, err
	}
	out := &oauthClient{
		issuer: status.AuthorizationServer, revokeURL: status.Endpoints.Revocation, resource: imp.Spec.URL, http: hc,
		config: oauth2.Config{
			Endpoint:    oauth2.Endpoint{AuthURL: status.Endpoints.Authorization, TokenURL: status.Endpoints.Token, AuthStyle: oauth2.AuthStyleInParams},
			RedirectURL: redirectURI,
			Scopes:      slices.Clone(spec.Scopes),
		},
	}
	switch {
	case spec.Client != nil:
		out.config.ClientID = spec.Client.ClientID
		if ref := spec.Client.ClientSecret; ref != nil {
			secret, err := h.secretValue(ctx, imp.Namespace, ref)
			if err != nil {
				return nil, err
			}
			out.config.ClientSecret = secret
			out.config.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
		}
	case h.BaseURL != "" && status.Client == cantusv1alpha1.ConnectClientDynamicRegistration && status.Endpoints.Registration != "":
		rc, err := h.registered(ctx, hc, status.AuthorizationServer, status.Endpoints.Registration, h.callbackURL())
		if err != nil {
			return nil, err
		}
		out.config.ClientID, out.config.ClientSecret = rc.ClientID, rc.ClientSecret
		if rc.ClientSecret != "" {
			out.config.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
		}
	case h.BaseURL != "":
		out.config.ClientID = h.clientMetadataURL()
	default:
		return nil, errors.New("connect mode needs a pre-registered client (spec.callerCredentials.connect.client) or the operator's public base URL (--connect-base-url) for its Client ID Metadata Document")
	}
	return out, nil
}

func (h *Handler) clientMetadataURL() string {
	return strings.TrimSuffix(h.BaseURL, "/") + adapterconfig.ConnectClientPath
}

func (h *Handler) secretValue(ctx context.Context, namespace string, ref *cantusv1alpha1.SecretKeyRef) (string, error) {
	s := &corev1.Secret{}
	if err := h.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, s); err != nil {
		return "", fmt.Errorf("read the client secret of the import: %w", err)
	}
	v, ok := s.Data[ref.KeyOrDefault()]
	if !ok {
		return "", fmt.Errorf("the Secret %s has no key %q (spec.callerCredentials.connect.client.clientSecret)", ref.Name, ref.KeyOrDefault())
	}
	return string(v), nil
}

// withHTTPClient makes oauth2 use the client's HTTP client.
func (c *oauthClient) withHTTPClient(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, c.http)
}

// httpClientFor speaks to the authorization servers of imports in namespace: it dials
// only addresses the namespace's ToolSourcePolicy allows, checked at the moment of
// connecting (DialFor), uses no proxy and follows no redirect. HTTPClient, when set
// without DialFor, is used as it is (tests).
func (h *Handler) httpClientFor(ctx context.Context, namespace string) (*http.Client, error) {
	if h.DialFor == nil {
		if h.HTTPClient != nil {
			return h.HTTPClient, nil
		}
		return nil, errors.New("the operator has no policy-checked dialer for authorization servers")
	}
	dial, err := h.DialFor(ctx, namespace)
	if err != nil {
		return nil, fmt.Errorf("the ToolSourcePolicies of namespace %s: %w", namespace, err)
	}
	transport := &http.Transport{
		DialContext:         dial,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: h.RootCAs},
		TLSHandshakeTimeout: 10 * time.Second,
	}
	return &http.Client{Transport: transport, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}, nil
}

// authCodeURL is where the user is sent to authorize: code flow with S256 PKCE, the
// remote as the RFC 8707 resource, and, with an ID token nonce, OpenID Connect's nonce
// (the scopes then hold openid: see askForIDToken).
func (c *oauthClient) authCodeURL(state, verifier, idNonce string) string {
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", c.resource)}
	if idNonce != "" {
		opts = append(opts, oauth2.SetAuthURLParam("nonce", idNonce))
	}
	return c.config.AuthCodeURL(state, opts...)
}

// askForIDToken adds the openid scope, so that the sign-in returns an ID token that
// says who signed in.
func (c *oauthClient) askForIDToken() {
	if !slices.Contains(c.config.Scopes, "openid") {
		c.config.Scopes = append(c.config.Scopes, "openid")
	}
}

// exchange trades the authorization code for the caller's tokens.
func (c *oauthClient) exchange(ctx context.Context, code, verifier string) (*oauth2.Token, error) {
	tok, err := c.config.Exchange(ctx, code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", c.resource))
	if err != nil {
		return nil, fmt.Errorf("exchange the authorization code: %w", err)
	}
	return tok, nil
}

// refresh uses the account's refresh token; the authorization server may rotate it.
func (c *oauthClient) refresh(ctx context.Context, acct *Account) (*oauth2.Token, error) {
	cfg := c.config
	cfg.Endpoint.TokenURL = acct.TokenURL
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: acct.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return nil, fmt.Errorf("refresh the access token: %w", err)
	}
	return tok, nil
}

// refusedGrant says whether the authorization server refused the refresh token itself
// (the user must connect again) rather than failed to answer.
func refusedGrant(err error) bool {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return false
	}
	return re.ErrorCode == "invalid_grant" || re.ErrorCode == "invalid_client" || re.ErrorCode == "unauthorized_client" ||
		(re.ErrorCode == "" && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500)
}

// revoke revokes a token at the authorization server's RFC 7009 endpoint.
func (c *oauthClient) revoke(ctx context.Context, acct *Account) error {
	if acct.RevokeURL == "" {
		return nil
	}
	token, hint := acct.RefreshToken, "refresh_token"
	if token == "" {
		token, hint = acct.AccessToken, "access_token"
	}
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	if c.config.ClientSecret == "" {
		form.Set("client_id", c.config.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, acct.RevokeURL, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("revocation request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.config.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(c.config.ClientID), url.QueryEscape(c.config.ClientSecret))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("revoke at the authorization server: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revoke at the authorization server: HTTP %d", resp.StatusCode)
	}
	return nil
}
