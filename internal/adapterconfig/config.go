// Package adapterconfig is the contract between the operator and the adapter: the
// rendered Config, its vocabulary (transports, paths, file names) and the checks that
// say whether an adapter would serve it. The operator renders and validates configs
// with it without linking the MCP server (package adapter), which reads and serves them.
package adapterconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"
)

// Transport names, as in the SkillServer API.
const (
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
)

// Paths the adapter serves besides the MCP endpoint.
const (
	PathMCP     = "/mcp"
	PathSSE     = "/sse"
	PathMessage = "/message"
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathMetrics = "/metrics"
	// PathProtectedResource describes the server to OAuth clients (RFC 9728).
	PathProtectedResource = "/.well-known/oauth-protected-resource"
)

// ConfigFileName is the key of the rendered config in its ConfigMap and the file name
// at the mount path.
const ConfigFileName = "adapter.json"

// Config is everything one adapter serves. The controller renders it from a SkillServer;
// the adapter reads it from a file. It never holds secret values, only file paths.
type Config struct {
	Server    ServerInfo `json:"server"`
	Transport string     `json:"transport"`
	Port      int32      `json:"port"`
	Stateless bool       `json:"stateless"`
	// Replicas is how many adapter processes serve the server (spec.replicas); unset,
	// one. A stateless gateway asks a caller of protocol 2025-11-25 what a remote asks
	// only with one, since the caller's answer must reach the replica that asked.
	// Applied without a restart.
	Replicas int32 `json:"replicas,omitempty"`
	// RequestStateKeyFile, when set, is a file holding the key (at least 32 bytes,
	// surrounding whitespace dropped) that MACs the requestStates a gateway gives its
	// callers of protocol 2026-07-28 when a remote asks them for input: every replica
	// reads the same key (a Secret), so a caller's retry may land on any of them.
	// Unset, each process makes a random key, and a retry must reach the replica that
	// asked.
	// The file holds one key per line: the first seals, every one opens (a key rotated
	// away stays for RequestStateTTL, so that the states it sealed still open). A
	// changed file is read again without a restart.
	RequestStateKeyFile string `json:"requestStateKeyFile,omitempty"`
	// BearerTokenFile, when set, is a file holding the tokens clients may present, one
	// per line, so that an old and a new token overlap while clients move over. A
	// changed file is enforced without a restart.
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`
	// Auth, when set, adds token issuers and per-tool authorization.
	Auth  *AuthConfig `json:"auth,omitempty"`
	Tools []Tool      `json:"tools"`
	// Memory, when set, adds the guarded memory tool.
	Memory *MemoryConfig `json:"memory,omitempty"`

	// ContentDir is the folder of content-addressed files (see content.go): the file
	// named by a digest's 64 hex digits holds the bytes of that digest.
	ContentDir string `json:"contentDir,omitempty"`
	// AgentSkills are served per the MCP Skills extension.
	AgentSkills []AgentSkill `json:"agentSkills,omitempty"`
	// ImageSkills are served like AgentSkills, from folders the adapter reads at load
	// (image volumes); one that breaks a rule is left out, not the config refused.
	ImageSkills []ImageSkill `json:"imageSkills,omitempty"`
	// Resources are static resources.
	Resources []Resource `json:"resources,omitempty"`
	// ResourceTemplates are resources computed from their URI's variables.
	ResourceTemplates []ResourceTemplate `json:"resourceTemplates,omitempty"`
	// Prompts are prompt templates.
	Prompts []Prompt `json:"prompts,omitempty"`
	// Imported is what a gateway re-exports of its imports besides tools.
	Imported *ImportedContent `json:"imported,omitempty"`

	// Withheld are imported tools whose new or changed definitions wait for approval at
	// their import: they are not listed, and a call to one is answered with its Reason.
	Withheld []WithheldTool `json:"withheld,omitempty"`

	// Limits, when set, replace the adapter's default call limits (64 running, 64
	// waiting up to 10s, no per-caller rate). They apply to this process (one pod).
	Limits *Limits `json:"limits,omitempty"`

	// Discovery, when set, serves in Search mode (progressive discovery).
	Discovery *Discovery `json:"discovery,omitempty"`
}

// WithheldTool is a tool a gateway knows of but does not serve until its definition is
// approved.
type WithheldTool struct {
	Name string `json:"name"`
	// Reason answers a call to the tool, starting with "definition_changed:".
	Reason string `json:"reason"`
}

// Limits bound the tool calls of one adapter.
type Limits struct {
	// ConcurrentCalls run at once; at least 1.
	ConcurrentCalls int `json:"concurrentCalls"`
	// QueueLength calls may wait for a slot; 0 refuses at once.
	QueueLength int `json:"queueLength"`
	// QueueWait is how long a call waits for a slot.
	QueueWait Duration `json:"queueWait"`
	// PerCaller, when set, rate-limits each caller's requests, of every method.
	PerCaller *CallerRate `json:"perCaller,omitempty"`
	// CallerShare is the part of each pool that all callers share (the listen streams,
	// the calls waiting for their callers' answers, the subscriptions at the remotes)
	// that one caller may hold, in (0, 1]; 0 (unset): a quarter.
	CallerShare float64 `json:"callerShare,omitempty"`
}

// CallerRate is a token bucket per caller.
type CallerRate struct {
	CallsPerSecond float64 `json:"callsPerSecond"`
	Burst          int     `json:"burst"`
}

// Issuer kinds: how a verified token's claims name the caller.
const (
	// IssuerServiceAccount: Kubernetes service-account tokens; the caller is
	// namespace/name, in the groups system:serviceaccounts and
	// system:serviceaccounts:<namespace>.
	IssuerServiceAccount = "serviceAccount"
	// IssuerOIDC: an external OIDC issuer; the caller is the subject, in the token's
	// "groups" claim.
	IssuerOIDC = "oidc"
)

// AuthConfig is who may call the server and which tools each caller may use. A
// request is authenticated by the first of the bearer token file and the issuers, in
// order, that accepts its token. It can change on a running adapter (keys rotate, rules
// change) without a restart.
type AuthConfig struct {
	// Issuers verify JWTs: signature, issuer, audience, expiry.
	Issuers []Issuer `json:"issuers,omitempty"`
	// Authorization nil lets every authenticated caller call every tool; otherwise a
	// caller sees and calls only the tools a rule allows it.
	Authorization *Authorization `json:"authorization,omitempty"`
}

// Issuer is one JWT issuer the adapter trusts.
type Issuer struct {
	// Kind is IssuerServiceAccount or IssuerOIDC.
	Kind string `json:"kind"`
	// URL is the issuer identifier: the tokens' "iss" claim, and the base of OIDC
	// discovery (URL + "/.well-known/openid-configuration").
	URL string `json:"url"`
	// Audiences: a token must name at least one of them in its "aud" claim.
	Audiences []string `json:"audiences"`
	// JWKS, when set, is the issuer's JSON Web Key Set, fetched by the operator (the
	// cluster's service-account issuer, which the adapter pod has no access to); when
	// empty the adapter discovers the keys itself and refreshes them.
	JWKS json.RawMessage `json:"jwks,omitempty"`
	// CAFile, when set, is a PEM bundle: the only CAs discovery trusts.
	CAFile string `json:"caFile,omitempty"`
	// GroupsPrefix (OIDC issuer) is put before each group of the token's "groups"
	// claim; groups beginning with "system:" are dropped whatever the prefix, so that an
	// identity provider cannot name a Kubernetes group.
	GroupsPrefix string `json:"groupsPrefix,omitempty"`
	// RevokedUIDs (service-account issuer) are the UIDs of the pods (and, in configs
	// rendered before RevokedServiceAccountUIDs, service accounts) deleted within
	// MaxTokenLifetime, as the operator saw them: a token bound to one of them is
	// refused, as the API server would refuse it.
	RevokedUIDs []string `json:"revokedUIDs,omitempty"`
	// RevokedServiceAccountUIDs (service-account issuer) are the UIDs of the service
	// accounts deleted within MaxTokenLifetime; kept apart from the pods so that a
	// restarted operator bounds each kind as it did.
	RevokedServiceAccountUIDs []string `json:"revokedServiceAccountUIDs,omitempty"`
	// RefuseIssuedBefore (service-account issuer), when set, refuses every token issued
	// before it: the operator had to drop deletions it could not keep, and the tokens
	// bound to them were all issued before then. Written by operators before
	// RefuseIssuedBeforeByNamespace; still honoured.
	RefuseIssuedBefore *time.Time `json:"refuseIssuedBefore,omitempty"`
	// RefuseIssuedBeforeByNamespace (service-account issuer) refuses the tokens of a
	// namespace (their kubernetes.io.namespace claim) issued before its time: the
	// operator had to drop deletions of that namespace, and only that one.
	RefuseIssuedBeforeByNamespace map[string]time.Time `json:"refuseIssuedBeforeByNamespace,omitempty"`
	// MaxTokenLifetime (service-account issuer), when set, refuses a token that lives
	// longer (exp - iat): the revocations are remembered that long, so they cover every
	// token accepted.
	MaxTokenLifetime *Duration `json:"maxTokenLifetime,omitempty"`
}

// Authorization is a list of rules; a caller may use a tool, prompt, resource or skill
// when any rule allows it.
type Authorization struct {
	Rules []AuthorizationRule `json:"rules"`
}

// AuthorizationRule allows callers to use what its globs name: tools, prompts,
// resources and skills, each kind only by its own list (tools: ["*"] covers tools
// only). A rule names at least one kind. A caller matches when ServiceAccounts and
// Groups are both empty, or it is one of ServiceAccounts or in one of Groups; and When,
// if set, is true.
type AuthorizationRule struct {
	// Tools are globs over the served tool names ("search_*"): * matches any run of
	// characters, ? one, [a-z] a class.
	Tools []string `json:"tools,omitempty"`
	// Prompts are globs over prompt names, as Tools.
	Prompts []string `json:"prompts,omitempty"`
	// Resources are globs over resource URIs, and over the uriTemplate of a resource
	// template for listing it and the URI read for reading through it; * also
	// matches "/" ("docs://*").
	Resources []string `json:"resources,omitempty"`
	// Skills are globs over skill paths ("acme/*"); * also matches "/". They govern
	// the skill's entry and every one of its files (skill:// URIs).
	Skills []string `json:"skills,omitempty"`
	// ServiceAccounts are "namespace/name", "namespace/*" for any in the namespace.
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
	// Groups the caller's token puts it in.
	Groups []string `json:"groups,omitempty"`
	// When is a CEL expression over the token's claims ("claims.email.endsWith('@x')").
	When string `json:"when,omitempty"`
}

// MemoryConfig is the memory tool: where its files live and the guard in front of them.
type MemoryConfig struct {
	Root            string   `json:"root"`
	ToolName        string   `json:"toolName"`
	AllowedCommands []string `json:"allowedCommands,omitempty"`
	// ConfirmCommands nil means the default set; empty means none.
	ConfirmCommands []string `json:"confirmCommands"`
	ReadOnly        bool     `json:"readOnly,omitempty"`
	MaxFileBytes    int64    `json:"maxFileBytes"`
	MaxTotalBytes   int64    `json:"maxTotalBytes"`
	TrashRetention  Duration `json:"trashRetention"`
}

// ServerInfo is reported to clients in the initialize answer.
type ServerInfo struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Instructions string `json:"instructions,omitempty"`
}

// Tool is one MCP tool and its backend; exactly one backend is set.
type Tool struct {
	Name        string           `json:"name"`
	Description string           `json:"description,omitempty"`
	InputSchema json.RawMessage  `json:"inputSchema"`
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
	Template    *TemplateBackend `json:"template,omitempty"`
	HTTP        *HTTPBackend     `json:"http,omitempty"`
	// Remote re-exports a tool of a remote MCP server (a RemoteToolImport): the
	// adapter is then a gateway for it.
	Remote *RemoteBackend `json:"remote,omitempty"`
}

// RemoteBackend forwards tools/call to a tool of a remote MCP server. Tools with the
// same URL, transport, header files and CA file share one pooled client session.
type RemoteBackend struct {
	// Import is "namespace/name" of the RemoteToolImport, for messages and logs.
	Import string `json:"import"`
	// URL is the remote MCP endpoint (http or https, with a host).
	URL string `json:"url"`
	// Transport is TransportStreamableHTTP or TransportSSE.
	Transport string `json:"transport"`
	// RemoteName is the tool's name at the remote; the served name (Tool.Name) may
	// carry a prefix or a rename.
	RemoteName string `json:"remoteName"`
	// HeaderFiles maps a header name to the file holding its value (mounted from a
	// Secret; the config itself lives in a ConfigMap and never holds the value). The
	// value is the file's content without surrounding whitespace; a changed file is
	// picked up by the next call.
	HeaderFiles map[string]string `json:"headerFiles,omitempty"`
	// CAFile, when set, is a PEM bundle: the only CAs TLS to the remote trusts.
	CAFile string `json:"caFile,omitempty"`
	// Timeout bounds one call, reconnecting included.
	Timeout Duration `json:"timeout"`
	// Addresses, when set, are the only IP addresses the adapter connects to for the
	// URL's host: those the operator's ToolSourcePolicy check resolved and accepted. A
	// DNS answer that changed since that check is not followed.
	Addresses []string `json:"addresses,omitempty"`
	// Definition is the remote's tools/list entry without its name (title,
	// description, inputSchema, outputSchema, annotations, icons, _meta, …). When set,
	// tools/list serves it as is with Tool.Name, so clients see the tool exactly as the
	// remote defined it; Description and InputSchema still drive validation.
	Definition json.RawMessage `json:"definition,omitempty"`
	// Relay names the requests (RelayElicitation, RelaySampling, RelayRoots) the
	// remote may send the caller of this tool while serving its call; the gateway
	// declares them to the remote and answers any other with an error.
	Relay []string `json:"relay,omitempty"`
	// Subscribe says the remote declared resources.subscribe: a stateful gateway relays
	// its clients' resources/subscribe of the resources read from this remote.
	Subscribe bool `json:"subscribe,omitempty"`
	// CallerCredentials, when set, makes every request to the remote carry the
	// credential of the caller it serves, on a session of that caller's own.
	CallerCredentials *CallerCredentials `json:"callerCredentials,omitempty"`
	// Eras are the protocol eras the remote serves this tool in (EraLegacy,
	// EraModern), as the operator's probe found them; empty means EraLegacy only,
	// as for every remote before eras were recorded. A caller is forwarded in its
	// own era where the remote serves it, and translated into the other otherwise.
	Eras []string `json:"eras,omitempty"`
	// RemoteEras are the eras the remote serves at all (its import's status.eras);
	// empty: Eras. A tool the remote does not list in an era it serves (Eras lacks it)
	// is not listed to, nor called by, callers of that era: the remote lists it only
	// to the other. Callers of an era the remote does not serve get the tool
	// translated.
	RemoteEras []string `json:"remoteEras,omitempty"`
	// ModernDefinition is the remote's definition of the tool in EraModern where it
	// differs from Definition: tools/list serves it to the callers of that era.
	ModernDefinition json.RawMessage `json:"modernDefinition,omitempty"`
	// Needs are the client capabilities (RelayElicitation, RelaySampling, RelayRoots)
	// the remote lists the tool only to clients declaring, all among Relay: the tool
	// is listed to a caller only when the gateway can ask it each.
	Needs []string `json:"needs,omitempty"`
	// Extensions are the extensions of protocol 2026-07-28 the remote advertised in
	// server/discover that a gateway passes through to its callers; only
	// ExtensionTasks is one today.
	Extensions []string `json:"extensions,omitempty"`
	// ListChanges says the gateway passes the remote's notifications that its tools,
	// prompts or resources changed on to its callers at once, before the operator has
	// checked the new lists (the config that follows brings what changed, with a
	// notification of its own). Set for an import whose changes are not held for
	// approval, reached over a transport that carries notifications.
	ListChanges bool `json:"listChanges,omitempty"`
}

// ExtensionTasks is the Tasks extension (SEP-2663): a remote may answer a tools/call
// of a caller that declared it with a task, which the caller polls (tasks/get),
// answers (tasks/update) or cancels (tasks/cancel).
const ExtensionTasks = "io.modelcontextprotocol/tasks"

// ServesTasks says whether the remote offers the Tasks extension, in protocol
// 2026-07-28, which has it.
func (r *RemoteBackend) ServesTasks() bool {
	return r.ServesModern() && slices.Contains(r.Extensions, ExtensionTasks)
}

// Protocol eras of a remote (RemoteBackend.Eras): EraLegacy is the newest revision
// with the initialize handshake and sessions, EraModern the stateless one.
const (
	EraLegacy = "2025-11-25"
	EraModern = "2026-07-28"
)

// ServesModern says whether the remote serves the tool in EraModern.
func (r *RemoteBackend) ServesModern() bool {
	return slices.Contains(r.Eras, EraModern) && r.Transport != TransportSSE
}

// ServesLegacy says whether the remote serves the tool in EraLegacy.
func (r *RemoteBackend) ServesLegacy() bool {
	return len(r.Eras) == 0 || slices.Contains(r.Eras, EraLegacy)
}

// ListedTo says whether the tool is listed to (and may be called by) a caller of era:
// the remote lists it in that era, or does not serve that era at all (the caller is
// then translated into the remote's).
func (r *RemoteBackend) ListedTo(era string) bool {
	served := r.RemoteEras
	if len(served) == 0 {
		served = r.Eras
	}
	if era == EraModern {
		return r.ServesModern() || !slices.Contains(served, EraModern) || r.Transport == TransportSSE
	}
	return r.ServesLegacy() || !slices.Contains(served, EraLegacy)
}

// The requests a remote may have relayed to the caller (RemoteBackend.Relay), named
// as the capability a client declares for them.
const (
	RelayElicitation = "elicitation"
	RelaySampling    = "sampling"
	RelayRoots       = "roots"
)

// ToolAnnotations are the MCP tool hints.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// TemplateBackend renders Text (Go text/template) over the arguments.
type TemplateBackend struct {
	Text string `json:"text"`
}

// HTTPBackend POSTs the arguments as JSON to URL.
type HTTPBackend struct {
	URL              string   `json:"url"`
	Timeout          Duration `json:"timeout"`
	MaxResponseBytes int64    `json:"maxResponseBytes"`
}

// Duration is a time.Duration written as "10s" in JSON.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"10s\": %w", err)
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parse duration %q: %w", s, err)
	}
	d.Duration = parsed
	return nil
}

// Load reads a Config from a JSON file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read adapter config: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("parse adapter config %s: %w", path, err)
	}
	return &cfg, nil
}

// RequestStateTTL is how long a requestState a gateway gives a caller stays good: a key
// rotated away must keep opening states for this long.
const RequestStateTTL = 10 * time.Minute
