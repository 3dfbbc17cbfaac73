package adapterconfig

import "encoding/json"

// What a SkillServer serves besides tools: Agent Skills (the MCP Skills extension,
// io.modelcontextprotocol/skills), resources, resource templates and prompts.
//
// File contents never travel inline in the config for skills, and not for large
// resources: the config names each file by its SHA-256 digest, and the adapter reads
// the bytes from ContentDir, where the file named by the 64 lowercase hex digits of a
// digest holds exactly those bytes. On the kubernetes runtime ContentDir is a volume of
// operator-owned, immutable ConfigMaps whose keys are those hex digests; under the local
// runtime it is a folder the manager writes. The adapter checks every file's digest and
// size when it loads a config and refuses a config whose content is missing or differs,
// so what it serves is always what the operator validated.

// Limits on what a config may ask the adapter to hold in memory.
const (
	// MaxSkillFiles is the Skills extension's limit on the files of one skill,
	// SKILL.md included.
	MaxSkillFiles = 512
	// MaxSkillBytes bounds the sum of a skill's file sizes: the Skills extension's
	// 16 MiB, which every conforming host accepts.
	MaxSkillBytes = 16 << 20
	// MaxContentBytes bounds everything one config serves from ContentDir (skills
	// and resources together): the adapter holds it in memory.
	MaxContentBytes = 64 << 20
	// MaxInlineTextBytes bounds a resource's inline Text; larger content goes to
	// ContentDir.
	MaxInlineTextBytes = 64 << 10
	// MaxSkillNameLength is the Agent Skills limit on a skill's name.
	MaxSkillNameLength = 64
	// MaxSkillDescriptionLength is the Agent Skills limit on a skill's description.
	MaxSkillDescriptionLength = 1024
)

// SkillManifestFile is the file every Agent Skill has at its root.
const SkillManifestFile = "SKILL.md"

// SkillURIScheme is the scheme of skill files: skill://<skill path>/<file path>.
const SkillURIScheme = "skill://"

// MimeTypeDirectory marks a directory resource (resources/directory/read).
const MimeTypeDirectory = "inode/directory"

// DigestPrefix starts every digest: "sha256:" and 64 lowercase hex digits.
const DigestPrefix = "sha256:"

// AgentSkill is one Agent Skill: a directory with a SKILL.md and its supporting files,
// served at skill://<Path>/<file path>.
type AgentSkill struct {
	// Path is the skill's path: optional organizational prefix segments, then the
	// skill's name ("acme/billing/refunds", or just "refunds"). Its last segment equals
	// Frontmatter's name.
	Path string `json:"path"`
	// Frontmatter is SKILL.md's YAML frontmatter as a JSON object, rendered by the
	// operator with YAML 1.2 semantics; it is served verbatim in skills/list and
	// skills/get, and carries at least "name" and "description" (strings).
	Frontmatter json.RawMessage `json:"frontmatter"`
	// Files are every file of the skill, SKILL.md included, each once.
	Files []SkillFile `json:"files"`
}

