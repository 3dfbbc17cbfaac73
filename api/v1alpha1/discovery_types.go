package v1alpha1

// DiscoveryMode says how a SkillServer shows its tools to clients.
// +kubebuilder:validation:Enum=All;Search
type DiscoveryMode string

// The discovery modes.
const (
	// DiscoveryAll lists every tool the caller may call (the behaviour without
	// spec.discovery).
	DiscoveryAll DiscoveryMode = "All"
	// DiscoverySearch lists the pinned tools and two meta-tools: one that finds tools
	// by a task description, one that calls a found tool.
	DiscoverySearch DiscoveryMode = "Search"
)

// The defaults of spec.discovery, one constant each, as its markers say.
const (
	DefaultFindToolName   = "find_tools"
	DefaultCallToolName   = "call_tool"
	DefaultDiscoveryLimit = 5
	DefaultDiscoveryMax   = 20
)

// DiscoverySpec is progressive discovery: a server with many tools shows an agent a
// few and lets it find the rest, so that the model's context is not filled with tool
// definitions it does not need. The adapter indexes every served tool (declared and
// imported) and agent skill when it loads its config; a search answers only tools the
// caller's authorization rules let it call, and works without a session.
// +kubebuilder:validation:XValidation:rule="self.findToolName != self.callToolName",message="findToolName and callToolName must differ: the two meta-tools cannot share a name"
// +kubebuilder:validation:XValidation:rule="self.limit.default <= self.limit.max",message="limit.default must not exceed limit.max"
type DiscoverySpec struct {
	// Mode is All (every tool is listed, as without spec.discovery) or Search
	// (tools/list answers the pinned tools plus the find and call meta-tools).
	// +kubebuilder:default=All
	// +optional
	Mode DiscoveryMode `json:"mode,omitempty"`

	// Pinned are globs of tool names ('*' matches any run of characters) listed in
	// Search mode besides the meta-tools: the tools an agent needs on every task.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_.*-]+$`
	// +optional
	Pinned []string `json:"pinned,omitempty"`

	// FindToolName names the meta-tool that finds tools by a query. A served tool of
	// the same name is refused when the server is rendered.
	// +kubebuilder:default=find_tools
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9_.-]+$')",message="findToolName may use only A-Z, a-z, 0-9, '_', '-' and '.' (MCP tool-name rules)"
	// +optional
	FindToolName string `json:"findToolName,omitempty"`

	// CallToolName names the meta-tool that calls a found tool by name, for clients
	// that cannot call a tool they were not listed. A served tool of the same name is
	// refused when the server is rendered.
	// +kubebuilder:default=call_tool
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9_.-]+$')",message="callToolName may use only A-Z, a-z, 0-9, '_', '-' and '.' (MCP tool-name rules)"
	// +optional
	CallToolName string `json:"callToolName,omitempty"`

	// Limit bounds how many tools one search answers.
	// +kubebuilder:default={}
	// +optional
	Limit DiscoveryLimit `json:"limit,omitempty"`
}

// DiscoveryLimit is how many tools a search answers: Default when the query names no
// limit, never more than Max.
type DiscoveryLimit struct {
	// Default is the number of tools a search answers when it asks for no limit.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Default int32 `json:"default,omitempty"`

	// Max is the most tools a search answers, whatever it asks for.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Max int32 `json:"max,omitempty"`
}

// DiscoveryStatus says how the server shows its tools.
type DiscoveryStatus struct {
	// Mode is the discovery mode the rendered config uses.
	// +optional
	Mode DiscoveryMode `json:"mode,omitempty"`

	// IndexedTools is the number of tools the adapter's search index holds in Search
	// mode (every tool served, before any caller's rules).
	// +optional
	IndexedTools int32 `json:"indexedTools,omitempty"`

	// IndexedSkills is the number of agent skills the index holds in Search mode.
	// +optional
	IndexedSkills int32 `json:"indexedSkills,omitempty"`
}

// ModeOrDefault is the mode, All when unset.
func (d *DiscoverySpec) ModeOrDefault() DiscoveryMode {
	if d == nil || d.Mode == "" {
		return DiscoveryAll
	}
	return d.Mode
}

// FindToolNameOrDefault is the find meta-tool's name.
func (d *DiscoverySpec) FindToolNameOrDefault() string {
	if d == nil || d.FindToolName == "" {
		return DefaultFindToolName
	}
	return d.FindToolName
}

// CallToolNameOrDefault is the call meta-tool's name.
func (d *DiscoverySpec) CallToolNameOrDefault() string {
	if d == nil || d.CallToolName == "" {
		return DefaultCallToolName
	}
	return d.CallToolName
}

// LimitOrDefault is the number of tools a search answers when it names no limit.
func (d *DiscoverySpec) LimitOrDefault() int32 {
	if d == nil || d.Limit.Default == 0 {
		return DefaultDiscoveryLimit
	}
	return d.Limit.Default
}

// MaxLimitOrDefault is the most tools a search answers.
func (d *DiscoverySpec) MaxLimitOrDefault() int32 {
	if d == nil || d.Limit.Max == 0 {
		return DefaultDiscoveryMax
	}
	return d.Limit.Max
}
