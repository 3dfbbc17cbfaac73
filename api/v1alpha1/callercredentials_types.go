package v1alpha1

import "time"

// The defaults of spec.callerCredentials, one constant each, as its markers say.
const (
	DefaultCallerCredentialHeader      = "Authorization"
	DefaultCallerCredentialValuePrefix = "Bearer "
	DefaultCallerSecretKey             = "token"
	DefaultExchangeMaxCacheTTL         = "15m"
)

// Labels and annotations of a per-caller Secret (spec.callerCredentials.perCallerSecret).
const (
	// LabelCallerCredentialsFor, on a Secret in the import's namespace, names the
	// RemoteToolImport whose per-caller credential the Secret holds.
	LabelCallerCredentialsFor = "cantus.dev/caller-credentials-for" //nolint:gosec // G101: a label name, not a credential
	// AnnotationCaller names the caller the Secret's credential belongs to:
	// "serviceaccount:<namespace>/<name>" or "oidc:<issuer>#<subject>".
	AnnotationCaller = "cantus.dev/caller"
)

// CallerCredentials says how a gateway obtains each caller's own credential for the
// remote, so that the remote sees who acts rather than one shared account. The
// credential is sent in Header; spec.headers stay the import's service identity, used by
// the operator's probes.
// +kubebuilder:validation:XValidation:rule="[has(self.tokenExchange), has(self.perCallerSecret), has(self.connect)].exists_one(x, x)",message="callerCredentials takes exactly one of tokenExchange, perCallerSecret or connect"
type CallerCredentials struct {
	// Header carries the caller's credential to the remote.
	// +kubebuilder:default=Authorization
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!(self.lowerAscii() in ['host', 'content-length', 'content-type', 'transfer-encoding', 'connection', 'upgrade', 'te', 'trailer', 'keep-alive', 'proxy-connection', 'accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id'])",message="this header is set by the MCP client or the HTTP transport and cannot carry a credential; use Authorization or a header such as X-Api-Key"
	// +optional
	Header string `json:"header,omitempty"`

	// TokenExchange exchanges the caller's verified token (RFC 8693) for a token for the
	// remote.
	// +optional
	TokenExchange *TokenExchange `json:"tokenExchange,omitempty"`

	// PerCallerSecret reads each caller's key from a Secret of its own in the import's
	// namespace, labelled cantus.dev/caller-credentials-for=<import> and annotated
	// cantus.dev/caller=<caller>.
	// +optional
	PerCallerSecret *PerCallerSecret `json:"perCallerSecret,omitempty"`

	// Connect lets each caller's user connect their own account at the remote's
	// authorization server (OAuth 2.1 authorization code with PKCE); the operator keeps
	// the tokens, encrypted, and refreshes them.
	// +optional
	Connect *Connect `json:"connect,omitempty"`
}

// TokenExchange is an RFC 8693 token exchange at an OAuth token endpoint.
type TokenExchange struct {
	// TokenEndpoint is the authorization server's token endpoint. It is checked against
	// the ToolSourcePolicy like the remote: https, or http on loopback only.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="tokenEndpoint must be an absolute http:// or https:// URL with a host"
	// +required
	TokenEndpoint string `json:"tokenEndpoint"`

	// Audience asks for a token for this audience (the remote's identifier at the
	// authorization server). The remote's URL is always sent as the RFC 8707 resource.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Audience string `json:"audience,omitempty"`

	// Scopes asks for these scopes.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[!#-\[\]-~]+$`
	// +listType=set
	// +optional
	Scopes []string `json:"scopes,omitempty"`

	// ClientID is the gateway's client at the authorization server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	ClientID string `json:"clientID"`

	// ClientSecret authenticates the client with client_secret_basic.
	// +optional
	ClientSecret *SecretKeyRef `json:"clientSecret,omitempty"`

	// PrivateKey (PEM, RSA or EC) authenticates the client with private_key_jwt.
	// +optional
	PrivateKey *SecretKeyRef `json:"privateKey,omitempty"`

	// ActorTokenAudience, when set, sends the gateway's own projected service-account
	// token, issued for this audience, as the actor_token, so that the token the remote
	// gets says "the gateway, acting for the caller" (act).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	ActorTokenAudience string `json:"actorTokenAudience,omitempty"`

	// MaxCacheTTL bounds how long an exchanged token is reused; a token is reused until
	// 30s before it expires, and never longer than this.
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('10s') && duration(self) <= duration('24h'))",message="maxCacheTTL must be between 10s and 24h"
	// +optional
	MaxCacheTTL *Duration `json:"maxCacheTTL,omitempty"`
}

// PerCallerSecret reads each caller's credential from a Secret of its own.
type PerCallerSecret struct {
	// Key of the Secret that holds the credential.
	// +kubebuilder:default=token
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key string `json:"key,omitempty"`

	// ValuePrefix goes before the Secret's value in the header: "Bearer " by default, ""
	// for a header that takes the key as it is (X-Api-Key).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	ValuePrefix *string `json:"valuePrefix,omitempty"`
}

