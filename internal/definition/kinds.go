package definition

// Names a server announces in its capabilities for what it serves.
const (
	// CapabilityResourcesSubscribe is listed among a server's capabilities when it
	// declared resources.subscribe: a gateway relays its clients' resources/subscribe to
	// it.
	CapabilityResourcesSubscribe = "resources.subscribe"
	// SkillsExtension is the MCP Skills extension's name in capabilities.extensions: a
	// server announcing it serves skills (SkillKind).
	SkillsExtension = "io.modelcontextprotocol/skills"
)

// The kinds of items a server serves, with the members of their definitions.
var (
	// ToolKind is a tool: its name, title, description, schemas and annotations, and
	// what a host renders or runs of it: icons (it fetches their URLs), execution (task
	// support) and _meta (where MCP Apps put the UI resource a host shows).
	ToolKind = ItemKind{Name: "tool", Members: []string{
		"name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons", "execution", "_meta",
	}}
	// PromptKind is a prompt: its name, title, description and arguments, its icons and
	// _meta.
	PromptKind = ItemKind{Name: "prompt", Members: []string{"name", "title", "description", "arguments", "icons", "_meta"}}
	// ResourceKind is a static resource: its URI and what a client is told of it. Its
	// size is ignored: it changes with the content, which no definition of a resource
	// covers, so digesting it would hold every edit of a document for approval; in
	// Manual mode a gateway does not serve it.
	ResourceKind = ItemKind{Name: "resource", Members: []string{"uri", "name", "title", "description", "mimeType", "annotations", "icons", "_meta"},
		Ignored: []string{"size"}}
	// ResourceTemplateKind is a resource template.
	ResourceTemplateKind = ItemKind{Name: "resource template", Members: []string{"uriTemplate", "name", "title", "description", "mimeType", "annotations", "icons", "_meta"}}
	// SkillKind is a skill's manifest, the Skills extension's skills/list entry: the URI
	// of its SKILL.md, its frontmatter and its resources (each file's uri, digest and
	// size), and _meta. Clients read the frontmatter's name and description and each
	// resource's uri and digest by name, so their case variants are refused too.
	SkillKind = ItemKind{Name: "skill", Members: []string{"uri", "frontmatter", "resources", "_meta"}, Inner: map[string][]string{
		"frontmatter": {"name", "description"},
		"resources":   {"uri", "digest", "size", "mimeType"},
	}}
)
