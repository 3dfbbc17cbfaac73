package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Transport is how MCP clients talk to a server.
// +kubebuilder:validation:Enum=streamable-http;sse
type Transport string

const (
	// TransportStreamableHTTP is the MCP streamable HTTP transport, served on /mcp.
	TransportStreamableHTTP Transport = "streamable-http"
	// TransportSSE is the older HTTP+SSE transport, served on /sse and /message.
	TransportSSE Transport = "sse"
)

// The defaults of a SkillServer, one constant each. The API server fills in the fields
// that carry a +kubebuilder:default marker (markers cannot name a constant; a test holds
// the CRD's defaults to these); the *OrDefault methods apply the same values to objects
// built in Go, which skip the API server's defaulting.
const (
	DefaultTransport = TransportStreamableHTTP
	DefaultPort      = int32(8765)
	DefaultReplicas  = int32(1)
	DefaultStateless = true
	// DefaultServerVersion is served when spec.serverInfo.version is empty (no marker:
	// the name's default is the object's name, which a marker cannot say either).
	DefaultServerVersion = "0.0.0"

	DefaultHTTPTimeout      = 10 * time.Second
	DefaultMaxResponseBytes = int64(1 << 20)

	DefaultMemoryToolName       = "memory"
	DefaultMemorySize           = "1Gi"
	DefaultMemoryAccessMode     = corev1.ReadWriteOnce
	DefaultMemoryMaxFileBytes   = int64(1 << 20)
	DefaultMemoryMaxTotalBytes  = int64(64 << 20)
	DefaultMemoryTrashRetention = 168 * time.Hour

	// DefaultSecretKey is the key read from a Secret when a reference names none.
	DefaultSecretKey = "token"

	// Call limits of one adapter pod (spec.limits).
	DefaultConcurrentCalls = int32(64)
	DefaultQueueLength     = int32(64)
	DefaultQueueWait       = 10 * time.Second
)

