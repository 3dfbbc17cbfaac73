package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// The rules of server.json (schema 2025-12-11) and of the registry API's answers, as
// the MCP registry publishes them (docs/reference/server-json and api/openapi.yaml of
// modelcontextprotocol/registry), written out here rather than copied.
var (
	serverNamePattern = regexp.MustCompile(`^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`)
	remoteURLPattern  = regexp.MustCompile(`^https?://[^\s]+$`)
	// A version names one release: no range, wildcard or "latest".
	versionRange = regexp.MustCompile(`^[\^~<>=]|[*]|(^|\.)[xX](\.|$)| - |\|\|`)
)

// serverJSONViolations lists how one entry of a registry answer breaks those rules.
func serverJSONViolations(raw json.RawMessage) []string {
	var entry struct {
		Server map[string]any `json:"server"`
		Meta   map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &entry); err != nil {
		return []string{"not an object with server and _meta: " + err.Error()}
	}
	var bad []string
	s := entry.Server
	if s == nil {
		return []string{"server is required"}
	}
	str := func(key string) (string, bool) { v, ok := s[key].(string); return v, ok }
	for _, key := range []string{"name", "description", "version"} {
		if _, ok := str(key); !ok {
			bad = append(bad, key+" is a required string")
		}
	}
	name, _ := str("name")
	if n := utf8.RuneCountInString(name); n < 3 || n > 200 || !serverNamePattern.MatchString(name) || strings.Count(name, "/") != 1 {
		bad = append(bad, fmt.Sprintf("name %q: reverse-DNS namespace, one slash, 3-200 characters", name))
	}
	if d, _ := str("description"); utf8.RuneCountInString(d) < 1 || utf8.RuneCountInString(d) > 100 {
		bad = append(bad, fmt.Sprintf("description of %d characters: 1-100", utf8.RuneCountInString(d)))
	}
	if title, ok := str("title"); ok && (utf8.RuneCountInString(title) < 1 || utf8.RuneCountInString(title) > 100) {
		bad = append(bad, "title: 1-100 characters")
	}
	if v, _ := str("version"); len(v) > 255 || v == "" || v == "latest" || versionRange.MatchString(v) {
		bad = append(bad, fmt.Sprintf("version %q: one exact version of at most 255 characters", v))
	}
	if schema, _ := str("$schema"); schema != "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json" {
		bad = append(bad, "$schema "+schema)
	}
	bad = append(bad, remoteViolations(s["remotes"])...)
	official, _ := entry.Meta["io.modelcontextprotocol.registry/official"].(map[string]any)
	if status := official["status"]; status != "active" && status != "deprecated" && status != "deleted" {
		bad = append(bad, fmt.Sprintf("_meta official status %v", status))
	}
	for _, key := range []string{"publishedAt", "updatedAt"} {
		if ts, _ := official[key].(string); ts != "" {
			if _, err := time.Parse(time.RFC3339, ts); err != nil {
				bad = append(bad, "_meta official "+key+" is not a date-time")
			}
		}
	}
	for key := range entry.Meta {
		if !strings.Contains(key, "/") || !serverNamePattern.MatchString(key) {
			bad = append(bad, "_meta key "+key+" is not reverse-DNS/name")
		}
	}
	return bad
}

func remoteViolations(remotes any) []string {
	if remotes == nil {
		return nil
	}
	list, ok := remotes.([]any)
	if !ok {
		return []string{"remotes is not an array"}
	}
	var bad []string
	for _, r := range list {
		remote, _ := r.(map[string]any)
		if t := remote["type"]; t != "streamable-http" && t != "sse" {
			bad = append(bad, fmt.Sprintf("remote type %v: streamable-http or sse", t))
		}
		if u, _ := remote["url"].(string); !remoteURLPattern.MatchString(u) {
			bad = append(bad, fmt.Sprintf("remote url %q", u))
		}
		headers, _ := remote["headers"].([]any)
		for _, h := range headers {
			if name, _ := h.(map[string]any)["name"].(string); name == "" {
				bad = append(bad, "a remote header without a name")
			}
		}
	}
	return bad
}

