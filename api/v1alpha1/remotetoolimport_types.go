package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ImportTransport is how the operator reaches a remote MCP server.
// +kubebuilder:validation:Enum=streamable-http;sse;stdio
type ImportTransport string

const (
	// ImportTransportStreamableHTTP is MCP's streamable HTTP transport.
	ImportTransportStreamableHTTP ImportTransport = "streamable-http"
	// ImportTransportSSE is MCP's older HTTP+SSE transport.
	ImportTransportSSE ImportTransport = "sse"
	// ImportTransportStdio runs a command behind a bridge that serves it over streamable HTTP.
	ImportTransportStdio ImportTransport = "stdio"
)

// The defaults of a RemoteToolImport, one constant each, as its +kubebuilder:default
// markers say (a test holds the CRD to these).
const (
	DefaultImportTransport = ImportTransportStreamableHTTP
	DefaultRefreshInterval = 5 * time.Minute
	DefaultProbeTimeout    = 10 * time.Second
	// DefaultCABundleKey is the key read from a CA bundle's ConfigMap that names none.
	DefaultCABundleKey = "ca.crt"
)

// RemoteToolImportSpec names a remote MCP server whose tools the cluster may use.
// +kubebuilder:validation:XValidation:rule="self.transport == 'stdio' ? !has(self.url) : has(self.url)",message="streamable-http and sse imports need url; stdio imports take stdio.image and stdio.command instead of url"
// +kubebuilder:validation:XValidation:rule="self.transport == 'stdio' ? has(self.stdio) : !has(self.stdio)",message="stdio imports need stdio (image and command); only stdio imports may set it"
// +kubebuilder:validation:XValidation:rule="!has(self.probeCredentials) || has(self.callerCredentials)",message="probeCredentials authenticate the operator's probes of a remote whose calls carry each caller's credential: set callerCredentials too, or give the probe a static key in headers"
// +kubebuilder:validation:XValidation:rule="!(self.transport == 'stdio' && has(self.callerCredentials))",message="callerCredentials is refused for stdio imports: one bridge process serves every caller, so it cannot act as each of them"
type RemoteToolImportSpec struct {
	// Transport is the remote server's MCP transport.
	// +kubebuilder:default=streamable-http
	// +optional
	Transport ImportTransport `json:"transport,omitempty"`

	// URL of the MCP endpoint, for streamable-http and sse.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="url must be an absolute http:// or https:// URL (file:, ftp:, javascript: and other schemes are refused)"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getHostname() != ''",message="url must name a host, e.g. https://mcp.example.com/mcp"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@')",message="url must not carry credentials (user:password@); put them in a header whose value comes from a Secret (spec.headers)"
	// +optional
	URL string `json:"url,omitempty"`

	// Stdio runs a command that speaks MCP on stdin/stdout.
	// +optional
	Stdio *StdioSource `json:"stdio,omitempty"`

	// ContentFilters (prompts, resources, resourceTemplates, skills) filter what the remote
	// serves besides tools.
	ContentFilters `json:",inline"`

	// Headers are sent with every request; their values come from Secrets.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Headers []HeaderFromSecret `json:"headers,omitempty"`

	// CallerCredentials makes a gateway send each caller's own credential for the
	// remote (token exchange or a per-caller Secret) instead of one shared account's.
	// The operator's probes keep using headers.
	// +optional
	CallerCredentials *CallerCredentials `json:"callerCredentials,omitempty"`

	// ProbeCredentials authenticate the operator's own requests to a remote that wants
	// an OAuth token rather than a static key, so that its tools are discovered with no
	// user present. Only with callerCredentials: gateways send each caller's credential.
	// +optional
	ProbeCredentials *ProbeCredentials `json:"probeCredentials,omitempty"`

	// TLS configures how the remote's certificate is verified.
	// +optional
	TLS *ImportTLS `json:"tls,omitempty"`

	// Tools filters which remote tools are imported.
	// +optional
	Tools *ToolFilter `json:"tools,omitempty"`

	// RefreshInterval is how often the tool list is fetched again, from 10s to 24h.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('10s') && duration(self) <= duration('24h'))",message="refreshInterval must be between 10s and 24h: every import re-runs its handshake this often"
	// +optional
	RefreshInterval *Duration `json:"refreshInterval,omitempty"`

	// Approval pins what the import serves to approved definitions (mode Manual).
	// +optional
	Approval *ImportApproval `json:"approval,omitempty"`

	// Timeout bounds one whole handshake (connect, initialize, every tools/list page), from
	// 1s to 5m.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('5m'))",message="timeout must be between 1s and 5m"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`
}