// SkillServerSpec is the skill set to serve as one MCP server.
// +kubebuilder:validation:XValidation:rule="!has(self.authorization) || has(self.auth)",message="authorization needs auth: set auth.serviceAccountTokens, auth.oidc or auth.bearerTokenSecretRef so that callers have an identity"
// +kubebuilder:validation:XValidation:rule="!has(self.memory) || self.memory.accessMode == 'ReadWriteMany' || !has(self.replicas) || self.replicas <= 1",message="a memory server keeps its files on a ReadWriteOnce volume, which one pod at a time can mount: set replicas: 1, or memory.accessMode: ReadWriteMany with a storage class that supports it"
// +kubebuilder:validation:XValidation:rule="!has(self.memory) || !has(self.skills) || !self.skills.exists(s, s.name == self.memory.toolName)",message="memory.toolName collides with a skill of the same name: rename one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.stateless) || self.stateless || self.transport != 'streamable-http' || !has(self.replicas) || self.replicas <= 1",message="a stateful streamable-http server keeps sessions in memory and cannot run more than one replica without session affinity: set stateless: true or replicas: 1"
// +kubebuilder:validation:XValidation:rule="self.transport != 'sse' || !has(self.replicas) || self.replicas <= 1",message="an sse server keeps each session's stream in one pod, and a client's follow-up POST may reach another replica: use transport: streamable-http with stateless: true to scale out, or replicas: 1"
// +kubebuilder:validation:XValidation:rule="(has(self.skills) && size(self.skills) > 0) || has(self.memory) || (has(self.imports) && size(self.imports) > 0) || (has(self.agentSkills) && size(self.agentSkills) > 0) || (has(self.resources) && size(self.resources) > 0) || (has(self.resourceTemplates) && size(self.resourceTemplates) > 0) || (has(self.prompts) && size(self.prompts) > 0)",message="a SkillServer must serve something: add skills, memory, imports, agentSkills, resources, resourceTemplates or prompts"
type SkillServerSpec struct {
	// ServerInfo is what the server reports about itself in the MCP initialize answer.
	// +optional
	ServerInfo ServerInfo `json:"serverInfo,omitempty"`

	// Transport is the MCP transport served to clients.
	// +kubebuilder:default=streamable-http
	// +optional
	Transport Transport `json:"transport,omitempty"`

	// Port is the TCP port of the MCP server and its Service.
	// +kubebuilder:default=8765
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// Replicas is the number of adapter pods (kubernetes runtime).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Stateless serves every request without an MCP session, so replicas need no session
	// affinity. Set it to false for clients that rely on server-side sessions.
	// +kubebuilder:default=true
	// +optional
	Stateless *bool `json:"stateless,omitempty"`

	// Skills are the tools this server offers.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Skills []Skill `json:"skills,omitempty"`

	// Imports re-export the tools of RemoteToolImports in this namespace, making this
	// server a gateway. Only imports that are Ready are served.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Imports []SkillImport `json:"imports,omitempty"`

	// AgentSkills are Agent Skills served per the MCP Skills extension (skills/list,
	// skills/get, skill:// resources), from ConfigMaps or images.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	AgentSkills []AgentSkill `json:"agentSkills,omitempty"`

	// Resources are static MCP resources.
	// +listType=map
	// +listMapKey=uri
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Resources []ServedResource `json:"resources,omitempty"`

	// ResourceTemplates are MCP resource templates, answered by a template or http backend.
	// +listType=map
	// +listMapKey=uriTemplate
	// +kubebuilder:validation:MaxItems=64
	// +optional
	ResourceTemplates []ServedResourceTemplate `json:"resourceTemplates,omitempty"`

	// Prompts are MCP prompts.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Prompts []ServedPrompt `json:"prompts,omitempty"`

	// Memory adds the memory tool: the Anthropic memory-tool commands over files kept on a
	// PersistentVolumeClaim, behind a guard so that an agent cannot lose data.
	// +optional
	Memory *MemorySpec `json:"memory,omitempty"`

	// Auth makes MCP clients authenticate: with a shared bearer token, their own
	// Kubernetes service-account token, or a token of an external OIDC issuer.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// Authorization says which authenticated callers may call which tools. When absent,
	// every authenticated caller may call every tool.
	// +optional
	Authorization *AuthorizationSpec `json:"authorization,omitempty"`

	// AllowFrom limits which pods may connect. When set, a NetworkPolicy admits only these
	// peers to the server's port; when empty, no NetworkPolicy is created. It is enforced
	// only where the cluster's network plugin enforces NetworkPolicy.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(p, has(p.podSelector) || has(p.namespaceSelector) || has(p.ipBlock))",message="each allowFrom peer needs a podSelector, a namespaceSelector or an ipBlock; an empty peer {} would say nothing about who may connect"
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.ipBlock) || (!has(p.podSelector) && !has(p.namespaceSelector)))",message="an allowFrom peer with an ipBlock may not also set podSelector or namespaceSelector: use separate peers"
	// +optional
	AllowFrom []networkingv1.NetworkPolicyPeer `json:"allowFrom,omitempty"`

	// Pod overrides parts of the adapter pods.
	// +optional
	Pod *PodOverrides `json:"pod,omitempty"`

	// Limits bound the tool calls one adapter pod runs, how fast each caller may send
	// requests, and how much of the pod's shared pools one caller may hold. They are
	// per pod: with 3 replicas the server as a whole takes 3 times as many. Without
	// it, 64 calls run at once, 64 more wait up to 10s, callers are not rate-limited,
	// and one caller may hold a quarter of each shared pool.
	// +optional
	Limits *CallLimits `json:"limits,omitempty"`

	// Discovery makes the server list a few tools and find the rest on request
	// (progressive discovery). Without it, every tool is listed.
	// +optional
	Discovery *DiscoverySpec `json:"discovery,omitempty"`
}

