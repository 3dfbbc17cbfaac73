package v1alpha1

// Connect lets each caller's user connect their own account at the remote's OAuth
// authorization server. The operator is the OAuth client: it serves the authorization
// callback, keeps each caller's tokens encrypted in its own namespace and refreshes
// them; gateways fetch short-lived access tokens from it.
type Connect struct {
	// AuthorizationServer is the issuer identifier of the remote's authorization server
	// (its metadata is read from /.well-known/oauth-authorization-server, or
	// /.well-known/openid-configuration). Empty: the first authorization server the
	// remote names in its protected-resource metadata (RFC 9728,
	// /.well-known/oauth-protected-resource). Its endpoints are checked against the
	// ToolSourcePolicy like the remote: https, or http on loopback only.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="authorizationServer must be an absolute http:// or https:// URL with a host"
	// +optional
	AuthorizationServer string `json:"authorizationServer,omitempty"`

	// Scopes asks for these scopes.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[!#-\[\]-~]+$`
	// +listType=set
	// +optional
	Scopes []string `json:"scopes,omitempty"`

	// Client is a client registered beforehand at the authorization server. Empty: the
	// operator's Client ID Metadata Document (its client ID is the document's https URL),
	// which needs the operator's public base URL (--connect-base-url); or, when the
	// authorization server does not say it supports such documents but offers dynamic
	// client registration (RFC 7591), a client the operator registers there.
	// +optional
	Client *ConnectClient `json:"client,omitempty"`

	// ProbeIdentity is who the operator's probes (tools, content, approval digests) act
	// as, for a remote that needs a user even for tools/list: its credential is sent in
	// spec.callerCredentials.header instead of spec.headers' value there. Without it,
	// probes use spec.headers, and a remote that refuses them makes the import not
	// Ready with reason ProbeIdentityRequired.
	// +optional
	ProbeIdentity *ProbeIdentity `json:"probeIdentity,omitempty"`
}

// ProbeIdentity is a user for the operator's probes: a token from a Secret, or the
// account a service account of the import's namespace connected for this import.
// +kubebuilder:validation:XValidation:rule="has(self.tokenSecretRef) != has(self.serviceAccount)",message="probeIdentity takes exactly one of tokenSecretRef or serviceAccount"
type ProbeIdentity struct {
	// TokenSecretRef holds a token for the remote, sent as "Bearer <token>".
	// +optional
	TokenSecretRef *SecretKeyRef `json:"tokenSecretRef,omitempty"`

	// ServiceAccount names a service account of the import's namespace whose connected
	// account (for this import) the probes use; it connects like any caller.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
}

// ConnectClient is an OAuth client registered at the authorization server, with the
// operator's callback (<connect base URL>/connect/v1/callback) as its redirect URI.
type ConnectClient struct {
	// ClientID of the registered client.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	ClientID string `json:"clientID"`

	// ClientSecret, in the import's namespace, authenticates a confidential client
	// (client_secret_basic); absent for a public client.
	// +optional
	ClientSecret *SecretKeyRef `json:"clientSecret,omitempty"`
}

// AuthorizationServerEndpoints are an authorization server's endpoints, as its metadata
// gave them and the ToolSourcePolicy check accepted them.
type AuthorizationServerEndpoints struct {
	// +kubebuilder:validation:MaxLength=2048
	Authorization string `json:"authorization"`
	// +kubebuilder:validation:MaxLength=2048
	Token string `json:"token"`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Revocation string `json:"revocation,omitempty"`
	// Registration is the dynamic client registration endpoint (RFC 7591), set when the
	// operator registers its client there.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Registration string `json:"registration,omitempty"`
}

// The clients of CallerCredentialsStatus.Client.
const (
	ConnectClientPreRegistered       = "PreRegistered"
	ConnectClientMetadataDocument    = "ClientIDMetadataDocument"
	ConnectClientDynamicRegistration = "DynamicRegistration"
)

// Reasons of connect mode (RemoteToolImport SourceAllowed).
const (
	// ReasonAuthorizationServerNotAllowed: an endpoint of the authorization server is
	// refused by the ToolSourcePolicies or is not https (loopback excepted).
	ReasonAuthorizationServerNotAllowed = "AuthorizationServerNotAllowed"
	// ReasonAuthorizationServerUnknown: no authorization server is configured and the
	// remote's protected-resource metadata names none, or its metadata cannot be read.
	ReasonAuthorizationServerUnknown = "AuthorizationServerUnknown"
	// ReasonConnectUnavailable: the operator serves no connect endpoints (its catalog
	// listener is off).
	ReasonConnectUnavailable = "ConnectUnavailable"
	// ReasonConnectClientRequired: connect mode needs a client, and there is neither a
	// pre-registered one (spec.callerCredentials.connect.client) nor the operator's
	// Client ID Metadata Document (no --connect-base-url).
	ReasonConnectClientRequired = "ConnectClientRequired"
	// ReasonProbeIdentityNotConnected: the probe identity's service account has not
	// connected an account for the import (or must connect it again).
	ReasonProbeIdentityNotConnected = "ProbeIdentityNotConnected"
)

// ReasonGatewayServiceAccountRequired (SkillServer CallerCredentialsReady): a gateway
// that re-exports an import in connect mode runs as the namespace's default service
// account, which other pods share.
const ReasonGatewayServiceAccountRequired = "GatewayServiceAccountRequired"
