package v1alpha1

import "k8s.io/apimachinery/pkg/runtime"

// What a remote serves besides tools: prompts, resources and resource templates. The
// status lists them as the tools are listed, bounded (the remote is not trusted), and
// a gateway SkillServer re-exports them.

// Conditions and reasons of the content an import lists.
const (
	// ConditionContentDiscovered is True when the status lists the remote's prompts,
	// resources and resource templates; set only for a remote that announces prompts or
	// resources.
	ConditionContentDiscovered = "ContentDiscovered"
	ReasonContentListed        = "ContentListed"
	// ReasonContentListFailed: a listing failed; its kind keeps the entries of the last
	// listing that worked, and the tools are served regardless.
	ReasonContentListFailed = "ContentListFailed"

	// ConditionImportedContentServed is False on a gateway when imported prompts,
	// resources or resource templates are left out: their name or URI collides
	// (reason NameCollision) or they cannot be served as listed (ContentSkipped).
	ConditionImportedContentServed = "ImportedContentServed"
	ReasonContentServed            = "ContentServed"
	ReasonContentSkipped           = "ContentSkipped"
)

// Bounds of the content in a RemoteToolImport's status. A probe accepts at most
// MaxDiscoveredContentItems entries of each kind (a listing with more fails, and its
// kind keeps its earlier entries).
const (
	MaxDiscoveredContentItems = 1000
)

// ContentFilters filter what a remote serves besides tools; nothing is filtered out
// when unset. Globs are path.Match patterns, so "*" does not cross a "/": to keep
// every resource under file:///docs/ at any depth, list a glob per depth or use the
// exclude globs.
type ContentFilters struct {
	// Prompts filters the remote's prompts by name.
	// +optional
	Prompts *ToolFilter `json:"prompts,omitempty"`
	// Resources filters the remote's resources by URI.
	// +optional
	Resources *ToolFilter `json:"resources,omitempty"`
	// ResourceTemplates filters the remote's resource templates by URI template.
	// +optional
	ResourceTemplates *ToolFilter `json:"resourceTemplates,omitempty"`
	// Skills filters the remote's Agent Skills by skill path ("acme/refunds" for
	// skill://acme/refunds/SKILL.md).
	// +optional
	Skills *ToolFilter `json:"skills,omitempty"`
}

// RemoteContentStatus lists what the remote serves besides tools, after the filters,
// at the last successful handshake: prompts, resources, resource templates and Agent
// Skills. Bounds: at most 1000 entries of each kind (a
// probe refuses more); names are clipped to 256 bytes, URIs and URI templates to
// 2 KiB and descriptions to 4 KiB; a definition over 16 KiB (a skill's: 64 KiB) is
// left out (and named in clipped); definitions are kept while the lists hold at most
// 256 KiB together, entries without definitions while they hold at most 384 KiB, and contentTruncated says when
// either limit left something out. An entry without its definition is not re-exported
// by gateways. The counts are the remote's, whatever the status holds.
type RemoteContentStatus struct {
	// Prompts are the remote's prompts.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	Prompts []DiscoveredPrompt `json:"prompts,omitempty"`
	// PromptCount is the number of prompts the remote lists (after the filters).
	// +optional
	PromptCount int32 `json:"promptCount,omitempty"`
	// Resources are the remote's static resources.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	Resources []DiscoveredResource `json:"resources,omitempty"`
	// ResourceCount is the number of resources the remote lists (after the filters).
	// +optional
	ResourceCount int32 `json:"resourceCount,omitempty"`
	// ResourceTemplates are the remote's resource templates.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	ResourceTemplates []DiscoveredResourceTemplate `json:"resourceTemplates,omitempty"`
	// ResourceTemplateCount is the number of resource templates the remote lists (after
	// the filters).
	// +optional
	ResourceTemplateCount int32 `json:"resourceTemplateCount,omitempty"`
	// Skills are the remote's Agent Skills (skills/list of a remote announcing the
	// Skills extension, io.modelcontextprotocol/skills). A skill's definition (its
	// skills/list entry: SKILL.md's URI, frontmatter, and each file's URI, digest and
	// size) may hold 64 KiB.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	Skills []DiscoveredSkill `json:"skills,omitempty"`
	// SkillCount is the number of skills the remote lists (after the filters).
	// +optional
	SkillCount int32 `json:"skillCount,omitempty"`
	// ContentTruncated is true when entries or their definitions were left out to keep
	// the status small.
	// +optional
	ContentTruncated bool `json:"contentTruncated,omitempty"`
}

// DiscoveredContent is what every listed entry carries besides its key.
type DiscoveredContent struct {
	// Name is the remote's name for the item (clipped).
	// +optional
	Name string `json:"name,omitempty"`
	// Description as the remote sent it (clipped).
	// +optional
	Description string `json:"description,omitempty"`
	// Digest is the sha256 (hex) of the item's definition members (its kind's: e.g. a
	// prompt's name, title, description, arguments, icons and _meta), canonical JSON. In
	// Manual approval mode a gateway serves exactly those members of an approved item.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Approval is Automatic, Approved (served) or Pending (withheld by gateways until
	// an owner approves it; see status.approval).
	// +optional
	Approval ItemApproval `json:"approval,omitempty"`
	// Definition is the remote's list entry as sent, which gateways serve.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	Definition *runtime.RawExtension `json:"definition,omitempty"`
	// Clipped names what was cut short (name, uri, description) or left out
	// (definition) for its size.
	// +listType=atomic
	// +optional
	Clipped []string `json:"clipped,omitempty"`
	// Eras are the protocol eras the remote lists the item in, newest first, when it
	// serves more than one (status.eras). An item of one era only is served to the
	// callers of that era; one listed in both is served as the 2025-11-25 listing
	// defines it (what its digest covers).
	// +kubebuilder:validation:MaxItems=2
	// +listType=atomic
	// +optional
	Eras []string `json:"eras,omitempty"`
}

// DiscoveredPrompt is one prompt of the remote, by name.
type DiscoveredPrompt struct {
	DiscoveredContent `json:",inline"`
}

// DiscoveredResource is one static resource of the remote, by URI.
type DiscoveredResource struct {
	// URI of the resource (clipped; the definition holds it whole).
	URI               string `json:"uri"`
	DiscoveredContent `json:",inline"`
}

// DiscoveredResourceTemplate is one resource template of the remote, by URI template.
type DiscoveredResourceTemplate struct {
	// URITemplate of the template (clipped; the definition holds it whole).
	URITemplate       string `json:"uriTemplate"`
	DiscoveredContent `json:",inline"`
}

// DiscoveredSkill is one Agent Skill of the remote, by the URI of its SKILL.md; its name
// and description are its frontmatter's.
type DiscoveredSkill struct {
	// URI of the skill's SKILL.md (clipped; the definition holds it whole).
	URI               string `json:"uri"`
	DiscoveredContent `json:",inline"`
}