// CallLimits bound the tool calls of one adapter pod. A call past ConcurrentCalls waits
// for a slot (at most QueueLength calls wait, each at most QueueWait); past that it is
// answered with a tool error that begins "server_busy:". A caller past its PerCaller
// rate gets HTTP 429 with Retry-After before its request is served.
type CallLimits struct {
	// ConcurrentCalls is how many tool calls run at once in one pod.
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	ConcurrentCalls *int32 `json:"concurrentCalls,omitempty"`
	// QueueLength is how many calls may wait for a slot; 0 refuses at once.
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65536
	// +optional
	QueueLength *int32 `json:"queueLength,omitempty"`
	// QueueWait is how long a call waits for a slot, from 1ms to 5m.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('1ms') && duration(self) <= duration('5m'))",message="queueWait must be between 1ms and 5m"
	// +optional
	QueueWait *Duration `json:"queueWait,omitempty"`
	// PerCaller limits how fast each caller may send requests: every request counts
	// one, whatever its method (tools/call, tools/list, resources/read, prompts/get,
	// completion/complete, resources/subscribe, subscriptions/listen, initialize, ...);
	// notifications and answers to the server's own requests do not count. A caller is
	// its authenticated identity (the token's subject; a shared bearer token is one
	// caller), or without auth its client address (an IPv6 client by its /64). Unset:
	// no per-caller limit.
	// +optional
	PerCaller *CallerRate `json:"perCaller,omitempty"`
	// CallerSharePercent is how much, in percent, of each pool that all callers of a
	// pod share one caller may hold: the pod's open subscriptions/listen streams
	// (1024), a gateway's calls waiting for their callers' answers (256) and its
	// subscriptions at the remotes (1024). Past it, that caller is refused (HTTP 429,
	// or an error naming the bound) while the others are served. Unset: 25.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	CallerSharePercent *int32 `json:"callerSharePercent,omitempty"`
}

// CallerRate is a token bucket per caller, from which each request takes one.
type CallerRate struct {
	// CallsPerSecond is how many requests per second a caller may keep up (the name
	// is from when only tool calls counted).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +required
	CallsPerSecond int32 `json:"callsPerSecond"`
	// Burst is how many requests a caller may make at once after a quiet spell;
	// default CallsPerSecond. A client's start (initialize, then a listing or two)
	// counts too.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	Burst *int32 `json:"burst,omitempty"`
}

