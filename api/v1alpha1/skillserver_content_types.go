package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// What a SkillServer serves besides tools: Agent Skills (the MCP Skills extension),
// resources, resource templates and prompts.

// ContentLabel must be "true" on every ConfigMap a SkillServer reads skill files or
// resources from: the operator watches only ConfigMaps that carry it, so that it does
// not hold every ConfigMap of the cluster in memory.
const ContentLabel = "cantus.dev/content"

// AgentSkill is one Agent Skill: a directory with a SKILL.md and its supporting files,
// served at skill://<path>/<name>/<file>.
// +kubebuilder:validation:XValidation:rule="(has(self.configMap) ? 1 : 0) + (has(self.image) ? 1 : 0) == 1",message="an agent skill needs exactly one source: set either configMap or image"
type AgentSkill struct {
	// Name is the skill's name: lowercase letters, digits and single hyphens, at most 64
	// characters. It must equal the name in SKILL.md's frontmatter.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]+(-[a-z0-9]+)*$')",message="an agent skill name is lowercase letters, digits and single hyphens, not starting or ending with one (the Agent Skills rule), e.g. pdf-forms"
	// +required
	Name string `json:"name"`

	// Path is an optional organizational prefix: "acme/billing" serves the skill at
	// skill://acme/billing/<name>/SKILL.md.
	// +kubebuilder:validation:MaxLength=190
	// It is segments of A-Z a-z 0-9 _ . - joined by single /, without . or .. segments
	// and without a leading or trailing /. (A pattern, not a CEL rule: CEL's cost budget
	// would not admit a split over every skill.)
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9_-][A-Za-z0-9_.-]*|\.[A-Za-z0-9_-][A-Za-z0-9_.-]*|\.\.[A-Za-z0-9_.-]+)(/([A-Za-z0-9_-][A-Za-z0-9_.-]*|\.[A-Za-z0-9_-][A-Za-z0-9_.-]*|\.\.[A-Za-z0-9_.-]+))*$`
	// +optional
	Path string `json:"path,omitempty"`

	// ConfigMap holds the skill's files. It must carry the label cantus.dev/content=true.
	// +optional
	ConfigMap *SkillConfigMapSource `json:"configMap,omitempty"`

	// Image mounts the skill's files from an OCI image or artifact (a Kubernetes image
	// volume; kubernetes runtime only, and nodes with image volume support). Its
	// reference must be allowed by the images of a ToolSourcePolicy covering the
	// namespace.
	// +optional
	Image *SkillImageSource `json:"image,omitempty"`
}

// SkillConfigMapSource maps the keys of a ConfigMap to the files of a skill the way a
// ConfigMap volume does: without items every key (of data and binaryData) is a file
// named by its key; with items only those keys, each at its path.
type SkillConfigMapSource struct {
	// Name of the ConfigMap in the SkillServer's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Items place keys at paths, e.g. key references.FORMS.md at path
	// references/FORMS.md, since ConfigMap keys cannot hold "/".
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=512
	// +optional
	Items []SkillFileItem `json:"items,omitempty"`
}

// SkillFileItem places one ConfigMap key at a path of the skill's directory.
type SkillFileItem struct {
	// Key in the ConfigMap's data or binaryData.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`

	// Path of the file relative to the skill's directory, "/"-separated.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// It is relative to the skill's directory: no leading or trailing /, no empty, . or
	// .. segments.
	// +kubebuilder:validation:Pattern=`^([^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+)(/([^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+))*$`
	// +required
	Path string `json:"path"`
}

// SkillImageSource mounts a skill from an OCI image or artifact.
type SkillImageSource struct {
	// Reference of the image, e.g. registry.example.com/skills/pdf-forms:1.2.0.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Reference string `json:"reference"`

	// PullPolicy of the image volume.
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	// +optional
	PullPolicy corev1.PullPolicy `json:"pullPolicy,omitempty"`

	// Path is the folder of the image that holds the skill (its SKILL.md at the folder's
	// root), e.g. skills/pdf-forms for an image that carries several skills; empty means
	// the image's root. It is relative: no leading or trailing /, no empty, . or ..
	// segments.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^([^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+)(/([^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+))*$`
	// +optional
	Path string `json:"path,omitempty"`
}

