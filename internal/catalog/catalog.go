// Package catalog serves the discovery catalog: every MCP server the operator runs and
// every tool they serve, across the cluster, to callers authenticated with a Kubernetes
// token and only for the namespaces where they may list SkillServers. It is served over
// HTTPS as JSON and as an MCP server of its own.
package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/catalog/formats"
)

// Endpoint names a server and says where and how it answers and whether it is Ready:
// what every listing of servers says of each (Server, and the MCP tool's summary).
type Endpoint struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	URL       string `json:"url"`
	Transport string `json:"transport"`
	Ready     bool   `json:"ready"`
}

// Ref names a server as namespace/name.
func (e Endpoint) Ref() string { return e.Namespace + "/" + e.Name }

// Server is one MCP server in the catalog.
type Server struct {
	Endpoint
	// Discovery is how the server lists its tools: All, or Search (the pinned tools and
	// the find and call meta-tools). Tools lists every tool the caller may call either way.
	Discovery string `json:"discovery"`
	Tools     []Tool `json:"tools"`
	// AgentSkills, Prompts, Resources and ResourceTemplates are what the server serves
	// besides tools, filtered by its rules as tools are.
	AgentSkills       []AgentSkill       `json:"agentSkills,omitempty"`
	Prompts           []Prompt           `json:"prompts,omitempty"`
	Resources         []Resource         `json:"resources,omitempty"`
	ResourceTemplates []ResourceTemplate `json:"resourceTemplates,omitempty"`
}

// AgentSkill is one Agent Skill a server serves (the MCP Skills extension): the URI of
// its SKILL.md, its frontmatter and the digest of its manifest, which a client compares
// with the server's skills/list entry.
type AgentSkill struct {
	URI         string          `json:"uri"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Digest      string          `json:"digest"`
	Frontmatter json.RawMessage `json:"frontmatter,omitempty"`
}

// Prompt is one prompt a server serves.
type Prompt struct {
	Name        string                          `json:"name"`
	Title       string                          `json:"title,omitempty"`
	Description string                          `json:"description,omitempty"`
	Arguments   []cantusv1alpha1.PromptArgument `json:"arguments,omitempty"`
}

// Resource is one static resource a server serves.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// ResourceTemplate is one resource template a server serves.
type ResourceTemplate struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// Tool is one tool of a server, with where it comes from.
type Tool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Source      string          `json:"source"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// OutputSchema and Annotations are the remote's, for imported tools.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	// Clipped names the members of an imported tool's definition that its import's
	// status cut short or left out for their size.
	Clipped []string `json:"clipped,omitempty"`
	// Eras, for an imported tool of a remote that serves both protocol eras, are the
	// eras its remote lists it in, and the gateway lists it to callers of ("2026-07-28"
	// alone: a tool of the stateless era). Empty: every era.
	Eras []string `json:"eras,omitempty"`
	// Digest is an imported tool's item digest, and Approval whether it was served
	// without approval (Automatic) or its definition was approved (Approved): what
	// an agent or a human can check against what was vetted.
	Digest   string `json:"digest,omitempty"`
	Approval string `json:"approval,omitempty"`
	// CallerCredentials, for an imported tool whose import has spec.callerCredentials,
	// says how the gateway gets each caller's own credential for the remote
	// (TokenExchange or PerCallerSecret): calls reach the remote as the caller.
	CallerCredentials string `json:"callerCredentials,omitempty"`
	// Connect, for an imported tool whose import is in connect mode, says that the
	// caller's user must connect an account at the remote's authorization server first,
	// where, and whether the caller has.
	Connect *ConnectInfo `json:"connect,omitempty"`
}

// Catalog reads the cluster's SkillServers and RemoteToolImports.
type Catalog struct {
	Reader client.Reader
	// Accounts, when set, says whether the viewing caller has connected an account for
	// an import in connect mode.
	Accounts AccountStates
	// RegistryDomain is the DNS domain, reversed, that begins the names of the registry
	// API (registry.go): cluster.local (the default) names SkillServer team-a/books
	// local.cluster.team-a/books.
	RegistryDomain string

	rendered renderCache
}

// Viewer decides what one caller of the catalog sees: the namespaces where it may list
// SkillServers, and in them the tools the servers' authorization rules let it call.
type Viewer interface {
	SeesNamespace(namespace string) bool
	MayCall(ss *cantusv1alpha1.SkillServer, tool string) bool
	// MayUse decides for prompts (by name), resources (by URI or uriTemplate) and
	// skills (by skill path) as MayCall does for tools.
	MayUse(ss *cantusv1alpha1.SkillServer, kind access.ItemKind, name string) bool
}

