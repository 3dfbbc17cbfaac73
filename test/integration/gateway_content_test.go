package integration

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// rawSession is a session of the project's MCP client, whose answers are the bytes of
// the result as the server sent them.
func rawSession(t *testing.T, ctx context.Context, url string) *mcpclient.Session {
	t.Helper()
	c, err := mcpclient.New(mcpclient.ClientOptions{URL: url, ClientName: "content-test", ClientVersion: "1"})
	if err != nil {
		t.Fatalf("client for %s: %v", url, err)
	}
	s, err := c.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(s.Close)
	return s
}

// entriesByKey parses list entries into maps by their key member.
func entriesByKey(t *testing.T, entries []json.RawMessage, key string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, e := range entries {
		var m map[string]any
		if err := json.Unmarshal(e, &m); err != nil {
			t.Fatalf("entry %s: %v", e, err)
		}
		out[m[key].(string)] = m
	}
	return out
}

// everythingPromptArgs are arguments each prompt of server-everything accepts.
var everythingPromptArgs = map[string]string{
	"simple-prompt":      ``,
	"args-prompt":        `{"city":"Paris","state":"Texas"}`,
	"completable-prompt": `{"department":"Engineering","name":"Alice"}`,
	"resource-prompt":    `{"resourceType":"Blob","resourceId":"2"}`,
}

// Every resource, resource template and prompt server-everything serves is listed
// through a gateway as it lists it (prompts under the import's prefix), and every read
// and get through the gateway answers the bytes a direct one does (a dynamic resource
// says what time it was made, which may differ by a second).
func TestGatewayReExportsResourcesTemplatesAndPrompts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	direct, gateway := everythingGateway(t, ctx, cantusv1alpha1.TransportStreamableHTTP)
	d, gw := rawSession(t, ctx, direct), rawSession(t, ctx, gateway)

	wantResources, err := d.ListResources(ctx, 1000)
	g.Expect(err).NotTo(HaveOccurred())
	gotResources, err := gw.ListResources(ctx, 1000)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wantResources).NotTo(BeEmpty(), "server-everything serves its docs as resources")
	g.Expect(entriesByKey(t, gotResources, "uri")).To(Equal(entriesByKey(t, wantResources, "uri")))
	for uri := range entriesByKey(t, wantResources, "uri") {
		want, err := d.ReadResource(ctx, uri)
		g.Expect(err).NotTo(HaveOccurred(), uri)
		got, err := gw.ReadResource(ctx, uri)
		g.Expect(err).NotTo(HaveOccurred(), uri)
		g.Expect(string(got)).To(Equal(string(want)), "resources/read %s", uri)
	}

	wantTemplates, err := d.ListResourceTemplates(ctx, 1000)
	g.Expect(err).NotTo(HaveOccurred())
	gotTemplates, err := gw.ListResourceTemplates(ctx, 1000)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wantTemplates).To(HaveLen(2), "text and blob templates")
	g.Expect(entriesByKey(t, gotTemplates, "uriTemplate")).To(Equal(entriesByKey(t, wantTemplates, "uriTemplate")))
	for _, uri := range []string{"demo://resource/dynamic/text/7", "demo://resource/dynamic/blob/3"} {
		want, err := d.ReadResource(ctx, uri)
		g.Expect(err).NotTo(HaveOccurred(), uri)
		got, err := gw.ReadResource(ctx, uri)
		g.Expect(err).NotTo(HaveOccurred(), uri)
		g.Expect(withoutClock(got)).To(Equal(withoutClock(want)), "resources/read %s", uri)
	}

	wantPrompts, err := d.ListPrompts(ctx, 1000)
	g.Expect(err).NotTo(HaveOccurred())
	gotPrompts, err := gw.ListPrompts(ctx, 1000)
	g.Expect(err).NotTo(HaveOccurred())
	served := entriesByKey(t, gotPrompts, "name")
	names := []string{}
	for name, entry := range entriesByKey(t, wantPrompts, "name") {
		names = append(names, name)
		entry["name"] = "se_" + name
		g.Expect(served).To(HaveKeyWithValue("se_"+name, entry), "prompt %s", name)
	}
	sort.Strings(names)
	g.Expect(served).To(HaveLen(len(names)))
	g.Expect(names).To(Equal([]string{"args-prompt", "completable-prompt", "resource-prompt", "simple-prompt"}))
	for _, name := range names {
		args := json.RawMessage(everythingPromptArgs[name])
		want, err := d.GetPrompt(ctx, name, args)
		g.Expect(err).NotTo(HaveOccurred(), name)
		got, err := gw.GetPrompt(ctx, "se_"+name, args)
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(withoutClock(got)).To(Equal(withoutClock(want)), "prompts/get %s", name)
	}

	// Completions of an imported prompt's argument (by its served name) and of a
	// template's variable are the remote's.
	for _, c := range []struct{ direct, gateway map[string]any }{
		{map[string]any{"ref": map[string]string{"type": "ref/prompt", "name": "completable-prompt"}, "argument": map[string]string{"name": "department", "value": "S"}},
			map[string]any{"ref": map[string]string{"type": "ref/prompt", "name": "se_completable-prompt"}, "argument": map[string]string{"name": "department", "value": "S"}}},
		{map[string]any{"ref": map[string]string{"type": "ref/prompt", "name": "completable-prompt"}, "argument": map[string]string{"name": "name", "value": ""}, "context": map[string]any{"arguments": map[string]string{"department": "Sales"}}},
			map[string]any{"ref": map[string]string{"type": "ref/prompt", "name": "se_completable-prompt"}, "argument": map[string]string{"name": "name", "value": ""}, "context": map[string]any{"arguments": map[string]string{"department": "Sales"}}}},
		{map[string]any{"ref": map[string]string{"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"}, "argument": map[string]string{"name": "resourceId", "value": "3"}}, nil},
	} {
		if c.gateway == nil {
			c.gateway = c.direct
		}
		want, err := d.Complete(ctx, c.direct)
		g.Expect(err).NotTo(HaveOccurred())
		got, err := gw.Complete(ctx, c.gateway)
		g.Expect(err).NotTo(HaveOccurred())
		// The gateway answers through mcp-go's typed completion: hasMore false is left
		// out, which means the same.
		var wantC, gotC struct{ Completion mcp.Completion }
		g.Expect(json.Unmarshal(want, &wantC)).To(Succeed())
		g.Expect(json.Unmarshal(got, &gotC)).To(Succeed())
		g.Expect(gotC).To(Equal(wantC), "completion %v", c.gateway)
		g.Expect(string(want)).To(ContainSubstring(`"values":["`), "server-everything completes %v", c.direct)
	}

	// An error of the remote reaches the caller with its code.
	_, err = gw.GetPrompt(ctx, "se_resource-prompt", json.RawMessage(`{"resourceType":"Nope","resourceId":"1"}`))
	var rpcErr *mcpclient.RPCError
	g.Expect(err).To(BeAssignableToTypeOf(rpcErr))
}