// Effective is l with every default filled in; l may be nil.
func (l *CallLimits) Effective() CallLimits {
	out := CallLimits{ConcurrentCalls: ptrTo(DefaultConcurrentCalls), QueueLength: ptrTo(DefaultQueueLength), QueueWait: DurationFrom(DefaultQueueWait)}
	if l == nil {
		return out
	}
	if l.ConcurrentCalls != nil {
		out.ConcurrentCalls = ptrTo(*l.ConcurrentCalls)
	}
	if l.QueueLength != nil {
		out.QueueLength = ptrTo(*l.QueueLength)
	}
	if l.QueueWait != nil {
		out.QueueWait = ptrTo(*l.QueueWait)
	}
	if l.CallerSharePercent != nil {
		out.CallerSharePercent = ptrTo(*l.CallerSharePercent)
	}
	if r := l.PerCaller; r != nil {
		burst := r.CallsPerSecond
		if r.Burst != nil {
			burst = *r.Burst
		}
		out.PerCaller = &CallerRate{CallsPerSecond: r.CallsPerSecond, Burst: ptrTo(burst)}
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// SkillImport selects tools of one RemoteToolImport to serve again.
type SkillImport struct {
	// Name of the RemoteToolImport in this namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Include globs of remote tool names; all when empty.
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
	// Prefix is put before every served name, e.g. "books_".
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]*$`
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Renames serve a remote tool under another name (the prefix is not added to it).
	// +listType=map
	// +listMapKey=from
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Renames []ToolRename `json:"renames,omitempty"`
	// Relay lists the requests the remote may send this server's callers while it
	// serves their calls of these tools: elicitation (ask the user), sampling (run the
	// caller's model) and roots. None by default: the remote is answered with an error.
	// Sampling spends the caller's model and may carry a prompt injection; enable it
	// only for a remote you trust. A request goes only to the caller whose call the
	// remote is serving; it needs one replica for callers of protocol 2025-11-25 and
	// older (their answer must reach the replica that asked), and reaches callers of
	// 2026-07-28 as an input-required result on any number. Not available for stdio
	// imports (the bridge shares one process among callers).
	// +kubebuilder:validation:MaxItems=3
	// +listType=set
	// +optional
	Relay []RelayedRequest `json:"relay,omitempty"`
}

// RelayedRequest is a kind of request a remote may send the caller through the gateway.
// +kubebuilder:validation:Enum=elicitation;sampling;roots
type RelayedRequest string

// The requests a gateway can relay from a remote to its caller.
const (
	RelayElicitation RelayedRequest = "elicitation"
	RelaySampling    RelayedRequest = "sampling"
	RelayRoots       RelayedRequest = "roots"
)

// ToolRename serves the remote tool From as To.
type ToolRename struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	From string `json:"from"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	// +required
	To string `json:"to"`
}

// MemoryCommand is one command of the Anthropic memory tool.
// +kubebuilder:validation:Enum=view;create;str_replace;insert;delete;rename
type MemoryCommand string

// MemorySpec is the memory tool and its storage.
type MemorySpec struct {
	// ToolName is the MCP tool name of the memory tool.
	// +kubebuilder:default=memory
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	// +optional
	ToolName string `json:"toolName,omitempty"`

	// Size of the PersistentVolumeClaim.
	// +kubebuilder:default="1Gi"
	// +optional
	Size *Quantity `json:"size,omitempty"`

	// StorageClassName of the claim; the cluster default when empty.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// AccessMode of the claim. ReadWriteOnce (default) limits the server to one replica.
	// +kubebuilder:default=ReadWriteOnce
	// +kubebuilder:validation:Enum=ReadWriteOnce;ReadWriteMany
	// +optional
	AccessMode corev1.PersistentVolumeAccessMode `json:"accessMode,omitempty"`

	// AllowedCommands the agent may use; all when empty.
	// +listType=set
	// +optional
	AllowedCommands []MemoryCommand `json:"allowedCommands,omitempty"`

	// ConfirmCommands need "confirm": true in the call, so that the agent asks its user
	// first. Defaults to delete, rename and str_replace; an empty list confirms nothing.
	// +listType=set
	// +optional
	ConfirmCommands []MemoryCommand `json:"confirmCommands,omitempty"`

	// ReadOnly allows view only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`

	// MaxFileBytes caps one file.
	// +kubebuilder:default=1048576
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxFileBytes *int64 `json:"maxFileBytes,omitempty"`

	// MaxTotalBytes caps everything the memory keeps: the files, the trash until it
	// expires, the journal, and 512 bytes for each file, directory and trash entry.
	// +kubebuilder:default=67108864
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxTotalBytes *int64 `json:"maxTotalBytes,omitempty"`

	// TrashRetention is how long deleted and overwritten content is kept for restore, from
	// 1m to 8760h (a year).
	// +kubebuilder:default="168h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('1m') && duration(self) <= duration('8760h'))",message="trashRetention must be between 1m and 8760h"
	// +optional
	TrashRetention *Duration `json:"trashRetention,omitempty"`
}

// ServerInfo is the MCP implementation info of a server.
type ServerInfo struct {
	// Name defaults to the SkillServer's name.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Name string `json:"name,omitempty"`

	// Version defaults to "0.0.0".
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Version string `json:"version,omitempty"`

	// Instructions tell clients how to use the server.
	// +kubebuilder:validation:MaxLength=16384
	// +optional
	Instructions string `json:"instructions,omitempty"`
}

// Skill is one MCP tool and the backend that answers its calls.
// +kubebuilder:validation:XValidation:rule="(has(self.template) ? 1 : 0) + (has(self.http) ? 1 : 0) == 1",message="a skill needs exactly one backend: set either template or http"
type Skill struct {
	// Name is the MCP tool name: 1 to 128 of the characters A-Z a-z 0-9 _ - .
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9_.-]+$')",message="tool names may use only A-Z, a-z, 0-9, '_', '-' and '.' (MCP tool-name rules); rename the skill"
	// +required
	Name string `json:"name"`

	// Description tells a model what the tool does and when to use it.
	// +kubebuilder:validation:MaxLength=8192
	// +optional
	Description string `json:"description,omitempty"`

	// InputSchema is the JSON Schema of the tool's arguments, served unchanged. Its type
	// must be "object". Defaults to an object schema with no properties.
	// +optional
	InputSchema *ToolInputSchema `json:"inputSchema,omitempty"`

	// Annotations are MCP hints about the tool's behaviour.
	// +optional
	Annotations *ToolAnnotations `json:"annotations,omitempty"`

	// Template answers with a Go text/template rendered over the arguments.
	// +optional
	Template *TemplateBackend `json:"template,omitempty"`

	// HTTP answers by POSTing the arguments as JSON to a URL.
	// +optional
	HTTP *HTTPBackend `json:"http,omitempty"`
}

