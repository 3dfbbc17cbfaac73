package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Condition types shared by the kinds of this group. Ready is the summary; the others
// explain it.
const (
	// ConditionReady summarises whether the object does what its spec asks.
	ConditionReady = "Ready"
	// ConditionStalled is True when the spec cannot work as written; the operator does not
	// retry until the spec changes.
	ConditionStalled = "Stalled"
	// ConditionReconciling is True while the object is not Ready and not Stalled: the
	// operator is still working towards the spec (kstatus reads it as InProgress).
	ConditionReconciling = "Reconciling"
	// ConditionAvailable is True when the MCP server answers on its URL.
	ConditionAvailable = "Available"
	// ConditionSchemaPortable is False when a tool's inputSchema uses keys that strict
	// MCP clients reject. The schema is still served unchanged.
	ConditionSchemaPortable = "SchemaPortable"
	// ConditionVerified is True when the operator itself completed an MCP initialize and
	// tools/list through the Service and the pods listed exactly the tools the status
	// promises. Pods that are running but serve the wrong tools, or do not answer MCP,
	// are not Ready.
	ConditionVerified = "Verified"
	// ConditionGroupsPrefixed (SkillServers with spec.auth.oidc) is False when
	// authorization rules name groups that OIDC tokens' groups, prefixed, never match,
	// or that only an Audit-mode ToolSourcePolicy lets match unprefixed for now.
	ConditionGroupsPrefixed = "GroupsPrefixed"
	// ConditionAudiencesAllowed (SkillServers with spec.auth.serviceAccountTokens) is
	// False when the audiences name the API server's or another server's audience.
	ConditionAudiencesAllowed = "AudiencesAllowed"
	// ConditionPodAllowed says whether the ToolSourcePolicies that select the namespace
	// allow a SkillServer's pod overrides (spec.pod.image, spec.pod.serviceAccountName);
	// absent when it sets neither.
	ConditionPodAllowed = "PodAllowed"
)

// Condition reasons, CamelCase as Kubernetes expects.
const (
	ReasonAvailable   = "Available"
	ReasonProgressing = "Progressing"
	ReasonInvalidSpec = "InvalidSpec"
	ReasonApplyFailed = "ApplyFailed"
	// ReasonNameConflict: a child the operator would create has a name already taken by
	// an object it does not control; it is never taken over.
	ReasonNameConflict       = "NameConflict"
	ReasonScaledToZero       = "ScaledToZero"
	ReasonPortable           = "Portable"
	ReasonNonPortableKeys    = "NonPortableKeys"
	ReasonReconciled         = "Reconciled"
	ReasonDeploymentNotReady = "DeploymentNotReady"
	ReasonToolsServed        = "ToolsServed"
	ReasonToolsMismatch      = "ToolsMismatch"
	ReasonNotAnswering       = "NotAnswering"
	ReasonNotVerified        = "NotVerified"
	// ReasonDefinitionsMismatch: the pods serve the expected tools, prompts and skills
	// by name, but an item's definition is not the one rendered (a tool's title,
	// description, schemas or annotations; a prompt's title, description or arguments;
	// a skill's frontmatter or files): they still serve an older config.
	ReasonDefinitionsMismatch = "DefinitionsMismatch"
	// ReasonIssuerKeysUnavailable: the operator could not read the cluster's
	// service-account issuer keys, so the adapter could not check the tokens.
	ReasonIssuerKeysUnavailable = "IssuerKeysUnavailable"
	// ReasonAsksForToken: the server refused the operator's anonymous tools/list with
	// 401, as it should when only callers' own tokens are accepted; the tools it serves
	// could not be listed by the operator.
	ReasonAsksForToken = "AsksForToken"
	// ReasonGroupsPrefixed: OIDC groups are matched with their prefix and every rule
	// group that is not a Kubernetes one carries it.
	ReasonGroupsPrefixed = "GroupsPrefixed"
	// ReasonUnprefixedGroups: rules name groups without the OIDC prefix; no OIDC token
	// matches them.
	ReasonUnprefixedGroups = "UnprefixedGroups"
	// ReasonUnprefixedGroupsAudited: rules name groups without the OIDC prefix and an
	// Audit-mode ToolSourcePolicy keeps OIDC groups unprefixed until they are moved.
	ReasonUnprefixedGroupsAudited = "UnprefixedGroupsAudited"
	// ReasonAudiencesAllowed: no audience is the API server's or another server's.
	ReasonAudiencesAllowed = "AudiencesAllowed"
	// ReasonForbiddenAudience: an audience is the API server's or another server's; it
	// is not accepted, and the server is Stalled until the spec drops it.
	ReasonForbiddenAudience = "ForbiddenAudience"
	// ReasonForbiddenAudienceAudited: as ReasonForbiddenAudience, but an Audit-mode
	// ToolSourcePolicy lets the audience be accepted for now.
	ReasonForbiddenAudienceAudited = "ForbiddenAudienceAudited"
	// ReasonPodAllowed, ReasonPodAllowedByAudit and ReasonPodNotAllowlisted are the
	// reasons of PodAllowed (and of Stalled, when refused).
	ReasonPodAllowed        = ReasonAllowed
	ReasonPodAllowedByAudit = ReasonAllowedByAudit
	ReasonPodNotAllowlisted = ReasonNotAllowlisted
	// ReasonPodNotAdmitted: the operator's admission policy (config/admission) would
	// refuse the pods, so nothing is applied; the message names its parameter.
	ReasonPodNotAdmitted = "NotAdmitted"
)

