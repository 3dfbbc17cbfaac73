package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/policy"
)

// probeTokenEarly is how long before it expires a probe token is replaced.
const probeTokenEarly = 30 * time.Second

// checkProbeTokenEndpoint refuses an import whose probe would send the operator's client
// secret to a token endpoint the ToolSourcePolicies do not allow, or over plain http away
// from loopback.
func checkProbeTokenEndpoint(ctx context.Context, checker *policy.Checker, imp *cantusv1alpha1.RemoteToolImport, allowed policy.Decision) policy.Decision {
	grant := probeGrant(imp)
	if grant == nil {
		return allowed
	}
	if d := checker.CheckTokenEndpoint(ctx, grant.TokenEndpoint); !d.Allowed {
		return policy.Decision{Reason: cantusv1alpha1.ReasonProbeTokenEndpointNotAllowed, Message: fmt.Sprintf(
			"spec.probeCredentials.clientCredentials.tokenEndpoint is not allowed (%s): %s", d.Reason, d.Message)}
	}
	return allowed
}

func probeGrant(imp *cantusv1alpha1.RemoteToolImport) *cantusv1alpha1.ClientCredentialsGrant {
	if imp.Spec.ProbeCredentials == nil {
		return nil
	}
	return imp.Spec.ProbeCredentials.ClientCredentials
}

// probeSecretRefs names the probe's client secret for the Secret index, so that a
// rotated secret re-runs the import's reconcile.
func probeSecretRefs(imp *cantusv1alpha1.RemoteToolImport) []string {
	if grant := probeGrant(imp); grant != nil {
		return []string{grant.ClientSecret.Name}
	}
	return nil
}

// explainProbeIdentity says, when the remote of an import whose calls carry each
// caller's credential refuses the operator's probe, that the probe needs a credential of
// its own, and where to give it one.
func explainProbeIdentity(imp *cantusv1alpha1.RemoteToolImport, err error) {
	if imp.Spec.CallerCredentials == nil || mcpclient.ReasonOf(err) != mcpclient.ReasonUnauthorized {
		return
	}
	how := "give it spec.probeCredentials.clientCredentials (an OAuth client of the operator's own) or a key in spec.headers"
	if cc := imp.Spec.CallerCredentials; cc.Connect != nil {
		how = "give it spec.callerCredentials.connect.probeIdentity (a token Secret, or a service account that connected its own account), spec.probeCredentials.clientCredentials or a key in spec.headers"
		if cc.Connect.ProbeIdentity != nil {
			how = "the credential of spec.callerCredentials.connect.probeIdentity was refused: check that its user may read the remote"
		}
	}
	if probeGrant(imp) != nil {
		how = "the token of spec.probeCredentials was refused: check that its client may read the remote (audience, scopes)"
	}
	setCondition(imp, cantusv1alpha1.ConditionHandshakeSucceeded, metav1.ConditionFalse, cantusv1alpha1.ReasonProbeIdentityRequired, fmt.Sprintf(
		"the remote refused the operator's probe: it wants a credential even to list its tools, and callers' credentials are never used to probe; %s (%s)",
		how, clip.Line(err.Error(), 512)))
}

// probeTokens are the tokens the operator obtained for its own probes, one per import,
// reused until shortly before they expire and replaced when the grant's inputs change.
type probeTokens struct {
	remembered[probeToken]
}

type probeToken struct {
	inputs string // a digest of what the token was obtained with, the secret included
	value  string
	expiry time.Time
}

func (p *probeTokens) get(key types.NamespacedName, inputs string, now time.Time) (string, bool) {
	t, ok := p.load(key)
	if !ok || t.inputs != inputs || (!t.expiry.IsZero() && now.After(t.expiry.Add(-probeTokenEarly))) {
		return "", false
	}
	return t.value, true
}

// probeToken returns the bearer token of the import's probe: cached, or obtained with
// the client credentials grant through the policy's dialer. Errors name the endpoint
// and the client, and never quote what the token endpoint answered.
func (r *RemoteToolImportReconciler) probeToken(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, checker *policy.Checker, timeout time.Duration) (string, error) {
	grant := probeGrant(imp)
	secret, err := secretValue(ctx, r.Client, imp.Namespace, grant.ClientSecret)
	if err != nil {
		return "", fmt.Errorf("spec.probeCredentials.clientCredentials.clientSecret: %w", err)
	}
	key, inputs := types.NamespacedName{Namespace: imp.Namespace, Name: imp.Name}, grantInputs(imp, grant, secret)
	if token, ok := r.probeTokens.get(key, inputs, r.now()); ok {
		return token, nil
	}
	cfg := clientcredentials.Config{
		ClientID: grant.ClientID, ClientSecret: strings.TrimSpace(secret), TokenURL: grant.TokenEndpoint,
		Scopes: grant.Scopes, AuthStyle: oauth2.AuthStyleInHeader,
		EndpointParams: url.Values{"resource": {imp.Spec.URL}},
	}
	if grant.Audience != "" {
		cfg.EndpointParams.Set("audience", grant.Audience)
	}
	// A transport of its own (the policy's dialer, no proxy), used once per token
	// lifetime: its connection is closed afterwards rather than left idle.
	transport := &http.Transport{DialContext: checker.DialContext, Proxy: nil, TLSHandshakeTimeout: timeout}
	defer transport.CloseIdleConnections()
	hc := &http.Client{
		Timeout:       timeout,
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	token, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, hc))
	if err != nil {
		return "", fmt.Errorf("the token endpoint %s did not give client %q a token for the probe: %s",
			grant.TokenEndpoint, grant.ClientID, grantFailure(err))
	}
	r.probeTokens.store(key, probeToken{inputs: inputs, value: token.AccessToken, expiry: token.Expiry})
	return token.AccessToken, nil
}

// grantFailure says why a grant failed: the OAuth error code and HTTP status, never the
// body, which a hostile endpoint could fill with anything.
func grantFailure(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return fmt.Sprintf("%s (HTTP %d)", clip.Line(re.ErrorCode, 64), re.Response.StatusCode)
		}
		return fmt.Sprintf("HTTP %d", re.Response.StatusCode)
	}
	return clip.Line(err.Error(), 256)
}

// grantInputs is a digest of everything the probe's token depends on.
func grantInputs(imp *cantusv1alpha1.RemoteToolImport, grant *cantusv1alpha1.ClientCredentialsGrant, secret string) string {
	sum := sha256.Sum256([]byte(strings.Join(append([]string{imp.Spec.URL, grant.TokenEndpoint, grant.ClientID, secret, grant.Audience}, grant.Scopes...), "\x00")))
	return hex.EncodeToString(sum[:])
}
