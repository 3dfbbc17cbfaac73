package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/controller"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/event"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/saissuer"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/mcpkit"
	"github.com/cantus-dev/cantus-operator/internal/workload/local"
)

// Agents call as their own service accounts: real tokens from TokenRequest, checked by
// the real adapter (local runtime) against the keys the operator read from the real API
// server, and each caller sees and calls only what the rules allow it.
func TestServiceAccountTokensAreCheckedAndAuthorized(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, otherNS := kubekit.NewNamespace(t, k8sClient), kubekit.NewNamespace(t, k8sClient)
	for _, sa := range []struct{ ns, name string }{{ns, "visitor"}, {ns, "librarian"}, {otherNS, "auditor"}} {
		g.Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.ns, Name: sa.name}})).To(Succeed())
	}
	issuer := &saissuer.Watcher{Client: discovery.NewDiscoveryClientForConfigOrDie(restConfig).RESTClient(), Every: time.Hour}
	changed := make(chan event.GenericEvent, 1)
	revocations := &saissuer.Revocations{Config: restConfig, MaxTokenLifetime: saissuer.DefaultMaxTokenLifetime, Every: 200 * time.Millisecond,
		OnChange: func() {
			select {
			case changed <- event.GenericEvent{Object: &cantusv1alpha1.SkillServer{}}:
			default:
			}
		}}
	watchCtx, stopWatching := context.WithCancel(ctx)
	t.Cleanup(stopWatching)
	go func() { _ = revocations.Start(watchCtx) }()
	startManagerVerifying(t, local.New(nil), &controller.MCPVerifier{}, func(r *controller.SkillServerReconciler) {
		r.Issuer, r.Revocations, r.IssuerChanged = issuer, revocations, changed
	})

	ss := kubekit.NewSkillServer(ns, "room",
		kubekit.TemplateSkill("search_book", "found: {{ .title }}"),
		kubekit.TemplateSkill("checkout_book", "checked out: {{ .title }}"),
		kubekit.TemplateSkill("renew_book", "renewed: {{ .title }}"),
		kubekit.TemplateSkill("audit_log", "log"))
	ss.Spec.Auth = &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}}
	ss.Spec.Authorization = &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
		{Tools: []string{"search_*"}, ServiceAccounts: []string{ns + "/*"}},
		{Tools: []string{"checkout_book"}, ServiceAccounts: []string{ns + "/librarian"}},
		{Tools: []string{"audit_*"}, Groups: []string{"system:serviceaccounts:" + otherNS}},
		{Tools: []string{"renew_book"}, When: "claims.sub.endsWith(':librarian')"},
	}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "room"), 30*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionVerified, metav1.ConditionTrue, cantusv1alpha1.ReasonAsksForToken))
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "room")).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "room")()
	url, audience := got.Status.URL, render.DefaultServiceAccountAudience(ss)

	visitor := serviceAccountToken(t, ns, "visitor", audience)
	librarian := serviceAccountToken(t, ns, "librarian", audience)
	auditor := serviceAccountToken(t, otherNS, "auditor", audience)

	t.Run("each caller lists only the tools it may call", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(listToolNames(ctx, url, visitor)).To(Equal([]string{"search_book"}))
		g.Expect(listToolNames(ctx, url, librarian)).To(Equal([]string{"checkout_book", "renew_book", "search_book"}))
		g.Expect(listToolNames(ctx, url, auditor)).To(Equal([]string{"audit_log"}))
	})
	t.Run("a call outside the rules is refused, inside them answered", func(t *testing.T) {
		g := NewWithT(t)
		res, err := callToolAs(ctx, url, "search_book", visitor)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mcpkit.ResultText(res)).To(Equal("found: Dune"))

		res, err = callToolAs(ctx, url, "checkout_book", visitor)
		g.Expect(refusal(res, err)).To(And(ContainSubstring("checkout_book"), ContainSubstring("not allowed")))
		g.Expect(refusal(res, err)).NotTo(Or(ContainSubstring("librarian"), ContainSubstring(ns+"/")), "the refusal names neither the rules nor other callers")

		res, err = callToolAs(ctx, url, "checkout_book", librarian)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.IsError).To(BeFalse(), mcpkit.ResultText(res))
		g.Expect(mcpkit.ResultText(res)).To(Equal("checked out: Dune"))
	})
	t.Run("tokens for another audience or of the API server are refused", func(t *testing.T) {
		g := NewWithT(t)
		for name, token := range map[string]string{
			"another server's audience": serviceAccountToken(t, ns, "librarian", "other.default.skillserver.cantus.dev"),
			"the API server's audience": serviceAccountToken(t, ns, "librarian"),
		} {
			_, err := listToolNames(ctx, url, token)
			g.Expect(err).To(MatchError(Or(ContainSubstring("401"), ContainSubstring("authorization required"))), name)
		}
	})
	t.Run("a client without a token is told where to find the server's metadata", func(t *testing.T) {
		g := NewWithT(t)
		_, err := listToolNames(ctx, url, "")
		var needsAuth *transport.AuthorizationRequiredError
		g.Expect(errors.As(err, &needsAuth)).To(BeTrue(), "mcp-go reads WWW-Authenticate: %v", err)
		g.Expect(needsAuth.ResourceMetadataURL).To(HaveSuffix("/.well-known/oauth-protected-resource"))
	})
	t.Run("a deleted service account's tokens are refused", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(listToolNames(ctx, url, visitor)).To(Equal([]string{"search_book"}))
		g.Expect(k8sClient.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "visitor"}})).To(Succeed())
		g.Eventually(func() error {
			_, err := listToolNames(ctx, url, visitor)
			return err
		}, 30*time.Second, 200*time.Millisecond).Should(MatchError(Or(ContainSubstring("401"), ContainSubstring("authorization required"))))
		g.Expect(listToolNames(ctx, url, librarian)).To(Equal([]string{"checkout_book", "renew_book", "search_book"}), "other accounts' tokens still pass")
	})
}

// serviceAccountToken asks the API server for a token of the account (TokenRequest), for
// the audiences (the API server's own when none).
func serviceAccountToken(t *testing.T, ns, name string, audiences ...string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: audiences}}
	if err := k8sClient.SubResource("token").Create(context.Background(), sa, req); err != nil {
		t.Fatalf("token request for %s/%s: %v", ns, name, err)
	}
	return req.Status.Token
}

func bearer(token string) map[string]string {
	if token == "" {
		return nil
	}
	return map[string]string{"Authorization": "Bearer " + token}
}

// listToolNames lists the tools a caller with this token sees, sorted.
func listToolNames(ctx context.Context, url, token string) ([]string, error) {
	var names []string
	err := mcpkit.WithClient(ctx, url, cantusv1alpha1.TransportStreamableHTTP.String(), bearer(token), func(ctx context.Context, c *client.Client) error {
		res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		return nil
	})
	slices.Sort(names)
	return names, err
}

func callToolAs(ctx context.Context, url, tool, token string) (*mcp.CallToolResult, error) {
	return mcpkit.CallTool(ctx, url, "streamable-http", tool, map[string]any{"title": "Dune"}, bearer(token))
}

// refusal is what a refused call said, whether as a JSON-RPC error or a tool error.
func refusal(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return err.Error()
	}
	if res.IsError {
		return mcpkit.ResultText(res)
	}
	return "answered: " + mcpkit.ResultText(res)
}