// The checker itself fails on what the schema refuses, so that a test that uses it can fail.
func TestServerJSONViolationsRefusesWhatTheSchemaRefuses(t *testing.T) {
	valid := `{"$schema":"https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json","name":"local.cluster.ns/books","description":"d","version":"0.0.0+cfg.ab"}`
	meta := `{"io.modelcontextprotocol.registry/official":{"status":"active"}}`
	for name, server := range map[string]string{
		"two slashes":      strings.Replace(valid, `ns/books`, `ns/a/books`, 1),
		"no slash":         strings.Replace(valid, `ns/books`, `ns.books`, 1),
		"bad character":    strings.Replace(valid, `ns/books`, `ns/bo oks`, 1),
		"long description": strings.Replace(valid, `"description":"d"`, `"description":"`+strings.Repeat("d", 101)+`"`, 1),
		"no description":   strings.Replace(valid, `"description":"d",`, ``, 1),
		"version range":    strings.Replace(valid, `0.0.0+cfg.ab`, `^1.2.3`, 1),
		"latest":           strings.Replace(valid, `0.0.0+cfg.ab`, `latest`, 1),
		"stdio remote":     strings.Replace(valid, `}`, `,"remotes":[{"type":"stdio","url":"http://x"}]}`, 1),
		"remote not http":  strings.Replace(valid, `}`, `,"remotes":[{"type":"sse","url":"ftp://x"}]}`, 1),
	} {
		if bad := serverJSONViolations(json.RawMessage(`{"server":` + server + `,"_meta":` + meta + `}`)); len(bad) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
	if bad := serverJSONViolations(json.RawMessage(`{"server":` + valid + `,"_meta":` + meta + `}`)); len(bad) != 0 {
		t.Errorf("a valid entry refused: %v", bad)
	}
}

type registryPageAnswer struct {
	Servers  []json.RawMessage `json:"servers"`
	Metadata struct {
		NextCursor string `json:"nextCursor"`
		Count      int    `json:"count"`
	} `json:"metadata"`
}

func registryGet(t *testing.T, srv *httptest.Server, path, token string) (int, registryPageAnswer, string) {
	t.Helper()
	status, body := get(t, srv.Client(), srv.URL+path, token)
	var page registryPageAnswer
	if status == http.StatusOK && strings.HasPrefix(path, "/v0.1/servers?") {
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	return status, page, body
}

func entryOf(t *testing.T, raw json.RawMessage) RegistryEntry {
	t.Helper()
	var e RegistryEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func registryServer(srv http.Handler) *httptest.Server {
	return httptest.NewTLSServer(srv)
}

// Every answer follows server.json's rules; each caller sees only the namespaces it may
// list and counts only the tools it may call; a server is found by its URL-encoded
// name at "latest" and at its exact version, which changes with what it serves.
func TestRegistryAPIAnswersServerJSONForWhatTheCallerMaySee(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	teamA, teamB := namespace(t, "reg-a"), namespace(t, "reg-b")
	publishedServer(t, teamA, "books")
	publishedServer(t, teamB, "payroll")
	ruled := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "room"},
		Spec: cantusv1alpha1.SkillServerSpec{
			ServerInfo: cantusv1alpha1.ServerInfo{Version: "1.2.0", Instructions: strings.Repeat("Lend books. ", 20) + "\nSecond line."},
			Skills: []cantusv1alpha1.Skill{
				{Name: "search_book", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}},
				{Name: "checkout_book", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}},
			},
			Auth: &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}},
			Authorization: &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
				{Tools: []string{"search_*"}, ServiceAccounts: []string{teamA + "/*"}},
				{Tools: []string{"checkout_*"}, ServiceAccounts: []string{teamA + "/librarian"}},
			}},
		},
	}
	g.Expect(k8sClient.Create(ctx, ruled)).To(Succeed())
	ruled.Status.URL = "http://room." + teamA + ".svc.example.org:8765/mcp"
	ruled.Status.ConfigHash = "0123456789abcdef"
	ruled.Status.Tools = []cantusv1alpha1.ServedTool{{Name: "search_book", Source: "skill"}, {Name: "checkout_book", Source: "skill"}}
	ruled.Status.Conditions = []metav1.Condition{{Type: cantusv1alpha1.ConditionVerified, Status: metav1.ConditionTrue, Reason: "Listed", LastTransitionTime: metav1.Now()}}
	g.Expect(k8sClient.Status().Update(ctx, ruled)).To(Succeed())
	// A server with no URL yet has nothing a registry client could connect to.
	g.Expect(k8sClient.Create(ctx, &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "unrendered"},
		Spec:       cantusv1alpha1.SkillServerSpec{Skills: []cantusv1alpha1.Skill{{Name: "x", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}}}},
	})).To(Succeed())
	visitor := serviceAccountAllowedIn(t, teamA, "visitor")

	srv := registryServer(NewHandler(&Catalog{Reader: k8sClient, RegistryDomain: "example.org"}, &Authorizer{Client: k8sClient}, logr.Discard()))
	t.Cleanup(srv.Close)

	status, _, _ := registryGet(t, srv, "/v0.1/servers?limit=10", "")
	g.Expect(status).To(Equal(http.StatusUnauthorized))

	status, page, body := registryGet(t, srv, "/v0.1/servers?limit=10", visitor)
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(page.Metadata.Count).To(Equal(2))
	g.Expect(page.Metadata.NextCursor).To(BeEmpty())
	g.Expect(body).NotTo(ContainSubstring(teamB), "another namespace's server is not even named")
	g.Expect(body).NotTo(ContainSubstring("unrendered"), "a server without a URL is not listed")
	for _, raw := range page.Servers {
		g.Expect(serverJSONViolations(raw)).To(BeEmpty(), string(raw))
	}
	books, room := entryOf(t, page.Servers[0]), entryOf(t, page.Servers[1])
	g.Expect(books.Server.Name).To(Equal("org.example." + teamA + "/books"))
	g.Expect(books.Server.Version).To(Equal("0.0.0+gen.1"), "not rendered yet: the generation")
	g.Expect(books.Server.Remotes).To(Equal([]RegistryRemote{{Type: "streamable-http", URL: "http://books." + teamA + ".svc.cluster.local:8765/mcp"}}))
	g.Expect(books.Meta.Cluster).To(Equal(SkillServerMeta{Namespace: teamA, Name: "books", Tools: 1, Ready: true, Discovery: "All"}))

	g.Expect(room.Server.Version).To(Equal("1.2.0+cfg.0123456789abcdef"))
	g.Expect(utf8.RuneCountInString(room.Server.Description)).To(Equal(100), "the first line of the instructions, clipped")
	g.Expect(room.Server.Description).To(And(HavePrefix("Lend books. Lend"), HaveSuffix("…")))
	g.Expect(room.Server.Remotes[0].Headers).To(HaveLen(1), "the server wants a bearer token")
	g.Expect(room.Meta.Cluster.Tools).To(Equal(1), "the visitor may call search_book only")
	g.Expect(room.Meta.Cluster.VerifiedConfigHash).To(Equal("0123456789abcdef"))

	path := "/v0.1/servers/" + url.PathEscape(room.Server.Name) + "/versions/"
	g.Expect(path).To(ContainSubstring("%2Froom"))
	for _, version := range []string{"latest", url.PathEscape(room.Server.Version)} {
		status, _, body = registryGet(t, srv, path+version, visitor)
		g.Expect(status).To(Equal(http.StatusOK), body)
		g.Expect(serverJSONViolations(json.RawMessage(body))).To(BeEmpty())
		g.Expect(entryOf(t, json.RawMessage(body)).Server.Name).To(Equal(room.Server.Name))
	}
	status, _, _ = registryGet(t, srv, path+"1.1.0", visitor)
	g.Expect(status).To(Equal(http.StatusNotFound))
	status, _, _ = registryGet(t, srv, "/v0.1/servers/"+url.PathEscape("org.example."+teamB+"/payroll")+"/versions/latest", visitor)
	g.Expect(status).To(Equal(http.StatusNotFound), "a server of a namespace the caller may not list")

	librarian := serviceAccountAllowedIn(t, teamA, "librarian")
	_, _, body = registryGet(t, srv, path+"latest", librarian)
	g.Expect(entryOf(t, json.RawMessage(body)).Meta.Cluster.Tools).To(Equal(2))

	ruled.Status.ConfigHash = "fedcba9876543210"
	g.Expect(k8sClient.Status().Update(ctx, ruled)).To(Succeed())
	_, _, body = registryGet(t, srv, path+"latest", visitor)
	g.Expect(entryOf(t, json.RawMessage(body)).Server.Version).To(Equal("1.2.0+cfg.fedcba9876543210"), "a new config is a new version")

	t.Run("filters", func(t *testing.T) {
		g := NewWithT(t)
		_, page, _ := registryGet(t, srv, "/v0.1/servers?search=ROOM&version=latest", visitor)
		g.Expect(page.Servers).To(HaveLen(1))
		_, page, _ = registryGet(t, srv, "/v0.1/servers?version="+url.QueryEscape("1.2.0+cfg.fedcba9876543210"), visitor)
		g.Expect(page.Servers).To(HaveLen(1))
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		_, page, _ = registryGet(t, srv, "/v0.1/servers?updated_since="+future, visitor)
		g.Expect(page.Servers).To(BeEmpty())
		past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		_, page, _ = registryGet(t, srv, "/v0.1/servers?updated_since="+past, visitor)
		g.Expect(page.Servers).To(HaveLen(2))
		for _, bad := range []string{"limit=0", "limit=101", "limit=ten", "updated_since=yesterday"} {
			status, _, _ := registryGet(t, srv, "/v0.1/servers?"+bad, visitor)
			g.Expect(status).To(Equal(http.StatusBadRequest), bad)
		}
	})
}