// StdioSource is a command run as a list, never through a shell.
type StdioSource struct {
	// Image holds the command.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	Image string `json:"image"`

	// Command is argv[0] and any fixed arguments, run as a list.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('[|><&;$`\\n]'))",message="command must not contain shell metacharacters (| > < & ; $ backtick newline): it runs as a list, never through a shell, so they would not do what you expect"
	// +listType=atomic
	// +required
	Command []string `json:"command"`

	// Args follow the command.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('[|><&;$`\\n]'))",message="args must not contain shell metacharacters (| > < & ; $ backtick newline): they are passed as a list, never through a shell"
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`
}

// HeaderFromSecret is an HTTP header whose value is read from a Secret.
type HeaderFromSecret struct {
	// Name of the header, e.g. Authorization.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!(self.lowerAscii() in ['host', 'content-length', 'content-type', 'transfer-encoding', 'connection', 'upgrade', 'te', 'trailer', 'keep-alive', 'proxy-connection', 'accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id'])",message="this header is set by the MCP client or the HTTP transport and cannot be overridden; use a header such as Authorization or X-Api-Key"
	// +required
	Name string `json:"name"`
	// ValueFrom is the Secret key holding the value.
	// +required
	ValueFrom SecretKeyRef `json:"valueFrom"`
}

// ImportTLS configures TLS verification of the remote.
type ImportTLS struct {
	// CABundle is a PEM bundle of CAs to trust, from a Secret or ConfigMap key.
	// +optional
	CABundle *CABundleRef `json:"caBundle,omitempty"`
}

// CABundleRef names one key of a Secret or a ConfigMap in the import's namespace.
// +kubebuilder:validation:XValidation:rule="has(self.secretRef) != has(self.configMapRef)",message="caBundle takes exactly one of secretRef or configMapRef"
type CABundleRef struct {
	// +optional
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`
	// +optional
	ConfigMapRef *ConfigMapKeyRef `json:"configMapRef,omitempty"`
}

// ConfigMapKeyRef names one key of a ConfigMap in the object's namespace.
type ConfigMapKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
	// +kubebuilder:default="ca.crt"
	// +optional
	Key string `json:"key,omitempty"`
}

// ToolFilter keeps the tools whose names match include (all when empty) and not exclude.
type ToolFilter struct {
	// Include globs, e.g. "get_*".
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +listType=atomic
	// +optional
	Include []string `json:"include,omitempty"`
	// Exclude globs, applied after include.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +listType=atomic
	// +optional
	Exclude []string `json:"exclude,omitempty"`
}

// RemoteServerInfo is what the remote said about itself.
type RemoteServerInfo struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	// ProtocolVersion is the negotiated MCP protocol version.
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Capabilities the remote announced (tools, logging, prompts, resources, …).
	// +listType=atomic
	// +optional
	Capabilities []string `json:"capabilities,omitempty"`
	// Extensions the remote announced, in either era (io.modelcontextprotocol/tasks,
	// io.modelcontextprotocol/skills, …). A gateway passes the Tasks extension
	// through when the remote announced it in protocol 2026-07-28.
	// +listType=atomic
	// +optional
	Extensions []string `json:"extensions,omitempty"`
}