// Servers lists the servers and tools who may see.
func (c *Catalog) Servers(ctx context.Context, who Viewer) ([]Server, error) {
	servers, err := c.skillServersSeenBy(ctx, who)
	if err != nil {
		return nil, err
	}
	imports, err := c.importSchemas(ctx)
	if err != nil {
		return nil, err
	}
	var out []Server
	for _, ss := range servers {
		out = append(out, serverEntry(ss, c.rendered.of(ss).Config, imports, who))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref() < out[j].Ref() })
	c.setConnectStates(ctx, out, who)
	return out, nil
}

// skillServersSeenBy are the SkillServers in the namespaces who may see.
func (c *Catalog) skillServersSeenBy(ctx context.Context, who Viewer) ([]*cantusv1alpha1.SkillServer, error) {
	list := &cantusv1alpha1.SkillServerList{}
	if err := c.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list SkillServers: %w", err)
	}
	var out []*cantusv1alpha1.SkillServer
	for i := range list.Items {
		if who.SeesNamespace(list.Items[i].Namespace) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// Namespaces lists the namespaces that hold SkillServers, the only ones worth an access check.
func (c *Catalog) Namespaces(ctx context.Context) ([]string, error) {
	list := &cantusv1alpha1.SkillServerList{}
	if err := c.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list SkillServers: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, ss := range list.Items {
		if !seen[ss.Namespace] {
			seen[ss.Namespace] = true
			out = append(out, ss.Namespace)
		}
	}
	sort.Strings(out)
	return out, nil
}

// importedTools are what the catalog tells of imported tools from their imports.
type importedTools struct {
	// tools maps "namespace/import/tool" to the tool as the import discovered it.
	tools map[string]cantusv1alpha1.DiscoveredTool
	// callerCredentials maps "namespace/import" to the mode of its callerCredentials.
	callerCredentials map[string]string
	// authorizationServers maps "namespace/import" in connect mode to where callers
	// connect ("" while not discovered).
	authorizationServers map[string]string
}

func (c *Catalog) importSchemas(ctx context.Context) (importedTools, error) {
	list := &cantusv1alpha1.RemoteToolImportList{}
	if err := c.Reader.List(ctx, list); err != nil {
		return importedTools{}, fmt.Errorf("list RemoteToolImports: %w", err)
	}
	out := importedTools{tools: map[string]cantusv1alpha1.DiscoveredTool{}, callerCredentials: map[string]string{}, authorizationServers: map[string]string{}}
	for _, imp := range list.Items {
		for _, t := range imp.Status.Tools {
			out.tools[imp.Namespace+"/"+imp.Name+"/"+t.Name] = t
		}
		if cc := imp.Spec.CallerCredentials; cc != nil {
			out.callerCredentials[imp.Namespace+"/"+imp.Name] = cc.Mode()
			if cc.Connect != nil {
				out.authorizationServers[imp.Namespace+"/"+imp.Name] = connectServerOf(&imp)
			}
		}
	}
	return out, nil
}

func serverEntry(ss *cantusv1alpha1.SkillServer, cfg *adapterconfig.Config, imports importedTools, who Viewer) Server {
	transport := string(ss.Spec.TransportOrDefault())
	entry := Server{
		Endpoint: Endpoint{
			Namespace: ss.Namespace,
			Name:      ss.Name,
			URL:       ss.Status.URL,
			Transport: transport,
			Ready:     apimeta.IsStatusConditionTrue(ss.Status.Conditions, cantusv1alpha1.ConditionReady),
		},
		Discovery: string(ss.Spec.Discovery.ModeOrDefault()),
	}
	skills := map[string]*cantusv1alpha1.Skill{}
	for i := range ss.Spec.Skills {
		skills[ss.Spec.Skills[i].Name] = &ss.Spec.Skills[i]
	}
	// The status lists what is actually served; the spec and the imports say how.
	for _, served := range ss.Status.Tools {
		if !who.MayCall(ss, served.Name) {
			continue
		}
		entry.Tools = append(entry.Tools, toolEntry(ss, cfg, served, skills, imports))
	}
	addContent(&entry, ss, who)
	return entry
}

// addContent adds the skills, prompts and resources the caller may use. The status says
// which are served (content that failed its checks is not); the spec describes them.
func addContent(entry *Server, ss *cantusv1alpha1.SkillServer, who Viewer) {
	for _, s := range ss.Status.AgentSkills {
		if !who.MayUse(ss, access.ItemSkill, skillPath(s.URI)) {
			continue
		}
		skill := AgentSkill{URI: s.URI, Name: s.Name, Description: s.Description, Digest: s.Digest}
		if s.Frontmatter != nil {
			skill.Frontmatter = s.Frontmatter.Raw
		}
		entry.AgentSkills = append(entry.AgentSkills, skill)
	}
	served := make(map[string]bool, len(ss.Status.Prompts)+len(ss.Status.Resources))
	for _, name := range ss.Status.Prompts {
		served["prompt:"+name] = true
	}
	for _, uri := range ss.Status.Resources {
		served["resource:"+uri] = true
	}
	for _, p := range ss.Spec.Prompts {
		if served["prompt:"+p.Name] && who.MayUse(ss, access.ItemPrompt, p.Name) {
			entry.Prompts = append(entry.Prompts, Prompt{Name: p.Name, Title: p.Title, Description: p.Description, Arguments: p.Arguments})
		}
	}
	for _, r := range ss.Spec.Resources {
		if served["resource:"+r.URI] && who.MayUse(ss, access.ItemResource, r.URI) {
			entry.Resources = append(entry.Resources, Resource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MimeType: r.MimeType})
		}
	}
	// Templates are served whenever the content is (the status counts them only).
	if ss.Status.ResourceCount == 0 {
		return
	}
	for _, t := range ss.Spec.ResourceTemplates {
		if who.MayUse(ss, access.ItemResource, t.URITemplate) {
			entry.ResourceTemplates = append(entry.ResourceTemplates, ResourceTemplate{URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description, MimeType: t.MimeType})
		}
	}
}

