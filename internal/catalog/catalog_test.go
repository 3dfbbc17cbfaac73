package catalog

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

var (
	k8sClient client.Client
	clientset *kubernetes.Clientset
)

func TestMain(m *testing.M) {
	testenv.ExitUnderShort()
	env, cfg, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if k8sClient, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err == nil {
		clientset, err = kubernetes.NewForConfig(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// A service account allowed to list SkillServers in one namespace sees only that
// namespace, over the JSON API and over MCP; no token is a 401.
func TestCatalogShowsEachCallerOnlyTheNamespacesTheyMayList(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	teamA, teamB := namespace(t, "team-a"), namespace(t, "team-b")
	publishedServer(t, teamA, "books")
	publishedServer(t, teamB, "payroll")
	token := serviceAccountAllowedIn(t, teamA, "agent")

	srv := httptest.NewTLSServer(NewHandler(&Catalog{Reader: k8sClient}, &Authorizer{Client: k8sClient}, logr.Discard()))
	t.Cleanup(srv.Close)
	httpClient := srv.Client()

	t.Run("no token", func(t *testing.T) {
		g := NewWithT(t)
		status, _ := get(t, httpClient, srv.URL+"/v1/servers", "")
		g.Expect(status).To(Equal(http.StatusUnauthorized))
		status, _ = get(t, httpClient, srv.URL+"/v1/servers", "not-a-token")
		g.Expect(status).To(Equal(http.StatusUnauthorized))
	})
	t.Run("a token for another audience", func(t *testing.T) {
		g := NewWithT(t)
		apiToken := tokenFor(t, teamA, "agent")
		serverToken := tokenFor(t, teamA, "agent", "books."+teamA+".skillserver.cantus.dev")
		for name, other := range map[string]string{"the API server's audience": apiToken, "a SkillServer's audience": serverToken} {
			status, body := get(t, httpClient, srv.URL+"/v1/servers", other)
			g.Expect(status).To(Equal(http.StatusUnauthorized), name)
			g.Expect(body).To(ContainSubstring("--audience cantus.dev/catalog"), name)
		}
	})
	t.Run("service account of team-a", func(t *testing.T) {
		g := NewWithT(t)
		status, body := get(t, httpClient, srv.URL+"/v1/servers", token)
		g.Expect(status).To(Equal(http.StatusOK), body)
		var listed struct{ Servers []Server }
		g.Expect(json.Unmarshal([]byte(body), &listed)).To(Succeed())
		g.Expect(listed.Servers).To(HaveLen(1))
		g.Expect(listed.Servers[0].Ref()).To(Equal(teamA + "/books"))
		g.Expect(listed.Servers[0].Ready).To(BeTrue())
		g.Expect(listed.Servers[0].Tools[0].InputSchema).To(MatchJSON(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`))

		status, body = get(t, httpClient, srv.URL+"/v1/tools?q=catalog+title", token)
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(body).To(ContainSubstring(`"tool": "search_book"`))
		g.Expect(body).NotTo(ContainSubstring("pay_slip"))

		status, body = get(t, httpClient, srv.URL+"/v1/servers/"+teamA+"/books/tools/search_book?format=anthropic", token)
		g.Expect(status).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring(`"input_schema"`))

		status, _ = get(t, httpClient, srv.URL+"/v1/servers/"+teamB+"/payroll/tools/pay_slip", token)
		g.Expect(status).To(Equal(http.StatusNotFound), "another namespace's server is not even named")
	})
	t.Run("the same catalog over MCP", func(t *testing.T) {
		g := NewWithT(t)
		c := catalogClient(t, ctx, srv, token)
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "list_servers"}})
		g.Expect(err).NotTo(HaveOccurred())
		text := res.Content[0].(mcp.TextContent).Text
		g.Expect(text).To(ContainSubstring(teamA))
		g.Expect(text).NotTo(ContainSubstring(teamB))

		res, err = c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "get_tool",
			Arguments: map[string]any{"server": teamA + "/books", "name": "search_book", "format": "openai"}}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.IsError).To(BeFalse())
		g.Expect(res.Content[0].(mcp.TextContent).Text).To(ContainSubstring(`"parameters"`))

		res, err = c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "pay"}}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Content[0].(mcp.TextContent).Text).NotTo(ContainSubstring("pay_slip"))
	})
	t.Run("MCP without a token", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", nil)
		resp, err := httpClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	})
}

// A server's authorization rules decide which of its tools each caller sees in the
// catalog, as its adapter decides which it may call: by service account and by CEL over
// the token's claims.
func TestCatalogShowsEachCallerOnlyTheToolsItMayCall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "reading-room")
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "room"},
		Spec: cantusv1alpha1.SkillServerSpec{
			Skills: []cantusv1alpha1.Skill{
				{Name: "search_book", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}},
				{Name: "checkout_book", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}},
				{Name: "stamp_card", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}},
			},
			Auth: &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}},
			Authorization: &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
				{Tools: []string{"search_*"}, ServiceAccounts: []string{ns + "/*"}},
				{Tools: []string{"checkout_*"}, ServiceAccounts: []string{ns + "/librarian"}},
				{Tools: []string{"stamp_*"}, When: "claims.sub.endsWith(':librarian')"},
			}},
		},
	}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	ss.Status.Tools = []cantusv1alpha1.ServedTool{{Name: "search_book", Source: "skill"}, {Name: "checkout_book", Source: "skill"}, {Name: "stamp_card", Source: "skill"}}
	g.Expect(k8sClient.Status().Update(ctx, ss)).To(Succeed())

	srv := httptest.NewTLSServer(NewHandler(&Catalog{Reader: k8sClient}, &Authorizer{Client: k8sClient}, logr.Discard()))
	t.Cleanup(srv.Close)
	toolsSeenBy := func(token string) []string {
		status, body := get(t, srv.Client(), srv.URL+"/v1/servers", token)
		g.Expect(status).To(Equal(http.StatusOK), body)
		var listed struct{ Servers []Server }
		g.Expect(json.Unmarshal([]byte(body), &listed)).To(Succeed())
		g.Expect(listed.Servers).To(HaveLen(1))
		var names []string
		for _, tool := range listed.Servers[0].Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	g.Expect(toolsSeenBy(serviceAccountAllowedIn(t, ns, "visitor"))).To(ConsistOf("search_book"))
	g.Expect(toolsSeenBy(serviceAccountAllowedIn(t, ns, "librarian"))).To(ConsistOf("search_book", "checkout_book", "stamp_card"))
}

func namespace(t *testing.T, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// publishedServer creates a SkillServer whose status says it serves one tool, as the
// operator would have written it.
func publishedServer(t *testing.T, ns, name string) {
	ctx := context.Background()
	tool := map[string]string{"books": "search_book", "payroll": "pay_slip"}[name]
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: cantusv1alpha1.SkillServerSpec{Skills: []cantusv1alpha1.Skill{{
			Name: tool, Description: "Search the catalog by title.",
			InputSchema: &cantusv1alpha1.ToolInputSchema{Type: "object", Raw: []byte(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)},
			Template:    &cantusv1alpha1.TemplateBackend{Text: "x"},
		}}},
	}
	if err := k8sClient.Create(ctx, ss); err != nil {
		t.Fatal(err)
	}
	ss.Status.URL = "http://" + name + "." + ns + ".svc.cluster.local:8765/mcp"
	ss.Status.Tools = []cantusv1alpha1.ServedTool{{Name: tool, Source: "skill"}}
	ss.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Reconciled", LastTransitionTime: metav1.Now()}}
	if err := k8sClient.Status().Update(ctx, ss); err != nil {
		t.Fatal(err)
	}
}

// serviceAccountAllowedIn makes a service account that may list SkillServers in ns and
// returns a real token for it (TokenRequest) for the catalog's audience.
func serviceAccountAllowedIn(t *testing.T, ns, name string) string {
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "list-skillservers"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"cantus.dev"}, Resources: []string{"skillservers"}, Verbs: []string{"get", "list"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-lists-skillservers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := k8sClient.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return tokenFor(t, ns, name, DefaultAudience)
}

// tokenFor returns a real token of an existing service account for the audiences (the
// API server's own when none).
func tokenFor(t *testing.T, ns, name string, audiences ...string) string {
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: audiences}}
	tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token request: %v", err)
	}
	return tr.Status.Token
}

func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func catalogClient(t *testing.T, ctx context.Context, srv *httptest.Server, token string) *mcpclient.Client {
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}}}
	trans, err := transport.NewStreamableHTTP(srv.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}), transport.WithHTTPBasicClient(httpClient))
	if err != nil {
		t.Fatal(err)
	}
	c := mcpclient.NewClient(trans, mcpclient.WithProtocolVersion("2025-06-18"))
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: "2025-06-18", ClientInfo: mcp.Implementation{Name: "t", Version: "0"}}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}