// ToolAnnotations are the MCP tool annotations. They are hints for clients, not guarantees.
type ToolAnnotations struct {
	// Title is a human-readable name for the tool.
	// +optional
	Title string `json:"title,omitempty"`
	// ReadOnlyHint says the tool does not change its environment.
	// +optional
	ReadOnlyHint *bool `json:"readOnlyHint,omitempty"`
	// DestructiveHint says the tool may make destructive updates.
	// +optional
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	// IdempotentHint says calling the tool twice with the same arguments has no extra effect.
	// +optional
	IdempotentHint *bool `json:"idempotentHint,omitempty"`
	// OpenWorldHint says the tool reaches outside the server (the internet, other systems).
	// +optional
	OpenWorldHint *bool `json:"openWorldHint,omitempty"`
}

// TemplateBackend renders a Go text/template over the call's arguments. A key the
// template uses but the call does not pass is an error, not an empty string.
type TemplateBackend struct {
	// Text is the template, e.g. "found: {{ .title }}".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	// +required
	Text string `json:"text"`
}

// HTTPBackend POSTs the call's arguments as a JSON object and returns the answer's body.
type HTTPBackend struct {
	// URL receives the POST. Scheme http or https, a host, and no credentials in it.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="url must be an absolute http:// or https:// URL"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getHostname() != ''",message="url must name a host, e.g. http://books.default.svc:8080/search"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@')",message="url must not carry credentials (user:password@); the adapter sends none, use a backend that trusts the network or the server's auth"
	// +required
	URL string `json:"url"`

	// Timeout bounds one call, including reading the answer; at most 10m.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('1ms') && duration(self) <= duration('10m'))",message="timeout must be between 1ms and 10m"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`

	// MaxResponseBytes bounds the answer's body; a larger answer is a tool error.
	// +kubebuilder:default=1048576
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777216
	// +optional
	MaxResponseBytes *int64 `json:"maxResponseBytes,omitempty"`
}

// AuthSpec makes MCP clients authenticate. Any number of the kinds may be set; a
// request is authenticated by the first that accepts its token.
// +kubebuilder:validation:XValidation:rule="has(self.bearerTokenSecretRef) || has(self.serviceAccountTokens) || has(self.oidc)",message="auth needs at least one of bearerTokenSecretRef, serviceAccountTokens or oidc"
type AuthSpec struct {
	// BearerTokenSecretRef names a key of a Secret in the same namespace holding the
	// tokens clients may send as "Authorization: Bearer <token>", one per line so that
	// an old and a new token can overlap. A changed Secret is enforced within seconds,
	// without restarting the pods.
	// +optional
	BearerTokenSecretRef *SecretKeyRef `json:"bearerTokenSecretRef,omitempty"`

	// ServiceAccountTokens accepts Kubernetes service-account tokens of this cluster
	// issued for one of the audiences, so that an agent calls as its own service account.
	// +optional
	ServiceAccountTokens *ServiceAccountTokenAuth `json:"serviceAccountTokens,omitempty"`

	// OIDC accepts tokens of an external OpenID Connect issuer.
	// +optional
	OIDC *OIDCAuth `json:"oidc,omitempty"`
}

