package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
)

// oidcGatewayAudience is the audience the OIDC gateway's callers' tokens are for.
const oidcGatewayAudience = "gateway-oidc"

// startOIDCGateway adds to the world a gateway whose callers sign in at the test token
// service (spec.auth.oidc), which is also the import's authorization server: one
// identity provider for both. It returns the gateway's URL.
func (w *connectWorld) startOIDCGateway(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8sClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "idp-ca"},
		Data: map[string]string{"ca.crt": string(w.ts.CAPEM())}})).To(Succeed())
	gw := kubekit.NewSkillServer(w.ns, "gw-oidc")
	gw.Spec.Auth = &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: w.ts.URL(), Audiences: []string{oidcGatewayAudience},
		CABundle: &cantusv1alpha1.OIDCCABundle{ConfigMapRef: cantusv1alpha1.ConfigMapKeyRef{Name: "idp-ca", Key: "ca.crt"}}}}
	gw.Spec.Pod = &cantusv1alpha1.PodOverrides{ServiceAccountName: "gateway"}
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "whoami"}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	url := ""
	g.Eventually(func() string {
		got, err := kubekit.GetSkillServer(ctx, k8sClient, w.ns, "gw-oidc")()
		if err != nil {
			return err.Error()
		}
		if len(got.Status.Tools) == 0 || got.Status.URL == "" {
			b, _ := yaml.Marshal(got.Status.Conditions)
			return "not serving whoami yet: " + string(b)
		}
		url = got.Status.URL
		return ""
	}, 60*time.Second, 200*time.Millisecond).Should(BeEmpty())
	return url
}

// oidcCallerToken is an access token of the token service for the OIDC gateway's
// audience, as user: what an agent acting for the user got by signing the user in
// (code flow with PKCE, as a public client of its own).
func (w *connectWorld) oidcCallerToken(ctx context.Context, t *testing.T, user, password string) string {
	t.Helper()
	const redirect = "http://127.0.0.1:1/agent-callback"
	w.ts.SetClient(tokenservice.Client{ID: "agent-app", Public: true, RedirectURIs: []string{redirect}, Audience: []string{oidcGatewayAudience}})
	cfg := oauth2.Config{ClientID: "agent-app", RedirectURL: redirect,
		Endpoint: oauth2.Endpoint{AuthURL: w.ts.AuthorizationEndpoint(), TokenURL: w.ts.TokenEndpoint(), AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	back, err := w.ts.Authorize(ctx, nil, cfg.AuthCodeURL("agent-state", oauth2.S256ChallengeOption(verifier)), user, password)
	if err != nil {
		t.Fatalf("sign the agent's user in: %v", err)
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, w.ts.HTTPClient()), back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("the agent's code exchange: %v", err)
	}
	return tok.AccessToken
}

// refusedSignIns is cantus_connect_refused_sign_ins_total for the world's whoami import
// and reason.
func refusedSignIns(t *testing.T, ns, reason string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "cantus_connect_refused_sign_ins_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == ns && labels["import"] == "whoami" && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// An OIDC caller whose identity provider is the import's authorization server connects
// its account by signing in as itself: the sign-in's ID token names the caller's
// subject, and the retry reaches the remote as that user.
func TestCallerCredentials_ConnectOIDCCallerSignsInAsItself(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := startConnectWorld(t)
	gatewayURL := w.startOIDCGateway(t)
	caller := w.oidcCallerToken(ctx, t, "alice", "wonderland")

	told, err := callAs(ctx, gatewayURL, caller)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(told).To(ContainSubstring(adapterconfig.ConnectStartPath), "the OIDC caller is told where to connect")
	status, page := w.openConnectLink(ctx, t, told, "alice", "wonderland")
	g.Expect(status).To(Equal(http.StatusOK), page)
	g.Expect(page).To(ContainSubstring("Connected"))
	g.Expect(tokenAccountSecrets(t, w.opsNS)).To(HaveLen(1))

	answer, err := callAs(ctx, gatewayURL, caller)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(answer).To(HavePrefix("remote saw subject=alice"), "after connecting, the remote sees the caller's own user")
}

// An OIDC caller's link opened by someone who signs in as another user connects
// nothing: the page says so, the link is used up, the refusal is logged without
// tokens, and the caller is given a new link.
func TestCallerCredentials_ConnectOIDCCallerRefusesAnotherUsersSignIn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := startConnectWorld(t)
	gatewayURL := w.startOIDCGateway(t)
	caller := w.oidcCallerToken(ctx, t, "alice", "wonderland")

	told, err := callAs(ctx, gatewayURL, caller)
	g.Expect(err).NotTo(HaveOccurred())
	revocations := w.ts.Revocations()
	status, page := w.openConnectLink(ctx, t, told, "carol", "probe-pass")
	g.Expect(status).To(Equal(http.StatusForbidden), page)
	g.Expect(page).To(ContainSubstring("signed in as a different user than the agent"))
	g.Expect(tokenAccountSecrets(t, w.opsNS)).To(BeEmpty(), "nothing is stored")
	g.Expect(w.ts.Revocations()).To(BeNumerically(">", revocations), "the refused sign-in's tokens are revoked")
	g.Expect(w.logs.String()).To(ContainSubstring("another subject than the OIDC caller"))
	g.Expect(refusedSignIns(t, w.ns, "other_subject")).To(Equal(1.0), "the refusal is counted")
	for _, s := range append(w.ts.IssuedTokens(), w.ts.IssuedRefreshTokens()...) {
		if strings.Contains(w.logs.String(), s) {
			t.Fatal("a token shows in the operator's logs")
		}
	}

	again, err := callAs(ctx, gatewayURL, caller)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(ContainSubstring(adapterconfig.ConnectStartPath), "the caller still gets a link")
	g.Expect(connectLink.FindString(again)).NotTo(Equal(connectLink.FindString(told)), "the used link is not handed out again")
	g.Expect(w.remote.Calls("carol")).To(BeZero())
}