// Condition types of RemoteToolImport.
const (
	// ConditionSourceAllowed is True when a ToolSourcePolicy allows the import's source.
	ConditionSourceAllowed = "SourceAllowed"
	// ConditionHandshakeSucceeded is True when the last MCP handshake succeeded.
	ConditionHandshakeSucceeded = "HandshakeSucceeded"
	// ConditionToolsDiscovered is True when the status lists the remote's tools.
	ConditionToolsDiscovered = "ToolsDiscovered"
	// ConditionStale is True when the listed tools come from an earlier handshake
	// because the last one failed.
	ConditionStale = "Stale"
	// ConditionDefinitionsApproved is True when every definition the import serves is
	// approved (or approval is Automatic), False with ChangePending while new or
	// changed ones wait for an owner: gateways serve the approved ones and withhold
	// the rest, so the import stays Ready.
	ConditionDefinitionsApproved = "DefinitionsApproved"
)

// Reasons of DefinitionsApproved.
const (
	ReasonAutomaticApproval = "AutomaticApproval"
	ReasonAllApproved       = "AllApproved"
	ReasonChangePending     = "ChangePending"
	// ReasonUnknownDigest: the approved digest matches neither the definitions the
	// remote serves nor any recorded in status; nothing is served until one does.
	ReasonUnknownDigest = "UnknownDigest"
)

// Reasons of a ToolSourcePolicy decision: SourceAllowed of a RemoteToolImport, and
// PodAllowed of a SkillServer.
const (
	ReasonAllowed        = "Allowed"
	ReasonAllowedByAudit = "AllowedByAudit"
	ReasonNotAllowlisted = "NotAllowlisted"
	ReasonNoPolicy       = "NoPolicy"
	ReasonDeniedAddress  = "DeniedAddress"
	ReasonDNSError       = "DNSError"
	ReasonInvalidSource  = "InvalidSource"
	// ReasonInsecureTokenEndpoint refuses a token endpoint reached over plain http away
	// from loopback: the gateway sends callers' tokens and its client credential there.
	ReasonInsecureTokenEndpoint = "InsecureTokenEndpoint"
)

// Reasons of a failed handshake (HandshakeSucceeded False): what went wrong, one each.
// The MCP client's failure codes map to them in one place (the controller's
// handshakeReason).
const (
	ReasonTimeout           = "Timeout"
	ReasonConnectionRefused = "ConnectionRefused"
	ReasonTLSError          = "TLSError"
	ReasonUnauthorized      = "Unauthorized"
	ReasonHTTPError         = "HTTPError"
	ReasonProtocolError     = "ProtocolError"
	ReasonInitializeFailed  = "InitializeFailed"
	ReasonToolsListFailed   = "ToolsListFailed"
	ReasonResponseTooLarge  = "ResponseTooLarge"
	ReasonRedirectRefused   = "RedirectRefused"
	ReasonConnectionDropped = "ConnectionDropped"
	ReasonSessionLost       = "SessionLost"
	ReasonInvalidConfig     = "InvalidConfig"
	// ReasonHandshakeFailed: a failure the MCP client did not classify.
	ReasonHandshakeFailed = "HandshakeFailed"
)