// CallerCredentialsStatus says how an import's callers get their credential, without
// any credential, caller list or subject in it.
type CallerCredentialsStatus struct {
	// Mode is TokenExchange, PerCallerSecret or Connect.
	// +optional
	Mode string `json:"mode,omitempty"`
	// TokenEndpointChecked is true when the token endpoint passed the ToolSourcePolicy
	// check at the last probe.
	// +optional
	TokenEndpointChecked bool `json:"tokenEndpointChecked,omitempty"`
	// CallerSecrets counts the per-caller Secrets found for the import at the last probe.
	// +optional
	CallerSecrets int32 `json:"callerSecrets,omitempty"`
	// TokenEndpointAddresses are the IP addresses the ToolSourcePolicy check resolved the
	// token endpoint's host to and accepted at the last probe. Gateways dial only these,
	// as they do the remote's status.addresses.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	TokenEndpointAddresses []string `json:"tokenEndpointAddresses,omitempty"`
	// AuthorizationServer is the issuer where callers connect (connect mode): as
	// configured, or discovered from the remote's protected-resource metadata.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	AuthorizationServer string `json:"authorizationServer,omitempty"`
	// AuthorizationServerChecked is true when the authorization server's metadata was read
	// and its endpoints passed the ToolSourcePolicy check at the last probe.
	// +optional
	AuthorizationServerChecked bool `json:"authorizationServerChecked,omitempty"`
	// AuthorizationServerDiscovered is true when the authorization server was found in
	// the remote's protected-resource metadata (RFC 9728) rather than configured.
	// +optional
	AuthorizationServerDiscovered bool `json:"authorizationServerDiscovered,omitempty"`
	// Endpoints are the authorization server's endpoints the operator uses, as checked.
	// +optional
	Endpoints *AuthorizationServerEndpoints `json:"endpoints,omitempty"`
	// Client says which OAuth client the operator connects callers as: PreRegistered,
	// ClientIDMetadataDocument or DynamicRegistration.
	// +optional
	Client string `json:"client,omitempty"`
	// Connected counts the callers with a connected account at the last probe.
	// +optional
	Connected int32 `json:"connected,omitempty"`
	// ReconnectNeeded counts the callers whose account must be connected again (its
	// refresh failed, or the key that encrypts it is gone) at the last probe.
	// +optional
	ReconnectNeeded int32 `json:"reconnectNeeded,omitempty"`
	// FailedRefreshes counts the refreshes that failed since the operator started
	// (this replica), at the last probe.
	// +optional
	FailedRefreshes int32 `json:"failedRefreshes,omitempty"`
}

// Bounds of spec.callerCredentials.tokenExchange.maxCacheTTL, as its CEL rule says.
const (
	MinExchangeMaxCacheTTL = 10 * time.Second
	MaxExchangeMaxCacheTTL = 24 * time.Hour
)

// MaxCacheTTLOrDefault is how long an exchanged token may be reused at most.
func (t *TokenExchange) MaxCacheTTLOrDefault() time.Duration {
	if t.MaxCacheTTL != nil {
		if d, err := t.MaxCacheTTL.Bounded(MinExchangeMaxCacheTTL, MaxExchangeMaxCacheTTL); err == nil {
			return d
		}
	}
	return 15 * time.Minute
}

// HeaderOrDefault is the header that carries the caller's credential.
func (c *CallerCredentials) HeaderOrDefault() string {
	if c.Header == "" {
		return DefaultCallerCredentialHeader
	}
	return c.Header
}

// KeyOrDefault is the key of a per-caller Secret that holds the credential.
func (p *PerCallerSecret) KeyOrDefault() string {
	if p.Key == "" {
		return DefaultCallerSecretKey
	}
	return p.Key
}

// ValuePrefixOrDefault goes before the credential in the header.
func (p *PerCallerSecret) ValuePrefixOrDefault() string {
	if p.ValuePrefix == nil {
		return DefaultCallerCredentialValuePrefix
	}
	return *p.ValuePrefix
}

// Mode is CallerCredentialsModeTokenExchange, CallerCredentialsModePerCallerSecret or
// CallerCredentialsModeConnect.
func (c *CallerCredentials) Mode() string {
	switch {
	case c.TokenExchange != nil:
		return CallerCredentialsModeTokenExchange
	case c.Connect != nil:
		return CallerCredentialsModeConnect
	}
	return CallerCredentialsModePerCallerSecret
}

// Conditions and reasons of caller credentials.
const (
	// ConditionCallerCredentialsReady (gateway SkillServers that re-export an import with
	// spec.callerCredentials) is False when the gateway cannot act for its callers at such
	// an import: those imports are then not served.
	ConditionCallerCredentialsReady = "CallerCredentialsReady" //nolint:gosec // G101: a condition type, not a credential
	ReasonCallerCredentialsReady    = "CallerCredentialsReady" //nolint:gosec // G101: a reason, not a credential
	// ReasonCallerIdentityRequired: the gateway accepts no caller with an identity (no
	// spec.auth.serviceAccountTokens nor spec.auth.oidc).
	ReasonCallerIdentityRequired = "CallerIdentityRequired"
	// ReasonPassThroughAudience: a token exchange would ask for one of the gateway's own
	// inbound audiences, so that the remote could use the token at the gateway.
	ReasonPassThroughAudience = "PassThroughAudience"
	// ReasonForbiddenActorAudience: the actor token would be issued for an audience that
	// works elsewhere (the API server's, this or another SkillServer's).
	ReasonForbiddenActorAudience = "ForbiddenActorAudience"
	// ReasonCallerKeysTooLarge: the per-caller keys do not fit in one Secret.
	ReasonCallerKeysTooLarge = "CallerKeysTooLarge"
	// ReasonTokenEndpointNotAllowed (RemoteToolImport SourceAllowed): the token endpoint is
	// refused by the ToolSourcePolicies or is not https (loopback excepted).
	ReasonTokenEndpointNotAllowed = "TokenEndpointNotAllowed"
)

// The modes of CallerCredentialsStatus.
const (
	CallerCredentialsModeTokenExchange   = "TokenExchange"
	CallerCredentialsModePerCallerSecret = "PerCallerSecret"
	CallerCredentialsModeConnect         = "Connect"
)
