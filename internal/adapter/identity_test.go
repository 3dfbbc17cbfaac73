package adapter

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/go-logr/logr/funcr"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

const testIssuerURL = "https://kubernetes.default.svc"

// clusterKey stands in for the cluster's service-account signing key.
type clusterKey struct {
	key    *rsa.PrivateKey
	signer jose.Signer
}

func newClusterKey(t *testing.T, kid string) *clusterKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &clusterKey{key: key, signer: signer}
}

func (k *clusterKey) jwks(t *testing.T, kid string) json.RawMessage {
	t.Helper()
	data, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.key.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// token is a service-account token of ns/name for the audience, as TokenRequest makes.
func (k *clusterKey) token(t *testing.T, ns, name, audience string) string {
	t.Helper()
	raw, err := jwt.Signed(k.signer).Claims(jwt.Claims{
		Issuer: testIssuerURL, Subject: "system:serviceaccount:" + ns + ":" + name, Audience: jwt.Audience{audience},
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour)), IssuedAt: jwt.NewNumericDate(time.Now()),
	}).Claims(map[string]any{"kubernetes.io": map[string]any{"namespace": ns, "serviceaccount": map[string]any{"name": name}}}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func identityConfig(t *testing.T, key *clusterKey, rules ...adapterconfig.AuthorizationRule) *adapterconfig.Config {
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true,
		templateTool("search_book", objectSchema, "found"),
		templateTool("checkout_book", objectSchema, "checked out"))
	cfg.Auth = &adapterconfig.AuthConfig{
		Issuers: []adapterconfig.Issuer{{Kind: adapterconfig.IssuerServiceAccount, URL: testIssuerURL, Audiences: []string{"room"}, JWKS: key.jwks(t, "k1")}},
	}
	if len(rules) > 0 {
		cfg.Auth.Authorization = &adapterconfig.Authorization{Rules: rules}
	}
	return cfg
}

// logBuffer collects the adapter's log lines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) add(prefix, args string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, prefix+" "+args)
}

func (b *logBuffer) matching(fragment string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range b.lines {
		if strings.Contains(l, fragment) {
			out = append(out, l)
		}
	}
	return out
}

func listNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(testkit.Context(t, testTimeout), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func bearerHeader(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// A caller sees and calls only what the rules allow it; a refusal says so without
// naming rules or other callers, is audited and counted; the audit line never holds
// the arguments or the token.
func TestRulesFilterListingAndRefuseCalls(t *testing.T) {
	key := newClusterKey(t, "k1")
	logs := &logBuffer{}
	cfg := identityConfig(t, key,
		adapterconfig.AuthorizationRule{Tools: []string{"search_*"}, ServiceAccounts: []string{"agents/*"}},
		adapterconfig.AuthorizationRule{Tools: []string{"checkout_book"}, ServiceAccounts: []string{"agents/librarian"}})
	srv := serve(t, cfg, WithLogger(funcr.New(logs.add, funcr.Options{})))
	visitorToken := key.token(t, "agents", "visitor", "room")
	visitor := connect(t, srv.baseURL, protocol20250618, bearerHeader(visitorToken))
	librarian := connect(t, srv.baseURL, protocol20250618, bearerHeader(key.token(t, "agents", "librarian", "room")))

	if got := listNames(t, visitor); !slices.Equal(got, []string{"search_book"}) {
		t.Errorf("the visitor lists %v, want [search_book]", got)
	}
	if got := listNames(t, librarian); !slices.Equal(got, []string{"checkout_book", "search_book"}) {
		t.Errorf("the librarian lists %v, want both tools", got)
	}
	wantSuccess(t, callTool(t, visitor, "search_book", map[string]any{"secret_argument": "swordfish"}), "found")
	refused := callTool(t, visitor, "checkout_book", nil)
	wantToolError(t, refused, "not_allowed: ", `"checkout_book"`, "not allowed for this caller")
	if text := textOf(refused); strings.Contains(text, "librarian") || strings.Contains(text, "agents/") {
		t.Errorf("the refusal names a rule or another caller: %q", text)
	}
	wantSuccess(t, callTool(t, librarian, "checkout_book", nil), "checked out")

	audit := logs.matching(`"tool call"`)
	if len(audit) != 3 {
		t.Fatalf("want 3 audit lines, got %d: %v", len(audit), audit)
	}
	for _, want := range []string{`"caller"="serviceaccount:agents/visitor" "tool"="checkout_book" "outcome"="refused"`,
		`"caller"="serviceaccount:agents/librarian" "tool"="checkout_book" "outcome"="ok"`} {
		if len(logs.matching(want)) != 1 {
			t.Errorf("no audit line with %s in %v", want, audit)
		}
	}
	for _, line := range audit {
		if strings.Contains(line, "swordfish") || strings.Contains(line, visitorToken) || !strings.Contains(line, `"latencyMs"=`) || !strings.Contains(line, `"server"=`) {
			t.Errorf("audit line holds an argument or token, or lacks latency or server: %s", line)
		}
	}
	if body := metricsText(t, srv.Server); !strings.Contains(body, `cantus_adapter_tool_refusals_total{tool="checkout_book"} 1`) {
		t.Errorf("the refusal is not counted:\n%s", grepLines(body, "refusals"))
	}
}

// A 401 points OAuth clients at the protected resource metadata, which is served
// without a token.
func TestUnauthenticatedRequestsGetTheResourceMetadata(t *testing.T) {
	key := newClusterKey(t, "k1")
	srv := serve(t, identityConfig(t, key))
	for name, headers := range map[string]map[string]string{
		"no token":               nil,
		"token for another room": bearerHeader(key.token(t, "agents", "visitor", "another-room")),
	} {
		reply := postRPC(t, srv.baseURL+adapterconfig.PathMCP, headers, initializeMessage(protocol20250618))
		if reply.status != http.StatusUnauthorized {
			t.Fatalf("%s: status %d, want 401", name, reply.status)
		}
		if got := reply.header.Get("WWW-Authenticate"); !strings.Contains(got, `resource_metadata="`+srv.baseURL+adapterconfig.PathProtectedResource+`"`) {
			t.Errorf("%s: WWW-Authenticate %q", name, got)
		}
	}
	status, body := getStatus(t, srv.baseURL+adapterconfig.PathProtectedResource)
	var doc struct {
		Resource string   `json:"resource"`
		Methods  []string `json:"bearer_methods_supported"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil || doc.Resource != srv.baseURL+adapterconfig.PathMCP || !slices.Equal(doc.Methods, []string{"header"}) {
		t.Errorf("metadata %d %s", status, body)
	}
}

// Rotated issuer keys and changed rules reach a running adapter by Reload: the next
// request is checked against them, no restart.
func TestReloadAppliesNewKeysAndRules(t *testing.T) {
	oldKey, newKey := newClusterKey(t, "k1"), newClusterKey(t, "k2")
	srv := serve(t, identityConfig(t, oldKey))
	oldToken, newToken := oldKey.token(t, "agents", "visitor", "room"), newKey.token(t, "agents", "visitor", "room")
	if _, err := dial(t, srv.baseURL, protocol20250618, bearerHeader(newToken)); err == nil {
		t.Fatal("a token of a key the adapter does not know was accepted")
	}

	cfg := identityConfig(t, newKey, adapterconfig.AuthorizationRule{Tools: []string{"search_book"}})
	cfg.Auth.Issuers[0].JWKS = newKey.jwks(t, "k2")
	if err := srv.Reload(cfg); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	c := connect(t, srv.baseURL, protocol20250618, bearerHeader(newToken))
	if got := listNames(t, c); !slices.Equal(got, []string{"search_book"}) {
		t.Errorf("after the reload the caller lists %v, want [search_book]", got)
	}
	if _, err := dial(t, srv.baseURL, protocol20250618, bearerHeader(oldToken)); err == nil {
		t.Error("a token of the retired key is still accepted")
	}
}

// A Secret rotated on disk is enforced without a restart or a reload; both tokens work
// while both are in the file.
func TestBearerTokenFileRotates(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file+".new", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".new", file); err != nil {
			t.Fatal(err)
		}
	}
	write("old-token\n")
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("search_book", objectSchema, "found"))
	cfg.BearerTokenFile = file
	srv := serve(t, cfg)
	accepted := func(token string) bool {
		return postRPC(t, srv.baseURL+adapterconfig.PathMCP, bearerHeader(token), initializeMessage(protocol20250618)).status == http.StatusOK
	}
	write("old-token\nnew-token\n")
	testkit.EventuallyTrue(t, 10*time.Second, "the new token to be accepted", func() bool { return accepted("new-token") })
	if !accepted("old-token") {
		t.Error("the old token stopped working while both are in the file")
	}
	write("new-token\n")
	testkit.EventuallyTrue(t, 10*time.Second, "the old token to be refused", func() bool { return !accepted("old-token") })
}

func grepLines(text, fragment string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, fragment) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// /metrics names every tool, also those tools/list hides from a caller, so the MCP
// port does not serve it (finding 9 of issue 23): a visitor who may list only
// search_book learns nothing of checkout_book there, with or without a token; the
// metrics port, which the Service does not expose, has it.
func TestMetricsAreNotServedOnTheMCPPort(t *testing.T) {
	key := newClusterKey(t, "k1")
	cfg := identityConfig(t, key,
		adapterconfig.AuthorizationRule{Tools: []string{"search_*"}, ServiceAccounts: []string{"agents/*"}})
	srv := serve(t, cfg)
	visitor := connect(t, srv.baseURL, protocol20250618, bearerHeader(key.token(t, "agents", "visitor", "room")))
	if got := listNames(t, visitor); !slices.Equal(got, []string{"search_book"}) {
		t.Fatalf("the visitor lists %v, want [search_book]", got)
	}
	status, body := getStatus(t, srv.baseURL+adapterconfig.PathMetrics)
	if status != http.StatusNotFound || strings.Contains(body, "checkout_book") {
		t.Fatalf("GET /metrics on the MCP port = %d, want 404 without tool names; body:\n%s", status, grepLines(body, "checkout_book"))
	}
	if body := metricsText(t, srv.Server); !strings.Contains(body, `cantus_adapter_tool_calls_total{tool="checkout_book"} 0`) {
		t.Errorf("the metrics port lacks the hidden tool's series:\n%s", grepLines(body, "tool_calls_total"))
	}
}