// ContentSource reports where an agent skill comes from.
func (s *AgentSkill) ContentSource() string {
	if s.Image != nil {
		return "image " + s.Image.Reference
	}
	if s.ConfigMap != nil {
		return "ConfigMap " + s.ConfigMap.Name
	}
	return "no source"
}

// SkillPath is the skill's path: its prefix, then its name.
func (s *AgentSkill) SkillPath() string {
	if s.Path == "" {
		return s.Name
	}
	return s.Path + "/" + s.Name
}

// ServedResource is one static MCP resource.
// +kubebuilder:validation:XValidation:rule="(has(self.text) ? 1 : 0) + (has(self.configMapKeyRef) ? 1 : 0) == 1",message="a resource needs exactly one content: set either text or configMapKeyRef"
type ServedResource struct {
	// URI identifies the resource: an absolute URI with a scheme and no spaces, e.g.
	// docs://team/guide.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9+.-]*:[^ ]+$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('skill://')",message="skill:// URIs are the files of agentSkills: serve the file as part of an agent skill"
	// +required
	URI string `json:"uri"`

	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Title string `json:"title,omitempty"`
	// +kubebuilder:validation:MaxLength=8192
	// +optional
	Description string `json:"description,omitempty"`
	// MimeType of the content, e.g. text/markdown.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	MimeType string `json:"mimeType,omitempty"`
	// +optional
	Annotations *ResourceAnnotations `json:"annotations,omitempty"`

	// Text is the content, inline.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	Text *string `json:"text,omitempty"`

	// ConfigMapKeyRef reads the content from a ConfigMap labelled cantus.dev/content=true:
	// a data key is served as text, a binaryData key as a blob.
	// +optional
	ConfigMapKeyRef *ContentKeyRef `json:"configMapKeyRef,omitempty"`
}

// ContentKeyRef names one key of a ConfigMap in the same namespace.
type ContentKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`
}

// ResourceAnnotations are the MCP annotations of a resource.
type ResourceAnnotations struct {
	// Audience is who the resource is for: user, assistant or both.
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	// +optional
	Audience []PromptRole `json:"audience,omitempty"`
	// Priority from 0 (optional) to 1 (required), as a decimal string, e.g. "0.8".
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]{1,6})?|1(\.0{1,6})?)$`
	// +optional
	Priority string `json:"priority,omitempty"`
}

// ServedResourceTemplate computes resources from the variables of their URI: reading a
// matching URI runs the backend with the variables as the arguments.
// +kubebuilder:validation:XValidation:rule="(has(self.template) ? 1 : 0) + (has(self.http) ? 1 : 0) == 1",message="a resource template needs exactly one backend: set either template or http"
type ServedResourceTemplate struct {
	// URITemplate is an RFC 6570 template, e.g. docs://{team}/{page}.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('skill://')",message="skill:// URIs are the files of agentSkills: use another scheme"
	// +required
	URITemplate string `json:"uriTemplate"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Title string `json:"title,omitempty"`
	// +kubebuilder:validation:MaxLength=8192
	// +optional
	Description string `json:"description,omitempty"`
	// +kubebuilder:validation:MaxLength=255
	// +optional
	MimeType string `json:"mimeType,omitempty"`
	// Template renders the content over the URI's variables.
	// +optional
	Template *TemplateBackend `json:"template,omitempty"`
	// HTTP POSTs the URI's variables as JSON and serves the answer's body.
	// +optional
	HTTP *HTTPBackend `json:"http,omitempty"`
}

// PromptRole is who says a prompt message.
// +kubebuilder:validation:Enum=user;assistant
type PromptRole string

// ServedPrompt is a prompt template users pick.
// +kubebuilder:validation:XValidation:rule="(has(self.messages) && size(self.messages) > 0 ? 1 : 0) + (has(self.http) ? 1 : 0) == 1",message="a prompt needs exactly one of messages and http"
type ServedPrompt struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Title string `json:"title,omitempty"`
	// +kubebuilder:validation:MaxLength=8192
	// +optional
	Description string `json:"description,omitempty"`
	// Arguments the prompt takes; a get without a required one is refused, naming it.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Arguments []PromptArgument `json:"arguments,omitempty"`
	// Messages are rendered over the arguments: every text is a Go text/template.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Messages []PromptMessage `json:"messages,omitempty"`
	// HTTP POSTs the arguments as JSON; the answer is prompts/get's result ("messages").
	// +optional
	HTTP *HTTPBackend `json:"http,omitempty"`
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`
	// +optional
	Required bool `json:"required,omitempty"`
}