// updated_since compares with the newest status time: a server whose condition moved
// after the time is kept, one whose conditions are older is not.
func TestRegistryUpdatedSinceReadsStatusTimes(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, "reg-times")
	publishedServer(t, ns, "books")
	publishedServer(t, ns, "payroll")
	ctx := context.Background()
	since := time.Now().Add(time.Minute)
	books := &cantusv1alpha1.SkillServer{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "books"}, books)).To(Succeed())
	books.Status.Conditions[0].LastTransitionTime = metav1.NewTime(since.Add(time.Minute))
	g.Expect(k8sClient.Status().Update(ctx, books)).To(Succeed())

	entries, err := (&Catalog{Reader: k8sClient}).RegistryEntries(ctx, &viewer{namespaces: map[string]bool{ns: true}})
	g.Expect(err).NotTo(HaveOccurred())
	query := registryQuery{limit: 10, updatedSince: since}
	kept := slices.DeleteFunc(entries, func(e RegistryEntry) bool { return !query.keeps(e) })
	g.Expect(kept).To(HaveLen(1))
	g.Expect(kept[0].Meta.Cluster.Name).To(Equal("books"))
}

// Paging with the cursor visits every server that stays exactly once while, between
// pages, a server already returned and one not yet returned are deleted, and one is
// added behind the cursor and one ahead of it: the one ahead is returned, the one
// behind is not, nothing twice.
func TestRegistryPagingVisitsEveryServerOnceWhileServersComeAndGo(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, "reg-paging")
	token := serviceAccountAllowedIn(t, ns, "agent")
	var originals []string
	for i := range 9 {
		originals = append(originals, created(t, ns, fmt.Sprintf("m%d", i)).Name)
	}
	srv := registryServer(NewHandler(&Catalog{Reader: k8sClient}, &Authorizer{Client: k8sClient}, logr.Discard()))
	t.Cleanup(srv.Close)

	seen := map[string]int{}
	deleted := map[string]bool{}
	var addedAhead []string
	for cursor, pages := "", 1; ; pages++ {
		status, page, body := registryGet(t, srv, "/v0.1/servers?limit=2&cursor="+url.QueryEscape(cursor), token)
		g.Expect(status).To(Equal(http.StatusOK), body)
		for _, raw := range page.Servers {
			seen[entryOf(t, raw).Meta.Cluster.Name]++
		}
		if cursor = page.Metadata.NextCursor; cursor == "" {
			g.Expect(pages).To(BeNumerically(">", 4))
			break
		}
		if i := slices.IndexFunc(originals, func(n string) bool { return seen[n] > 0 && !deleted[n] }); i >= 0 {
			deleteServer(t, ns, originals[i])
			deleted[originals[i]] = true
		}
		if i := slices.IndexFunc(originals, func(n string) bool { return seen[n] == 0 && !deleted[n] }); i >= 0 {
			deleteServer(t, ns, originals[i])
			deleted[originals[i]] = true
		}
		created(t, ns, fmt.Sprintf("a%d", pages)) // sorts before every cursor
		addedAhead = append(addedAhead, created(t, ns, fmt.Sprintf("z%d", pages)).Name)
	}
	for name, n := range seen {
		g.Expect(n).To(Equal(1), name+" returned more than once")
		g.Expect(name).NotTo(HavePrefix("a"), "a server added behind the cursor")
	}
	for _, name := range append(originals, addedAhead...) {
		if deleted[name] {
			continue
		}
		g.Expect(seen).To(HaveKey(name), "a server that stayed was skipped")
	}
	for _, name := range originals {
		if deleted[name] && seen[name] == 0 {
			return // at least one server deleted before its page was not returned
		}
	}
	t.Fatal("no server was deleted ahead of the cursor: the test did not test that")
}