// The import's status lists server-everything's content with per-item digests, and
// kubectl get's counts.
func TestImportListsEverythingsContent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	direct := peers.StartServerEverything(t, ctx, peers.TransportStreamableHTTP) + "/mcp"
	imp := kubekit.NewImport(ns, "everything", direct)
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(20 * time.Second)
	imp.Spec.Prompts = &cantusv1alpha1.ToolFilter{Exclude: []string{"completable-*"}}
	got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), imp)
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionContentDiscovered).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(got.Status.PromptCount).To(BeEquivalentTo(3), "four prompts, one filtered out")
	g.Expect(got.Status.ResourceTemplateCount).To(BeEquivalentTo(2))
	g.Expect(got.Status.ResourceCount).To(BeNumerically(">", 0))
	for _, r := range got.Status.Resources {
		want, err := definition.ResourceKind.Digest(r.Definition.Raw)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Digest).To(Equal(want))
	}
	g.Expect(got.Status.CatalogDigest).NotTo(BeEmpty())
}

// Two imports of one server-everything behind one gateway, under two prefixes: their
// prompts are both served, each under its prefix; their resources and templates keep
// their URIs, so they collide: neither import's is served, and the gateway says so as
// it says tool names collide.
func TestGatewayReportsResourceCollisionsAndPrefixesPrompts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	direct := peers.StartServerEverything(t, ctx, peers.TransportStreamableHTTP) + "/mcp"
	for _, name := range []string{"one", "two"} {
		imp := kubekit.NewImport(ns, name, direct)
		imp.Spec.Timeout = cantusv1alpha1.DurationFrom(20 * time.Second)
		g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	}
	gw := kubekit.NewSkillServer(ns, "gateway")
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "one", Prefix: "one_"}, {Name: "two", Prefix: "two_"}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway"), 60*time.Second).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled),
		kubekit.HaveCondition(cantusv1alpha1.ConditionImportedContentServed, metav1.ConditionFalse, cantusv1alpha1.ReasonNameCollision)))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway")()
	g.Expect(kubekit.ConditionMessage(got, cantusv1alpha1.ConditionImportedContentServed)).To(ContainSubstring(`resource template "demo://resource/dynamic/text/{resourceId}" from import one and import two`))

	s := rawSession(t, ctx, got.Status.URL)
	prompts, err := s.ListPrompts(ctx, 1000)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entriesByKey(t, prompts, "name")).To(HaveKey("one_simple-prompt"))
	g.Expect(entriesByKey(t, prompts, "name")).To(HaveKey("two_simple-prompt"))
	g.Expect(prompts).To(HaveLen(8))
	want, err := rawSession(t, ctx, direct).GetPrompt(ctx, "args-prompt", json.RawMessage(`{"city":"Oslo"}`))
	g.Expect(err).NotTo(HaveOccurred())
	viaTwo, err := s.GetPrompt(ctx, "two_args-prompt", json.RawMessage(`{"city":"Oslo"}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(viaTwo)).To(Equal(string(want)))

	// No resources are served, so the capability is not even declared: reading one
	// of the collided URIs fails.
	_, err = s.ReadResource(ctx, "demo://resource/dynamic/text/1")
	g.Expect(err).To(HaveOccurred())
}

// A SkillServer serving an Agent Skill, a prompt and a resource, imported by a gateway
// under the prefix "lib_": skills/list through the gateway has the skill under
// skill://lib/…, every file's digest equals the sha256 of the bytes read through the
// gateway at its moved URI, and the prompt and resource are served too.
func TestGatewayReExportsAgentSkillsUnderThePrefix(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	forms := "# Forms\nfield: <value> & more\n"
	g.Expect(k8sClient.Create(ctx, kubekit.SkillConfigMap(ns, "pdf", map[string]string{"SKILL.md": kubekit.FormsSkillMD, "references.FORMS.md": forms}, true))).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.ContentSkillServer(ns, "docs"))).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "docs"), 60*time.Second).Should(
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
	docs, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")()
	g.Expect(k8sClient.Create(ctx, kubekit.NewImport(ns, "docs", docs.Status.URL))).To(Succeed())
	gw := kubekit.NewSkillServer(ns, "gateway")
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "docs", Prefix: "lib_"}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway"), 60*time.Second).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled),
		kubekit.HaveCondition(cantusv1alpha1.ConditionImportedContentServed, metav1.ConditionTrue, cantusv1alpha1.ReasonContentServed)))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway")()
	s := rawSession(t, ctx, got.Status.URL)

	skills, err := s.ListSkills(ctx, 100)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(skills).To(HaveLen(1))
	var entry struct {
		URI       string `json:"uri"`
		Resources []struct {
			URI, Digest string
			Size        int
		} `json:"resources"`
	}
	g.Expect(json.Unmarshal(skills[0], &entry)).To(Succeed())
	g.Expect(entry.URI).To(Equal("skill://lib/acme/pdf-forms/SKILL.md"))
	g.Expect(entry.Resources).To(HaveLen(2))
	for _, r := range entry.Resources {
		g.Expect(r.URI).To(HavePrefix("skill://lib/acme/pdf-forms/"))
		raw, err := s.ReadResource(ctx, r.URI)
		g.Expect(err).NotTo(HaveOccurred(), r.URI)
		var read struct {
			Contents []struct{ URI, Text string } `json:"contents"`
		}
		g.Expect(json.Unmarshal(raw, &read)).To(Succeed())
		g.Expect(read.Contents).To(HaveLen(1))
		g.Expect(read.Contents[0].URI).To(Equal(r.URI), "the contents name the URI read")
		g.Expect("sha256:"+testkit.HexSHA256([]byte(read.Contents[0].Text))).To(Equal(r.Digest), "digest of %s", r.URI)
		g.Expect(read.Contents[0].Text).To(HaveLen(r.Size))
	}
	// resources/directory/read of the moved skill lists what its remote listed with it:
	// the files at its root and a directory for each folder.
	root := "skill://lib/acme/pdf-forms"
	wantChildren := map[string]bool{}
	for _, r := range entry.Resources {
		first, _, nested := strings.Cut(strings.TrimPrefix(r.URI, root+"/"), "/")
		wantChildren[root+"/"+first] = nested
	}
	raw, err := s.ReadDirectory(ctx, root)
	g.Expect(err).NotTo(HaveOccurred())
	var dir struct {
		Resources []struct{ URI, MimeType string } `json:"resources"`
	}
	g.Expect(json.Unmarshal(raw, &dir)).To(Succeed())
	gotChildren := map[string]bool{}
	for _, r := range dir.Resources {
		gotChildren[r.URI] = r.MimeType == "inode/directory"
	}
	g.Expect(gotChildren).To(Equal(wantChildren), "the children of %s through the gateway", root)
	// The remote's own URI is not served by the gateway: the prefix moved it.
	_, err = s.ReadResource(ctx, "skill://acme/pdf-forms/SKILL.md")
	g.Expect(err).To(HaveOccurred())

	prompts, err := s.ListPrompts(ctx, 100)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entriesByKey(t, prompts, "name")).To(HaveKey("lib_greet"))
	want, err := rawSession(t, ctx, docs.Status.URL).ReadResource(ctx, "docs://guide")
	g.Expect(err).NotTo(HaveOccurred())
	guide, err := s.ReadResource(ctx, "docs://guide")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(guide)).To(Equal(string(want)))
}