// DiscoveredTool is one remote tool as the remote described it.
type DiscoveredTool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema as the remote sent it (omitted when the status had to be truncated).
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	InputSchema *runtime.RawExtension `json:"inputSchema,omitempty"`
	// Title is the remote's display name for the tool.
	// +optional
	Title string `json:"title,omitempty"`
	// Annotations (readOnlyHint, destructiveHint, …) as the remote sent them.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	Annotations *runtime.RawExtension `json:"annotations,omitempty"`
	// OutputSchema, the schema of the tool's structuredContent, as the remote sent it.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	OutputSchema *runtime.RawExtension `json:"outputSchema,omitempty"`
	// OtherFields are the definition's remaining members (icons, _meta, execution, and
	// any the operator does not know) as one JSON object, so that a gateway serves the
	// tool exactly as the remote defined it.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	OtherFields *runtime.RawExtension `json:"otherFields,omitempty"`
	// Clipped names the members of the definition that were cut short (title,
	// description) or left out (annotations, outputSchema, otherFields) because they
	// exceeded their size limit; a gateway serves the tool without what is missing.
	// +listType=atomic
	// +optional
	Clipped []string `json:"clipped,omitempty"`
	// Digest is the tool's item digest (sha256 of its canonical title, description,
	// schemas, annotations, icons, execution and _meta, as the remote sent them, before
	// any clipping). In Manual approval mode a gateway serves exactly those members of
	// an approved tool, and not a tool whose members were clipped.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Approval is Automatic, Approved (served) or Pending (withheld by gateways until
	// an owner approves it; see status.approval).
	// +optional
	Approval ItemApproval `json:"approval,omitempty"`
	// Eras are the protocol eras the remote lists the tool in, newest first, when it
	// serves more than one: a gateway lists the tool to a caller of an era the remote
	// serves only when the remote lists it there ("2026-07-28" alone: a tool of the
	// stateless era, such as one that asks for input with input-required results).
	// Empty: every era of status.eras.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2
	// +optional
	Eras []string `json:"eras,omitempty"`
	// EraDefinitions are the tool's definitions in the eras whose definition differs
	// from the one above (which is that of 2025-11-25 when the remote lists the tool
	// there). Each is digested and approved on its own; the catalog and definitions
	// digests cover them, so approving a digest approves every era, and a change in
	// one era withholds the tool in that era.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1
	// +optional
	EraDefinitions []EraDefinition `json:"eraDefinitions,omitempty"`
	// RequiresCapabilities are the client capabilities (elicitation, roots, sampling)
	// the remote lists the tool only to clients declaring: a gateway serves it only
	// where its spec.imports[].relay relays them, since the remote asks its caller
	// for them.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	// +optional
	RequiresCapabilities []string `json:"requiresCapabilities,omitempty"`
}

// EraDefinition is a tool's definition in one protocol era, where it differs from the
// tool's definition in status.tools.
type EraDefinition struct {
	// Era is the protocol era, "2026-07-28" or "2025-11-25".
	Era string `json:"era"`
	// Definition is the tools/list entry as the remote sent it in that era (left out,
	// and the tool not served in that era, when it exceeds its size limit).
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	Definition *runtime.RawExtension `json:"definition,omitempty"`
	// Digest is the item digest of that definition.
	Digest string `json:"digest"`
	// Approval is that of this definition (see DiscoveredTool.Approval): a gateway
	// serves the tool in this era only when it is not Pending.
	// +optional
	Approval ItemApproval `json:"approval,omitempty"`
}