// A client that knows only the registry API lists the cluster's servers and connects
// to one through its remotes URL: MCP initialize and tools/list.
func TestRegistryClientConnectsThroughRemotes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "reg-client")
	token := serviceAccountAllowedIn(t, ns, "agent")
	mcpSrv := server.NewMCPServer("books", "1.0.0")
	mcpSrv.AddTool(mcp.NewTool("search_book", mcp.WithDescription("Search the catalog by title.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("found"), nil
		})
	backend := httptest.NewServer(server.NewStreamableHTTPServer(mcpSrv, server.WithStateLess(true)))
	t.Cleanup(backend.Close)
	ss := created(t, ns, "books")
	ss.Status.URL = backend.URL + "/mcp"
	g.Expect(k8sClient.Status().Update(ctx, ss)).To(Succeed())

	reg := registryServer(NewHandler(&Catalog{Reader: k8sClient}, &Authorizer{Client: k8sClient}, logr.Discard()))
	t.Cleanup(reg.Close)
	remotes := registryRemotes(t, reg, token)
	g.Expect(remotes).To(HaveLen(1))
	remote := remotes["local.cluster."+ns+"/books"]
	g.Expect(remote.Type).To(Equal("streamable-http"))

	trans, err := transport.NewStreamableHTTP(remote.URL)
	g.Expect(err).NotTo(HaveOccurred())
	c := mcpclient.NewClient(trans, mcpclient.WithProtocolVersion("2025-06-18"))
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	g.Expect(c.Start(ctx)).To(Succeed())
	_, err = c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: "2025-06-18", ClientInfo: mcp.Implementation{Name: "registry-client", Version: "0"}}})
	g.Expect(err).NotTo(HaveOccurred())
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tools.Tools).To(HaveLen(1))
	g.Expect(tools.Tools[0].Name).To(Equal("search_book"))
}