// SkillFile is one file of a skill, stored in ContentDir under its digest.
type SkillFile struct {
	// Path is relative to the skill's directory, "/"-separated ("references/FORMS.md").
	Path string `json:"path"`
	// Digest is "sha256:<64 lowercase hex>" of the file's bytes.
	Digest string `json:"digest"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// MimeType is the file's media type; text types (text/*, and JSON, XML, YAML,
	// JavaScript and shell application types) are served as text, others as a base64
	// blob. Empty means text/markdown for SKILL.md and application/octet-stream
	// otherwise.
	MimeType string `json:"mimeType,omitempty"`
}

// Resource is one static MCP resource. Exactly one of Text and Content is set.
type Resource struct {
	URI         string               `json:"uri"`
	Name        string               `json:"name"`
	Title       string               `json:"title,omitempty"`
	Description string               `json:"description,omitempty"`
	MimeType    string               `json:"mimeType,omitempty"`
	Annotations *ResourceAnnotations `json:"annotations,omitempty"`
	// Text is small inline text content (at most MaxInlineTextBytes).
	Text *string `json:"text,omitempty"`
	// Content is content stored in ContentDir.
	Content *ContentRef `json:"content,omitempty"`
}

// ResourceAnnotations are the MCP annotations of a resource or resource template.
type ResourceAnnotations struct {
	// Audience is "user" and/or "assistant".
	Audience []string `json:"audience,omitempty"`
	// Priority is 0 (optional) to 1 (required).
	Priority *float64 `json:"priority,omitempty"`
	// LastModified is an RFC 3339 timestamp.
	LastModified string `json:"lastModified,omitempty"`
}

// ContentRef names bytes stored in ContentDir.
type ContentRef struct {
	// Digest is "sha256:<64 lowercase hex>" of the bytes.
	Digest string `json:"digest"`
	// Size is their length in bytes.
	Size int64 `json:"size"`
	// Binary serves the bytes as a base64 blob; otherwise they are served as text
	// and must be UTF-8.
	Binary bool `json:"binary,omitempty"`
}

// ResourceTemplate is an MCP resource template: reading a URI that matches URITemplate
// runs the backend with the URI's variables as the arguments (strings), and answers
// one content with the template's MimeType: the rendered text, or the http backend's
// answer body. Exactly one backend is set.
type ResourceTemplate struct {
	// URITemplate is an RFC 6570 template (levels 1-3), e.g. "docs://{team}/{page}".
	URITemplate string               `json:"uriTemplate"`
	Name        string               `json:"name"`
	Title       string               `json:"title,omitempty"`
	Description string               `json:"description,omitempty"`
	MimeType    string               `json:"mimeType,omitempty"`
	Annotations *ResourceAnnotations `json:"annotations,omitempty"`
	Template    *TemplateBackend     `json:"template,omitempty"`
	HTTP        *HTTPBackend         `json:"http,omitempty"`
}

// Prompt is an MCP prompt. Exactly one of Messages and HTTP is set.
type Prompt struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	// Messages are rendered over the arguments: every Text is a Go text/template.
	Messages []PromptMessage `json:"messages,omitempty"`
	// HTTP POSTs the arguments as a JSON object of strings; the answer is a JSON object
	// with "messages" (and optionally "description") as prompts/get returns them.
	HTTP *HTTPBackend `json:"http,omitempty"`
}

// PromptArgument is one argument of a prompt. A prompts/get without a required
// argument is answered with a JSON-RPC invalid-params error (-32602) naming it.
type PromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// Prompt message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Prompt content types.
const (
	ContentText     = "text"
	ContentImage    = "image"
	ContentAudio    = "audio"
	ContentResource = "resource"
)

// PromptMessage is one message of a prompt.
type PromptMessage struct {
	// Role is RoleUser or RoleAssistant.
	Role    string        `json:"role"`
	Content PromptContent `json:"content"`
}

// PromptContent is one content block: Type ContentText uses Text; ContentImage and
// ContentAudio use Data and MimeType; ContentResource uses Resource.
type PromptContent struct {
	Type string `json:"type"`
	// Text is a Go text/template over the arguments (missing keys are an error).
	Text string `json:"text,omitempty"`
	// Data is base64.
	Data     string          `json:"data,omitempty"`
	MimeType string          `json:"mimeType,omitempty"`
	Resource *PromptResource `json:"resource,omitempty"`
}

// PromptResource is an embedded resource: exactly one of Text (a Go text/template over
// the arguments, like URI) and Blob (base64).
type PromptResource struct {
	// URI is a Go text/template over the arguments too, so a prompt can embed the
	// resource its caller names.
	URI      string  `json:"uri"`
	MimeType string  `json:"mimeType,omitempty"`
	Text     *string `json:"text,omitempty"`
	Blob     *string `json:"blob,omitempty"`
}