// ServiceAccountTokenAuth accepts the cluster's service-account tokens.
type ServiceAccountTokenAuth struct {
	// Audiences a token must be issued for (one of them). Default:
	// <name>.<namespace>.skillserver.cantus.dev, so that a token minted for this server
	// is not accepted by another.
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Audiences []string `json:"audiences,omitempty"`
}

// OIDCAuth accepts the tokens of one OpenID Connect issuer; the adapter discovers its
// keys and refreshes them.
type OIDCAuth struct {
	// IssuerURL is the issuer identifier (the tokens' "iss"), https.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https://[^/?#@\s]+(/[^?#\s]*)?$`
	// +required
	IssuerURL string `json:"issuerURL"`
	// Audiences a token must be issued for (one of them).
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +required
	Audiences []string `json:"audiences"`
	// CABundle, when set, is the only set of CAs trusted when fetching the issuer's
	// discovery document and keys.
	// +optional
	CABundle *OIDCCABundle `json:"caBundle,omitempty"`
	// GroupsPrefix is put before every group of a token's "groups" claim, so that an
	// identity provider's group cannot pass for a Kubernetes one: with the default
	// "oidc:", rules name OIDC groups as "oidc:<group>". Groups beginning with
	// "system:" are never taken from an OIDC token, nor are those that the prefix and the
	// group together make begin with it. "" matches the groups as they are. A prefix
	// that begins with "system:", or with which "system:" begins ("s", "sys", "system"),
	// is refused: it could make an identity provider's group a Kubernetes one.
	// Default: "oidc:" (in namespaces covered only by a ToolSourcePolicy in Audit mode,
	// "" while rules name unprefixed groups, with a GroupsPrefixed warning).
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == '' || (!self.startsWith('system:') && !'system:'.startsWith(self))",message="groupsPrefix must not begin with system:, nor begin it (s, sys, system): with a group it would spell a Kubernetes group such as system:masters; use a prefix such as oidc: or sso:"
	// +optional
	GroupsPrefix *string `json:"groupsPrefix,omitempty"`
}

// DefaultOIDCGroupsPrefix is put before OIDC groups when spec.auth.oidc.groupsPrefix is
// not set.
const DefaultOIDCGroupsPrefix = "oidc:"

// OIDCCABundle names where the issuer's CA certificates are.
type OIDCCABundle struct {
	// ConfigMapRef names a key of a ConfigMap in the same namespace holding PEM
	// certificates.
	// +required
	ConfigMapRef ConfigMapKeyRef `json:"configMapRef"`
}

// AuthorizationSpec lists who may call what; a caller may call a tool when any rule
// allows it, and tools/list shows it only those tools.
type AuthorizationSpec struct {
	// Rules, any of which allows a call.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +required
	Rules []AuthorizationRule `json:"rules"`
}

// AuthorizationRule allows some callers to use some tools, prompts, resources and
// skills; each kind is governed only by its own list (tools: ["*"] covers tools only). A
// caller matches when serviceAccounts and groups are both empty, or it is one of
// serviceAccounts or in one of groups; and when, if set, is true for its token's claims.
// +kubebuilder:validation:XValidation:rule="has(self.tools) || has(self.prompts) || has(self.resources) || has(self.skills)",message="an authorization rule must allow something: set tools, prompts, resources or skills (globs)"
type AuthorizationRule struct {
	// Tools are globs over the served tool names, e.g. "search_*".
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	// +optional
	Tools []string `json:"tools,omitempty"`
	// Prompts are globs over prompt names.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	// +optional
	Prompts []string `json:"prompts,omitempty"`
	// Resources are globs over resource URIs (and resource templates' uriTemplates);
	// * also matches "/", e.g. "docs://*".
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=2048
	// +optional
	Resources []string `json:"resources,omitempty"`
	// Skills are globs over skill paths, e.g. "acme/*"; they govern the skill and
	// every one of its files.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +optional
	Skills []string `json:"skills,omitempty"`
	// ServiceAccounts are "namespace/name", or "namespace/*" for any in the namespace.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/([a-z0-9]([-.a-z0-9]*[a-z0-9])?|\*)$`
	// +kubebuilder:validation:items:MaxLength=317
	// +optional
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
	// Groups the caller's token puts it in: an OIDC token's "groups" claim, or
	// system:serviceaccounts:<namespace> for service accounts.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Groups []string `json:"groups,omitempty"`
	// When is a CEL expression over the token's claims that must be true, e.g.
	// "claims.email.endsWith('@example.com')".
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	When string `json:"when,omitempty"`
}