// PromptMessage is one message of a prompt.
type PromptMessage struct {
	// +required
	Role PromptRole `json:"role"`
	// +required
	Content PromptContent `json:"content"`
}

// PromptContentType is the kind of a prompt message's content.
// +kubebuilder:validation:Enum=text;image;audio;resource
type PromptContentType string

// PromptContent is one content block: text uses text; image and audio use data and
// mimeType; resource uses resource.
// +kubebuilder:validation:XValidation:rule="self.type != 'text' || has(self.text)",message="a text content needs text"
// +kubebuilder:validation:XValidation:rule="!(self.type in ['image', 'audio']) || (has(self.data) && has(self.mimeType))",message="an image or audio content needs data (base64) and mimeType"
// +kubebuilder:validation:XValidation:rule="self.type != 'resource' || has(self.resource)",message="a resource content needs resource"
type PromptContent struct {
	// +required
	Type PromptContentType `json:"type"`
	// Text is a Go text/template over the arguments.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	Text string `json:"text,omitempty"`
	// Data is base64, for image and audio.
	// +kubebuilder:validation:MaxLength=262144
	// +optional
	Data string `json:"data,omitempty"`
	// +kubebuilder:validation:MaxLength=255
	// +optional
	MimeType string `json:"mimeType,omitempty"`
	// Resource is an embedded resource.
	// +optional
	Resource *PromptResource `json:"resource,omitempty"`
}

// PromptResource is an embedded resource of a prompt message.
// +kubebuilder:validation:XValidation:rule="(has(self.text) ? 1 : 0) + (has(self.blob) ? 1 : 0) == 1",message="an embedded resource needs exactly one of text and blob"
type PromptResource struct {
	// URI is a Go text/template over the arguments, e.g. docs://{{ .page }}.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +required
	URI string `json:"uri"`
	// +kubebuilder:validation:MaxLength=255
	// +optional
	MimeType string `json:"mimeType,omitempty"`
	// Text is a Go text/template over the arguments.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	Text *string `json:"text,omitempty"`
	// Blob is base64.
	// +kubebuilder:validation:MaxLength=262144
	// +optional
	Blob *string `json:"blob,omitempty"`
}

// ServedAgentSkill is one agent skill the server serves.
type ServedAgentSkill struct {
	// URI of its SKILL.md.
	URI string `json:"uri"`
	// Name of the skill.
	Name string `json:"name"`
	// Digest of its manifest: "sha256:" and the item digest of its skills/list entry
	// (uri, frontmatter, and each file's uri, digest and size), so that any change to
	// any file or to the frontmatter changes it.
	Digest string `json:"digest"`
	// Description is the frontmatter's description, which agents read to decide whether
	// to load the skill.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`
	// Frontmatter is SKILL.md's frontmatter as the skill's skills/list entry carries it,
	// for the discovery catalog; omitted when larger than 4 KiB (FrontmatterClipped).
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	Frontmatter *runtime.RawExtension `json:"frontmatter,omitempty"`
	// FrontmatterClipped says the frontmatter was too large for the status.
	// +optional
	FrontmatterClipped bool `json:"frontmatterClipped,omitempty"`
}
