package v1alpha1

// ProbeCredentials say how the operator authenticates its own requests to the remote
// (handshake, listings, the stream it keeps open for list changes) when the remote takes
// no static key in spec.headers but an OAuth token, so that discovery never needs a user
// present. Gateways never use them: their calls carry each caller's credential
// (spec.callerCredentials).
type ProbeCredentials struct {
	// ClientCredentials obtains the token with the OAuth 2.0 client credentials grant
	// (RFC 6749 section 4.4) as a client of the remote's authorization server. The token
	// is sent as Authorization: Bearer, in place of an Authorization of spec.headers.
	// +required
	ClientCredentials *ClientCredentialsGrant `json:"clientCredentials"`
}

// ClientCredentialsGrant is an OAuth client that obtains tokens for itself.
type ClientCredentialsGrant struct {
	// TokenEndpoint is the authorization server's token endpoint. It is checked against
	// the ToolSourcePolicy like the remote: https, or http on loopback only.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="tokenEndpoint must be an absolute http:// or https:// URL with a host"
	// +required
	TokenEndpoint string `json:"tokenEndpoint"`

	// ClientID is the operator's client at the authorization server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	ClientID string `json:"clientID"`

	// ClientSecret authenticates the client (client_secret_basic).
	// +required
	ClientSecret SecretKeyRef `json:"clientSecret"`

	// Scopes asks for these scopes.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[!#-\[\]-~]+$`
	// +listType=set
	// +optional
	Scopes []string `json:"scopes,omitempty"`

	// Audience asks for a token for this audience; the remote's URL is always sent as
	// the RFC 8707 resource.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Audience string `json:"audience,omitempty"`
}

// Reasons of a probe whose own credentials failed.
const (
	// ReasonProbeTokenFailed (HandshakeSucceeded): the token endpoint refused or failed
	// the operator's client credentials grant; nothing was sent to the remote.
	ReasonProbeTokenFailed = "ProbeTokenFailed"
	// ReasonProbeTokenEndpointNotAllowed (SourceAllowed): the probe's token endpoint is
	// refused by the ToolSourcePolicies or is not https (loopback excepted).
	ReasonProbeTokenEndpointNotAllowed = "ProbeTokenEndpointNotAllowed"
	// ReasonProbeIdentityRequired (HandshakeSucceeded): the remote refused the operator's
	// probe of an import with callerCredentials; it wants a credential even to list its
	// tools, and callers' credentials are never used to probe.
	ReasonProbeIdentityRequired = "ProbeIdentityRequired"
)