// skillPath is the path of the skill whose SKILL.md is at uri: what rules name.
func skillPath(uri string) string {
	return strings.TrimSuffix(strings.TrimPrefix(uri, adapterconfig.SkillURIScheme), "/"+adapterconfig.SkillManifestFile)
}

func toolEntry(ss *cantusv1alpha1.SkillServer, cfg *adapterconfig.Config, served cantusv1alpha1.ServedTool, skills map[string]*cantusv1alpha1.Skill, imports importedTools) Tool {
	t := Tool{Name: served.Name, Source: served.Source}
	switch {
	case served.Source == "skill" && skills[served.Name] != nil:
		s := skills[served.Name]
		t.Description = s.Description
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
		if s.InputSchema != nil && len(s.InputSchema.Raw) > 0 {
			t.InputSchema = s.InputSchema.Raw
		}
	case served.Source == "memory" && cfg != nil && cfg.Memory != nil:
		if tool, err := adapterconfig.NewMemoryTool(*cfg.Memory); err == nil {
			def := tool.Definition()
			t.Description = def.Description
			t.InputSchema, _ = json.Marshal(def.InputSchema)
		}
	case strings.HasPrefix(served.Source, "import:"):
		remote := served.RemoteName
		if remote == "" {
			remote = served.Name
		}
		importRef := ss.Namespace + "/" + strings.TrimPrefix(served.Source, "import:")
		t.CallerCredentials = imports.callerCredentials[importRef]
		if server, ok := imports.authorizationServers[importRef]; ok {
			t.Connect = connectInfo(importRef, server)
		}
		if d, ok := imports.tools[importRef+"/"+remote]; ok {
			t.Title, t.Description, t.Clipped, t.Eras = d.Title, d.Description, d.Clipped, d.Eras
			t.Digest, t.Approval = d.Digest, string(d.Approval)
			if d.InputSchema != nil {
				t.InputSchema = d.InputSchema.Raw
			}
			if d.OutputSchema != nil {
				t.OutputSchema = d.OutputSchema.Raw
			}
			if d.Annotations != nil {
				t.Annotations = d.Annotations.Raw
			}
		}
	}
	return t
}

// Search finds tools whose name or description contains every word of the query,
// case-insensitively.
func Search(servers []Server, query string) []SearchHit {
	words := strings.Fields(strings.ToLower(query))
	var hits []SearchHit
	for _, s := range servers {
		for _, t := range s.Tools {
			text := strings.ToLower(t.Name + " " + t.Description)
			if containsAll(text, words) {
				hits = append(hits, SearchHit{Server: s.Ref(), URL: s.URL, Tool: t.Name, Description: t.Description, Source: t.Source})
			}
		}
	}
	return hits
}

// SearchHit is one tool found by Search.
type SearchHit struct {
	Server      string `json:"server"`
	URL         string `json:"url"`
	Tool        string `json:"tool"`
	Description string `json:"description,omitempty"`
	Source      string `json:"source"`
}

func containsAll(text string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

// RenderTool finds a tool of a server and renders it in a format (see formats.Formats).
func RenderTool(servers []Server, serverRef, tool, format string) (any, error) {
	if format == "" {
		format = "mcp"
	}
	s, err := FindServer(servers, serverRef)
	if err != nil {
		return nil, err
	}
	for _, t := range s.Tools {
		if t.Name == tool {
			return formats.Render(formats.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, Annotations: t.Annotations}, format)
		}
	}
	return nil, fmt.Errorf("server %s has no tool %q", s.Ref(), tool)
}

// FindServer finds a server by namespace/name (or by name alone).
func FindServer(servers []Server, serverRef string) (Server, error) {
	for _, s := range servers {
		if s.Ref() == serverRef || s.Name == serverRef {
			return s, nil
		}
	}
	return Server{}, fmt.Errorf("no server %q that you may see; give namespace/name", serverRef)
}