// BearerTokenRef is the Secret key holding the static bearer tokens, nil for none.
func (s *SkillServerSpec) BearerTokenRef() *SecretKeyRef {
	if s.Auth == nil {
		return nil
	}
	return s.Auth.BearerTokenSecretRef
}

// SecretKeyRef names one key of a Secret in the object's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
	// Key within the Secret.
	// +kubebuilder:default=token
	// +optional
	Key string `json:"key,omitempty"`
}

// PodOverrides changes the adapter pods the operator runs.
type PodOverrides struct {
	// Image overrides the adapter image the operator was started with.
	// +optional
	Image string `json:"image,omitempty"`
	// Resources overrides the default requests and limits.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// ServiceAccountName runs the pods under this account. Its token is still not mounted.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// ServedTool is one tool the server offers and where it comes from.
type ServedTool struct {
	// Name is the MCP tool name.
	Name string `json:"name"`
	// Source is "skill" for a skill of this server, "memory" for the memory tool, and
	// "import:NAME" for a tool of the RemoteToolImport NAME.
	Source string `json:"source"`
	// RemoteName is the tool's name at the remote, when it was prefixed or renamed.
	// +optional
	RemoteName string `json:"remoteName,omitempty"`
}

// SkillServerStatus is what the operator observed.
type SkillServerStatus struct {
	// ReconcileRequestStatus says which cantus.dev/requestedAt request was handled last.
	ReconcileRequestStatus `json:",inline"`

	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (the summary), Available, Stalled, SchemaPortable.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// URL is where MCP clients connect.
	// +optional
	URL string `json:"url,omitempty"`

	// Tools are the tools served.
	// +listType=atomic
	// +optional
	Tools []ServedTool `json:"tools,omitempty"`

	// Limits are the call limits each adapter pod applies: spec.limits with its
	// defaults, per pod.
	// +optional
	Limits *CallLimits `json:"limits,omitempty"`

	// ToolCount is len(tools), for kubectl get.
	// +optional
	ToolCount int32 `json:"toolCount,omitempty"`

	// AgentSkills are the agent skills served (at most spec.agentSkills' 64).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	AgentSkills []ServedAgentSkill `json:"agentSkills,omitempty"`

	// AgentSkillCount is len(agentSkills), for kubectl get.
	// +optional
	AgentSkillCount int32 `json:"agentSkillCount,omitempty"`

	// Prompts are the names of the prompts served (at most spec.prompts' 128).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Prompts []string `json:"prompts,omitempty"`

	// PromptCount is len(prompts), for kubectl get.
	// +optional
	PromptCount int32 `json:"promptCount,omitempty"`

	// Resources are the URIs of the static resources served (at most spec.resources'
	// 256); resource templates are counted in resourceCount only.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Resources []string `json:"resources,omitempty"`

	// ResourceCount is the number of static resources and resource templates served.
	// +optional
	ResourceCount int32 `json:"resourceCount,omitempty"`

	// Replicas is the number of adapter pods.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of adapter pods ready to serve.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Selector is the label selector of the adapter pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// ConfigHash identifies the rendered adapter config the pods run.
	// +optional
	ConfigHash string `json:"configHash,omitempty"`

	// Discovery says which discovery mode the server uses and what its index holds.
	// +optional
	Discovery *DiscoveryStatus `json:"discovery,omitempty"`
}

// SkillServer serves a set of skills as an MCP server.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=ss;skills,categories=cantus
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Tools",type=integer,JSONPath=`.status.toolCount`
// +kubebuilder:printcolumn:name="Skills",type=integer,JSONPath=`.status.agentSkillCount`,description="agent skills served"
// +kubebuilder:printcolumn:name="Prompts",type=integer,JSONPath=`.status.promptCount`,priority=1
// +kubebuilder:printcolumn:name="Resources",type=integer,JSONPath=`.status.resourceCount`,priority=1,description="resources and resource templates served"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.readyReplicas`,description="ready adapter pods"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Transport",type=string,JSONPath=`.spec.transport`,priority=1
// +kubebuilder:printcolumn:name="Discovery",type=string,JSONPath=`.status.discovery.mode`,priority=1,description="All: every tool is listed; Search: pinned tools plus find and call meta-tools"
// +kubebuilder:printcolumn:name="Indexed",type=integer,JSONPath=`.status.discovery.indexedTools`,priority=1,description="tools in the Search index"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SkillServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SkillServerSpec `json:"spec"`
	// +optional
	Status SkillServerStatus `json:"status,omitempty"`
}