// Condition type and reasons of a SkillServer's content (skills, prompts, resources).
const (
	// ConditionContentValid is False when the content the spec names is missing or
	// breaks a rule; nothing new is applied until it is fixed.
	ConditionContentValid = "ContentValid"
	ReasonContentValid    = "Valid"
	// ReasonContentMissing: a ConfigMap or key the spec names is not there (or lacks the
	// label cantus.dev/content=true).
	ReasonContentMissing = "ContentMissing"
	// ReasonInvalidContent: what is there breaks a rule.
	ReasonInvalidContent = "InvalidContent"
	// ReasonContentMismatch (Verified): the pods answer, but miss skills or prompts the
	// spec declares.
	ReasonContentMismatch = "ContentMismatch"
	// ReasonImageSkillsLeftOut (Verified): the pods do not serve a skill from an image.
	ReasonImageSkillsLeftOut = "ImageSkillsLeftOut"
)

// Reasons of RemoteToolImport conditions besides the handshake failure reasons.
const (
	ReasonHandshakeSucceeded = "HandshakeSucceeded"
	ReasonNotAttempted       = "NotAttempted"
	ReasonToolsListed        = "ToolsListed"
	ReasonNoTools            = "NoTools"
	ReasonLastProbeFailed    = "LastProbeFailed"
	ReasonFresh              = "Fresh"
	ReasonSecretNotFound     = "SecretNotFound"
	ReasonBridgeNotReady     = "BridgeNotReady"
)

// Condition types of a SkillServer that re-exports imports.
const (
	// ConditionImportsResolved is False when an import in spec.imports is missing, not
	// allowed or not Ready; its tools are not served.
	ConditionImportsResolved = "ImportsResolved"
	// ConditionToolNamesUnique is False when two tools would be served under one name;
	// the imported ones are left out and named.
	ConditionToolNamesUnique = "ToolNamesUnique"
	// ConditionImportedToolsServable is False when some imported tools cannot be served
	// as their remote defined them (a name outside the MCP grammar, a schema that is not
	// an object schema or too costly to validate); they are left out and named, and the
	// rest are served.
	ConditionImportedToolsServable = "ImportedToolsServable"
	// ConditionAppViewsCallable is False when imported tools that open an MCP App view
	// (_meta.ui.resourceUri) are served under another name (a prefix or a rename): the
	// view calls tools by the names its remote gave them, so its calls will fail. The
	// tools are still served; it warns without making the server un-Ready.
	ConditionAppViewsCallable = "AppViewsCallable"
)

// Reasons of ImportsResolved, ToolNamesUnique and ImportedToolsServable, in that order.
const (
	ReasonAllResolved     = "AllResolved"
	ReasonImportsNotReady = "ImportsNotReady"
	ReasonNoCollisions    = "NoCollisions"
	ReasonNameCollision   = "NameCollision"
	ReasonAllServable     = "AllServable"
	ReasonToolsSkipped    = "ToolsSkipped"
	// ReasonCapabilitiesNotRelayed: imported tools are left out because their remote
	// lists them only to clients declaring capabilities the import does not relay.
	ReasonCapabilitiesNotRelayed = "CapabilitiesNotRelayed"
)

// Reasons of AppViewsCallable.
const (
	ReasonAppToolsKeepTheirNames = "AppToolsKeepTheirNames"
	ReasonAppToolsRenamed        = "AppToolsRenamed"
)

// GetConditions returns the SkillServer's status conditions.
func (s *SkillServer) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions replaces the SkillServer's status conditions.
func (s *SkillServer) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }

// GetConditions returns the RemoteToolImport's status conditions.
func (i *RemoteToolImport) GetConditions() []metav1.Condition { return i.Status.Conditions }

// SetConditions replaces the RemoteToolImport's status conditions.
func (i *RemoteToolImport) SetConditions(c []metav1.Condition) { i.Status.Conditions = c }
