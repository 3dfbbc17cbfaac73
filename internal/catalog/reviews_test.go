package catalog

import (
	"context"
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
