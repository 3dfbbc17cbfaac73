package catalog

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/go-logr/logr"
	"github.com/mark3labs/mcp-go/mcp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// The catalog lists each server's Agent Skills (frontmatter and manifest digest),
// prompts, resources and resource templates, and each caller sees only those the
// server's rules let it use, over REST and over MCP.
func TestCatalogListsTheSkillsPromptsAndResourcesEachCallerMayUse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "skills-room")
	ss := contentServer(t, ns)

	srv := httptest.NewTLSServer(NewHandler(&Catalog{Reader: k8sClient}, &Authorizer{Client: k8sClient}, logr.Discard()))
	t.Cleanup(srv.Close)
	seenBy := func(token string) Server {
		status, body := get(t, srv.Client(), srv.URL+"/v1/servers/"+ns+"/"+ss.Name, token)
		g.Expect(status).To(Equal(http.StatusOK), body)
		var s Server
		g.Expect(json.Unmarshal([]byte(body), &s)).To(Succeed())
		return s
	}

	librarian := seenBy(serviceAccountAllowedIn(t, ns, "librarian"))
	g.Expect(skillURIs(librarian)).To(ConsistOf("skill://acme/billing/refunds/SKILL.md", "skill://onboarding/SKILL.md"))
	g.Expect(promptNames(librarian)).To(ConsistOf("greet", "audit_report"))
	g.Expect(resourceURIs(librarian)).To(ConsistOf("docs://public/hours", "docs://internal/budget", "docs://pages/{page}"))
	for i, skill := range librarian.AgentSkills {
		g.Expect(skill.Digest).To(Equal(ss.Status.AgentSkills[i].Digest), "the digest is the one the operator computed from the files")
		g.Expect(skill.Digest).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`))
	}
	refunds := librarian.AgentSkills[0]
	g.Expect(refunds.Description).To(Equal("Refund a customer's order."))
	g.Expect(refunds.Frontmatter).To(MatchJSON(`{"name":"refunds","description":"Refund a customer's order.","metadata":{"approved":"yes"}}`),
		"YAML 1.2: yes stays a string")
	g.Expect(librarian.Prompts[0].Arguments).To(Equal([]cantusv1alpha1.PromptArgument{{Name: "who", Required: true}}))

	visitorToken := serviceAccountAllowedIn(t, ns, "visitor")
	visitor := seenBy(visitorToken)
	g.Expect(skillURIs(visitor)).To(ConsistOf("skill://onboarding/SKILL.md"))
	g.Expect(promptNames(visitor)).To(ConsistOf("greet"))
	g.Expect(resourceURIs(visitor)).To(ConsistOf("docs://public/hours"))
	g.Expect(visitor.Tools).To(BeEmpty(), "a rule about prompts, resources or skills allows no tool")

	t.Run("in the registry API's _meta", func(t *testing.T) {
		g := NewWithT(t)
		name := RegistryName(reverseDomain("cluster.local"), ns, ss.Name)
		status, _, body := registryGet(t, srv, "/v0.1/servers/"+url.PathEscape(name)+"/versions/latest", visitorToken)
		g.Expect(status).To(Equal(http.StatusOK), body)
		var entry RegistryEntry
		g.Expect(json.Unmarshal([]byte(body), &entry)).To(Succeed())
		g.Expect(entry.Meta.Cluster.AgentSkills).To(Equal(map[string]string{"skill://onboarding/SKILL.md": ss.Status.AgentSkills[1].Digest}))
	})
	t.Run("over MCP", func(t *testing.T) {
		g := NewWithT(t)
		c := catalogClient(t, ctx, srv, visitorToken)
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "list_servers"}})
		g.Expect(err).NotTo(HaveOccurred())
		var listed struct{ Servers []serverSummary }
		g.Expect(json.Unmarshal([]byte(res.Content[0].(mcp.TextContent).Text), &listed)).To(Succeed())
		g.Expect(listed.Servers).To(HaveLen(1))
		g.Expect(listed.Servers[0].AgentSkills).To(Equal([]string{"skill://onboarding/SKILL.md"}))
		g.Expect(listed.Servers[0].Prompts).To(Equal([]string{"greet"}))
		g.Expect(listed.Servers[0].Resources).To(Equal([]string{"docs://public/hours"}))

		res, err = c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "get_server", Arguments: map[string]any{"server": ns + "/" + ss.Name}}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.IsError).To(BeFalse())
		var got Server
		g.Expect(json.Unmarshal([]byte(res.Content[0].(mcp.TextContent).Text), &got)).To(Succeed())
		g.Expect(got.AgentSkills).To(HaveLen(1))
		g.Expect(got.AgentSkills[0].Digest).To(Equal(ss.Status.AgentSkills[1].Digest))
		g.Expect(got.AgentSkills[0].Frontmatter).To(MatchJSON(`{"name":"onboarding","description":"Welcome a new member."}`))
	})
}

// contentServer creates a SkillServer that serves two skills from a labelled ConfigMap,
// two prompts, two resources and a template, with rules per kind, and writes the status
// the operator writes: the content rendered from the ConfigMap by the operator's render.
func contentServer(t *testing.T, ns string) *cantusv1alpha1.SkillServer {
	g := NewWithT(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "skills", Labels: map[string]string{cantusv1alpha1.ContentLabel: "true"}},
		Data: map[string]string{
			"refunds.md":    "---\nname: refunds\ndescription: Refund a customer's order.\nmetadata:\n  approved: yes\n---\nCheck the order first.\n",
			"onboarding.md": "---\nname: onboarding\ndescription: Welcome a new member.\n---\nSay hello.\n",
		},
	}
	g.Expect(k8sClient.Create(ctx, cm)).To(Succeed())
	text := func(s string) *string { return &s }
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "desk"},
		Spec: cantusv1alpha1.SkillServerSpec{
			AgentSkills: []cantusv1alpha1.AgentSkill{
				{Name: "refunds", Path: "acme/billing", ConfigMap: &cantusv1alpha1.SkillConfigMapSource{Name: cm.Name, Items: []cantusv1alpha1.SkillFileItem{{Key: "refunds.md", Path: "SKILL.md"}}}},
				{Name: "onboarding", ConfigMap: &cantusv1alpha1.SkillConfigMapSource{Name: cm.Name, Items: []cantusv1alpha1.SkillFileItem{{Key: "onboarding.md", Path: "SKILL.md"}}}},
			},
			Prompts: []cantusv1alpha1.ServedPrompt{
				{Name: "greet", Arguments: []cantusv1alpha1.PromptArgument{{Name: "who", Required: true}},
					Messages: []cantusv1alpha1.PromptMessage{{Role: "user", Content: cantusv1alpha1.PromptContent{Type: "text", Text: "Hello {{ .who }}"}}}},
				{Name: "audit_report", Messages: []cantusv1alpha1.PromptMessage{{Role: "user", Content: cantusv1alpha1.PromptContent{Type: "text", Text: "Audit"}}}},
			},
			Resources: []cantusv1alpha1.ServedResource{
				{URI: "docs://public/hours", Name: "hours", Text: text("9 to 5")},
				{URI: "docs://internal/budget", Name: "budget", Text: text("secret sums")},
			},
			ResourceTemplates: []cantusv1alpha1.ServedResourceTemplate{
				{URITemplate: "docs://pages/{page}", Name: "pages", Template: &cantusv1alpha1.TemplateBackend{Text: "page {{ .page }}"}},
			},
			Auth: &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}},
			Authorization: &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
				{Skills: []string{"onboarding"}, Prompts: []string{"greet"}, Resources: []string{"docs://public/*"}, ServiceAccounts: []string{ns + "/*"}},
				{Skills: []string{"*"}, Prompts: []string{"*"}, Resources: []string{"*"}, ServiceAccounts: []string{ns + "/librarian"}},
			}},
		},
	}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	content, problems := render.RenderContent(ss, render.ContentInputs{ConfigMaps: map[string]*corev1.ConfigMap{cm.Name: cm}})
	g.Expect(problems).To(BeEmpty())
	ss.Status.AgentSkills = content.Skills
	ss.Status.URL = "http://" + ss.Name + "." + ns + ".svc.cluster.local:8765/mcp"
	for _, p := range content.Prompts {
		ss.Status.Prompts = append(ss.Status.Prompts, p.Name)
	}
	for _, r := range content.Resources {
		ss.Status.Resources = append(ss.Status.Resources, r.URI)
	}
	ss.Status.ResourceCount = int32(len(content.Resources) + len(content.ResourceTemplates))
	g.Expect(k8sClient.Status().Update(ctx, ss)).To(Succeed())
	return ss
}

func skillURIs(s Server) []string {
	return names(s.AgentSkills, func(k AgentSkill) string { return k.URI })
}

func promptNames(s Server) []string { return names(s.Prompts, func(p Prompt) string { return p.Name }) }

func resourceURIs(s Server) []string {
	return append(names(s.Resources, func(r Resource) string { return r.URI }),
		names(s.ResourceTemplates, func(r ResourceTemplate) string { return r.URITemplate })...)
}
