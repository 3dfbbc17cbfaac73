package catalog

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"

	"github.com/cantus-dev/cantus-operator/internal/saissuer"
)

// countingAuthorizer is the real Authorizer (TokenReview and SubjectAccessReview on the
// test API server), counting the reviews it makes.
type countingAuthorizer struct {
	inner                       *Authorizer
	tokenReviews, accessReviews atomic.Int32
}

func (c *countingAuthorizer) Authenticate(ctx context.Context, token string) (authnv1.UserInfo, error) {
	c.tokenReviews.Add(1)
	return c.inner.Authenticate(ctx, token)
}

func (c *countingAuthorizer) MayList(ctx context.Context, user authnv1.UserInfo, namespace string) (bool, error) {
	c.accessReviews.Add(1)
	return c.inner.MayList(ctx, user, namespace)
}

// Repeated requests with one token cost one round of reviews; a flood of new (bad)
// tokens is answered 429 past the rate instead of spending the API budget.
func TestCatalogCachesDecisionsAndRateLimitsNewTokens(t *testing.T) {
	g := NewWithT(t)
	teamA := namespace(t, "cache-a")
	publishedServer(t, teamA, "books")
	publishedServer(t, namespace(t, "cache-b"), "payroll")
	token := serviceAccountAllowedIn(t, teamA, "agent")
	auth := &countingAuthorizer{inner: &Authorizer{Client: k8sClient}}
	srv := httptest.NewTLSServer(newHandler(&Catalog{Reader: k8sClient}, auth, logr.Discard()))
	t.Cleanup(srv.Close)

	for range 20 {
		status, body := get(t, srv.Client(), srv.URL+"/v1/servers", token)
		g.Expect(status).To(Equal(http.StatusOK), body)
	}
	g.Expect(auth.tokenReviews.Load()).To(Equal(int32(1)), "one TokenReview for 20 requests with one token")
	namespaces, err := (&Catalog{Reader: k8sClient}).Namespaces(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(auth.accessReviews.Load()).To(Equal(int32(len(namespaces))), "one SubjectAccessReview per namespace, once")

	limited := 0
	for i := range 3 * reviewBurst {
		status, _ := get(t, srv.Client(), srv.URL+"/v1/servers", "bad-token-"+strconv.Itoa(i))
		g.Expect(status).To(BeElementOf(http.StatusUnauthorized, http.StatusTooManyRequests))
		if status == http.StatusTooManyRequests {
			limited++
		}
	}
	g.Expect(limited).To(BeNumerically(">=", reviewBurst/2), "new tokens past the burst are refused with 429")
	g.Expect(auth.tokenReviews.Load()).To(BeNumerically("<", int32(1+3*reviewBurst)))

	// The cached token still works while new ones are limited.
	status, _ := get(t, srv.Client(), srv.URL+"/v1/servers", token)
	g.Expect(status).To(Equal(http.StatusOK))
}

// One client sending random tokens cannot use up the reviews of new tokens for everyone
// (issue 23, finding 7): its address gets a share of the rate, another client's new token
// is still reviewed, and an expired or malformed JWT costs no TokenReview.
func TestOneClientFloodingNewTokensDoesNotStarveOthers(t *testing.T) {
	g := NewWithT(t)
	teamA := namespace(t, "flood-a")
	publishedServer(t, teamA, "books")
	token := serviceAccountAllowedIn(t, teamA, "agent")
	auth := &countingAuthorizer{inner: &Authorizer{Client: k8sClient}}
	h := newHandler(&Catalog{Reader: k8sClient}, auth, logr.Discard())
	request := func(from, token string) int {
		r := httptest.NewRequest(http.MethodGet, "/v1/servers", nil)
		r.RemoteAddr = from + ":40000"
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}

	for i := range 3 * reviewBurst {
		g.Expect(request("10.0.0.66", "random-"+strconv.Itoa(i))).To(BeElementOf(http.StatusUnauthorized, http.StatusTooManyRequests))
	}
	g.Expect(auth.tokenReviews.Load()).To(BeNumerically("<=", clientReviewBurst+1), "one address gets only its share of reviews")
	g.Expect(request("10.0.0.7", token)).To(Equal(http.StatusOK), "another client's new token is still reviewed")

	before := auth.tokenReviews.Load()
	expired := unsignedJWT(map[string]any{"iss": "x", "exp": time.Now().Add(-time.Hour).Unix()})
	g.Expect(request("10.0.0.8", expired)).To(Equal(http.StatusUnauthorized))
	g.Expect(request("10.0.0.9", "e30.!!!.x")).To(Equal(http.StatusUnauthorized))
	g.Expect(auth.tokenReviews.Load()).To(Equal(before), "an expired or malformed JWT costs no TokenReview")
}

func unsignedJWT(claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(payload) + ".c2ln"
}

// RefuseOffline lets the counting wrapper pass the offline check through.
func (c *countingAuthorizer) RefuseOffline(ctx context.Context, token string) error {
	return c.inner.RefuseOffline(ctx, token)
}

// forgedJWT is a token with the claims given, signed by a key of its own under the
// header's kid and alg (alg "none": no signature at all).
func forgedJWT(t *testing.T, alg, kid string, claims map[string]any) string {
	t.Helper()
	header, _ := json.Marshal(map[string]string{"alg": alg, "kid": kid, "typ": "JWT"})
	payload, _ := json.Marshal(claims)
	signingInput := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	if alg == "none" {
		return signingInput + "."
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(signingInput))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// A service-account token that the cluster issuer did not sign, or that is not for the
// catalog's audience, is refused from the issuer's keys, before any TokenReview and
// without using the review budget (review R15). Before, each well-formed JWT with a
// future exp cost a TokenReview, and one client's share ran out on them.
func TestForgedServiceAccountTokensCostNoTokenReview(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	teamA := namespace(t, "forged-a")
	publishedServer(t, teamA, "books")
	issuer := &saissuer.Watcher{Client: clientset.Discovery().RESTClient(), Every: time.Hour}
	keys, err := issuer.Current(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	g.Expect(json.Unmarshal(keys.JWKS, &set)).To(Succeed())
	g.Expect(set.Keys).NotTo(BeEmpty())
	auth := &countingAuthorizer{inner: &Authorizer{Client: k8sClient, Issuer: issuer}}
	h := newHandler(&Catalog{Reader: k8sClient}, auth, logr.Discard())
	request := func(token string) int {
		r := httptest.NewRequest(http.MethodGet, "/v1/servers", nil)
		r.RemoteAddr = "10.0.1.66:40000"
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}

	claims := func(i int) map[string]any {
		return map[string]any{"iss": keys.URL, "aud": []string{DefaultAudience}, "sub": "system:serviceaccount:" + teamA + ":agent",
			"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "jti": strconv.Itoa(i)}
	}
	for i := range 3 * reviewBurst {
		for _, forged := range []string{
			forgedJWT(t, "RS256", set.Keys[0].Kid, claims(i)), // the cluster's kid, another key
			forgedJWT(t, "none", set.Keys[0].Kid, claims(i)),  // not signed
			forgedJWT(t, "RS256", "", claims(i)),              // no kid
		} {
			g.Expect(request(forged)).To(Equal(http.StatusUnauthorized), "a forged token is refused, not rate limited")
		}
	}
	g.Expect(request(forgedJWT(t, "none", "", map[string]any{"iss": "https://elsewhere.example.com", "exp": time.Now().Add(time.Hour).Unix()}))).
		To(Equal(http.StatusUnauthorized), "an unsigned token of any issuer is refused")
	serviceAccountAllowedIn(t, teamA, "agent")
	g.Expect(request(tokenFor(t, teamA, "agent"))).To(Equal(http.StatusUnauthorized), "a real token for the API server's audience")
	g.Expect(auth.tokenReviews.Load()).To(BeZero(), "no forged or misdirected token cost a TokenReview")

	g.Expect(request(tokenFor(t, teamA, "agent", DefaultAudience))).To(Equal(http.StatusOK), "the client's share is intact")
	g.Expect(auth.tokenReviews.Load()).To(Equal(int32(1)))
}

// Clients are counted by address for IPv4 and by /64 for IPv6, where one host holds a
// whole /64: two addresses in one /64 share one share, another /64 has its own.
func TestClientsInOneIPv6SlashSixtyFourShareOneReviewShare(t *testing.T) {
	g := NewWithT(t)
	teamA := namespace(t, "slash64-a")
	publishedServer(t, teamA, "books")
	token := serviceAccountAllowedIn(t, teamA, "agent")
	auth := &countingAuthorizer{inner: &Authorizer{Client: k8sClient}}
	h := newHandler(&Catalog{Reader: k8sClient}, auth, logr.Discard())
	request := func(from, token string) int {
		r := httptest.NewRequest(http.MethodGet, "/v1/servers", nil)
		r.RemoteAddr = "[" + from + "]:40000"
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i := range 3 * reviewBurst {
		from := "2001:db8:0:66::" + strconv.FormatInt(int64(i+1), 16)
		g.Expect(request(from, "random-"+strconv.Itoa(i))).To(BeElementOf(http.StatusUnauthorized, http.StatusTooManyRequests))
	}
	g.Expect(auth.tokenReviews.Load()).To(BeNumerically("<=", clientReviewBurst+1), "one /64 gets one share of reviews")
	g.Expect(request("2001:db8:0:67::1", token)).To(Equal(http.StatusOK), "another /64's new token is still reviewed")
}