// SkillServerList is a list of SkillServers.
// +kubebuilder:object:root=true
type SkillServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SkillServer `json:"items"`
}

func init() {
	register(&SkillServer{}, &SkillServerList{})
}

// String returns the transport's name.
func (t Transport) String() string { return string(t) }

// TransportOrDefault is the transport served: Transport, or DefaultTransport.
func (s *SkillServerSpec) TransportOrDefault() Transport {
	return orDefault(s.Transport, DefaultTransport)
}

// PortOrDefault is the port served: Port, or DefaultPort.
func (s *SkillServerSpec) PortOrDefault() int32 { return orDefault(s.Port, DefaultPort) }

// StatelessOrDefault says whether sessions are stateless: Stateless, or DefaultStateless.
func (s *SkillServerSpec) StatelessOrDefault() bool {
	if s.Stateless == nil {
		return DefaultStateless
	}
	return *s.Stateless
}

// VersionOrDefault is the version served: Version, or DefaultServerVersion.
func (i ServerInfo) VersionOrDefault() string { return orDefault(i.Version, DefaultServerVersion) }

// TimeoutOrDefault bounds one call of the backend: Timeout, or DefaultHTTPTimeout.
func (b *HTTPBackend) TimeoutOrDefault() time.Duration {
	return DurationOf(b.Timeout, DefaultHTTPTimeout)
}

// MaxResponseBytesOrDefault bounds an answer: MaxResponseBytes, or DefaultMaxResponseBytes.
func (b *HTTPBackend) MaxResponseBytesOrDefault() int64 {
	return derefOr(b.MaxResponseBytes, DefaultMaxResponseBytes)
}

// ToolNameOrDefault is the memory tool's name: ToolName, or DefaultMemoryToolName.
func (m *MemorySpec) ToolNameOrDefault() string { return orDefault(m.ToolName, DefaultMemoryToolName) }

// MaxFileBytesOrDefault bounds one file: MaxFileBytes, or DefaultMemoryMaxFileBytes.
func (m *MemorySpec) MaxFileBytesOrDefault() int64 {
	return derefOr(m.MaxFileBytes, DefaultMemoryMaxFileBytes)
}

// MaxTotalBytesOrDefault bounds the store: MaxTotalBytes, or DefaultMemoryMaxTotalBytes.
func (m *MemorySpec) MaxTotalBytesOrDefault() int64 {
	return derefOr(m.MaxTotalBytes, DefaultMemoryMaxTotalBytes)
}

// TrashRetentionOrDefault is how long the trash keeps content: TrashRetention, or
// DefaultMemoryTrashRetention.
func (m *MemorySpec) TrashRetentionOrDefault() time.Duration {
	return DurationOf(m.TrashRetention, DefaultMemoryTrashRetention)
}

// KeyOrDefault is the Secret key to read: Key, or DefaultSecretKey.
func (r SecretKeyRef) KeyOrDefault() string { return orDefault(r.Key, DefaultSecretKey) }

// orDefault is value, or def when value is the zero value (a field the API server's
// defaulting did not fill in).
func orDefault[T comparable](value, def T) T {
	var zero T
	if value == zero {
		return def
	}
	return value
}

func derefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