// RemoteToolImportStatus is what the operator observed of the remote.
type RemoteToolImportStatus struct {
	// ReconcileRequestStatus says which cantus.dev/requestedAt request was handled last.
	ReconcileRequestStatus `json:",inline"`
	// RemoteContentStatus lists the remote's prompts, resources, resource templates and
	// Agent Skills.
	RemoteContentStatus `json:",inline"`

	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, SourceAllowed, HandshakeSucceeded, ToolsDiscovered, Stale.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	ServerInfo *RemoteServerInfo `json:"serverInfo,omitempty"`
	// CallerCredentials says how callers get their credential for the remote.
	// +optional
	CallerCredentials *CallerCredentialsStatus `json:"callerCredentials,omitempty"`
	// Tools discovered at the last successful handshake, after the filters.
	// +listType=atomic
	// +optional
	Tools []DiscoveredTool `json:"tools,omitempty"`
	// ToolCount is len(tools), for kubectl get.
	// +optional
	ToolCount int32 `json:"toolCount,omitempty"`
	// ToolsTruncated is true when input schemas were left out to keep the status small.
	// +optional
	ToolsTruncated bool `json:"toolsTruncated,omitempty"`
	// Stale is true when the last probe failed and tools are those of an earlier success.
	// +optional
	Stale bool `json:"stale,omitempty"`
	// CatalogDigest is the sha256 of the canonical tool definitions.
	// +optional
	CatalogDigest string `json:"catalogDigest,omitempty"`
	// LastProbeTime is when a probe last changed this status; a probe that finds
	// everything unchanged writes nothing. How recently each import was probed is the
	// metric cantus_remotetoolimport_last_probe_timestamp_seconds.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`
	// LastSuccessTime is when a successful probe last changed this status.
	// +optional
	LastSuccessTime *metav1.Time `json:"lastSuccessTime,omitempty"`
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
	// Addresses are the IP addresses the ToolSourcePolicy check resolved the URL's host to
	// and accepted at the last successful handshake. Gateways connect only to these, so a
	// DNS answer that changes after the check is not followed until it is checked again.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Addresses []string `json:"addresses,omitempty"`
	// Approval says which definitions are approved and how the remote's differ.
	// +optional
	Approval *ApprovalStatus `json:"approval,omitempty"`
	// Eras are the MCP protocol eras the remote served at the last successful
	// handshake, newest first: "2026-07-28" (stateless, server/discover) and/or
	// "2025-11-25" (initialize and sessions). Gateways call it in each caller's era
	// where it serves that era. Empty for a handshake before eras were recorded.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2
	// +optional
	Eras []string `json:"eras,omitempty"`
	// BridgeURL is where the stdio bridge serves the command (stdio imports only). Under
	// the kubernetes runtime it names the bridge Service by its cluster IP, so the
	// operator and gateways reach it without cluster DNS.
	// +optional
	BridgeURL string `json:"bridgeURL,omitempty"`
}

// RemoteToolImport checks a remote MCP server against the ToolSourcePolicies, handshakes
// with it, and reports its tools.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rti;imports,categories=cantus
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Transport",type=string,JSONPath=`.spec.transport`
// +kubebuilder:printcolumn:name="Tools",type=integer,JSONPath=`.status.toolCount`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Approved",type=string,JSONPath=`.status.conditions[?(@.type=="DefinitionsApproved")].status`
// +kubebuilder:printcolumn:name="Eras",type=string,JSONPath=`.status.eras`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`,priority=1
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.status.serverInfo.name`,priority=1
// +kubebuilder:printcolumn:name="Callers",type=string,JSONPath=`.status.callerCredentials.mode`,priority=1
// +kubebuilder:printcolumn:name="Prompts",type=integer,JSONPath=`.status.promptCount`,priority=1
// +kubebuilder:printcolumn:name="Resources",type=integer,JSONPath=`.status.resourceCount`,priority=1
// +kubebuilder:printcolumn:name="Templates",type=integer,JSONPath=`.status.resourceTemplateCount`,priority=1
// +kubebuilder:printcolumn:name="Skills",type=integer,JSONPath=`.status.skillCount`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RemoteToolImport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec RemoteToolImportSpec `json:"spec"`
	// +optional
	Status RemoteToolImportStatus `json:"status,omitempty"`
}

// RemoteToolImportList is a list of RemoteToolImports.
// +kubebuilder:object:root=true
type RemoteToolImportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RemoteToolImport `json:"items"`
}

func init() {
	register(&RemoteToolImport{}, &RemoteToolImportList{})
}

// KeyOrDefault is the ConfigMap key to read: Key, or DefaultCABundleKey.
func (r ConfigMapKeyRef) KeyOrDefault() string { return orDefault(r.Key, DefaultCABundleKey) }

// RefreshIntervalOrDefault is how often the tools are listed again: RefreshInterval, or
// DefaultRefreshInterval.
func (s *RemoteToolImportSpec) RefreshIntervalOrDefault() time.Duration {
	return DurationOf(s.RefreshInterval, DefaultRefreshInterval)
}

// TimeoutOrDefault bounds one handshake: Timeout, or DefaultProbeTimeout.
func (s *RemoteToolImportSpec) TimeoutOrDefault() time.Duration {
	return DurationOf(s.Timeout, DefaultProbeTimeout)
}