// registryRemotes is the whole registry client: it follows nextCursor through
// /v0.1/servers and keeps each server's first remote.
func registryRemotes(t *testing.T, reg *httptest.Server, token string) map[string]RegistryRemote {
	out := map[string]RegistryRemote{}
	cursor := ""
	for {
		status, page, body := registryGet(t, reg, "/v0.1/servers?limit=1&cursor="+url.QueryEscape(cursor), token)
		if status != http.StatusOK {
			t.Fatalf("list: %d %s", status, body)
		}
		for _, raw := range page.Servers {
			e := entryOf(t, raw)
			if len(e.Server.Remotes) > 0 {
				out[e.Server.Name] = e.Server.Remotes[0]
			}
		}
		if cursor = page.Metadata.NextCursor; cursor == "" {
			return out
		}
	}
}

func created(t *testing.T, ns, name string) *cantusv1alpha1.SkillServer {
	t.Helper()
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       cantusv1alpha1.SkillServerSpec{Skills: []cantusv1alpha1.Skill{{Name: "echo", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}}}},
	}
	if err := k8sClient.Create(context.Background(), ss); err != nil {
		t.Fatal(err)
	}
	// Served: the registry lists only servers with a URL.
	ss.Status.URL = "http://" + name + "." + ns + ".svc.cluster.local:8765/mcp"
	if err := k8sClient.Status().Update(context.Background(), ss); err != nil {
		t.Fatal(err)
	}
	return ss
}

func deleteServer(t *testing.T, ns, name string) {
	t.Helper()
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8sClient.Delete(context.Background(), ss); err != nil {
		t.Fatal(err)
	}
}
