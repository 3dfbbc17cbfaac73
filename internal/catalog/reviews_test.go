package catalog

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

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
