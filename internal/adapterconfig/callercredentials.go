package adapterconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// CallerCredentials is how a gateway obtains, for each caller, the caller's own
// credential for a remote (RemoteToolImport spec.callerCredentials). Exactly one of
// TokenExchange, PerCallerSecret and Connect is set.
type CallerCredentials struct {
	// Header carries the credential, as ValuePrefix followed by the credential.
	Header      string `json:"header"`
	ValuePrefix string `json:"valuePrefix,omitempty"`

	TokenExchange   *TokenExchange   `json:"tokenExchange,omitempty"`
	PerCallerSecret *PerCallerSecret `json:"perCallerSecret,omitempty"`
	Connect         *Connect         `json:"connect,omitempty"`

	// MaxCallers bounds the callers whose session (and credential) a gateway keeps for
	// the remote at once, the least recently used going first; IdleTimeout closes a
	// caller's session unused that long. Zero: DefaultMaxCallers, DefaultCallerIdleTimeout.
	MaxCallers  int      `json:"maxCallers,omitempty"`
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
}

// The defaults of CallerCredentials' bounds.
const (
	DefaultMaxCallers        = 10000
	DefaultCallerIdleTimeout = 5 * time.Minute
)

// TokenExchange is an RFC 8693 exchange of the caller's verified inbound token.
type TokenExchange struct {
	TokenEndpoint string `json:"tokenEndpoint"`
	// Addresses, when set, are the only addresses the token endpoint's host is dialled
	// at: those the operator's policy check accepted.
	Addresses []string `json:"addresses,omitempty"`
	// CAFile, when set, is the only CA bundle TLS to the token endpoint trusts.
	CAFile string `json:"caFile,omitempty"`
	// Resource is the remote's canonical URL, always sent (RFC 8707).
	Resource string   `json:"resource"`
	Audience string   `json:"audience,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`

	ClientID string `json:"clientID"`
	// ClientSecretFile holds the client secret (client_secret_basic); or
	// PrivateKeyFile holds a PEM key for private_key_jwt.
	ClientSecretFile string `json:"clientSecretFile,omitempty"`
	PrivateKeyFile   string `json:"privateKeyFile,omitempty"`
	// Issuer is the authorization server's issuer identifier, the audience of a
	// private_key_jwt assertion: servers differ (zitadel/oidc accepts only the issuer,
	// as draft-ietf-oauth-rfc7523bis requires; others take the token endpoint URL,
	// which is sent when Issuer is empty).
	Issuer string `json:"issuer,omitempty"`
	// ActorTokenFile, when set, holds the gateway's own token, sent as actor_token.
	ActorTokenFile string `json:"actorTokenFile,omitempty"`

	// MaxCacheTTL bounds the reuse of an exchanged token.
	MaxCacheTTL Duration `json:"maxCacheTTL"`
}

// PerCallerSecret reads each caller's credential from a file named
// CallerKeyFileName(import, caller identity) in Dir, a directory the operator keeps
// (one Secret per gateway, mounted; updated without a restart).
type PerCallerSecret struct {
	Dir string `json:"dir"`
	// Namespace, Label and Key say, in the error a caller without a credential gets,
	// which Secret to create: in Namespace, labelled Label, annotated with the caller,
	// holding the credential under Key.
	Namespace string `json:"namespace"`
	Label     string `json:"label"`
	Key       string `json:"key"`
}

// Connect is how each caller connects their own account at the remote's authorization server
// (OAuth 2.1 authorization code + PKCE, done by the operator, which alone holds and
// refreshes the tokens); a gateway fetches a caller's short-lived access token from the
// operator's ConnectTokenPath over HTTPS, presenting its own token, and is told where
// the caller connects when the caller has not.
type Connect struct {
	// Endpoint is the operator's token endpoint for gateways (its ConnectTokenPath).
	Endpoint string `json:"endpoint"`
	// CAFile, when set, is the only CA bundle TLS to Endpoint trusts.
	CAFile string `json:"caFile,omitempty"`
	// TokenFile holds the gateway's own token (a projected service-account token issued
	// for ConnectAudience), sent as a bearer token to Endpoint; it is read at every fetch,
	// since it is rotated.
	TokenFile string `json:"tokenFile"`
	// AuthorizationServer is where callers connect, shown in the errors callers get.
	AuthorizationServer string `json:"authorizationServer,omitempty"`
}

// The operator's connect endpoints (on the catalog's HTTPS listener) and the audience
// of the token a gateway presents to ConnectTokenPath.
const (
	ConnectAudience    = "cantus.dev/connect"
	ConnectTokenPath   = "/connect/v1/token" //nolint:gosec // G101: a path, not a credential
	ConnectStartPath   = "/connect/v1/start"
	ConnectCallback    = "/connect/v1/callback"
	ConnectClientPath  = "/connect/v1/client.json"
	ConnectDisconnect  = "/connect/v1/disconnect"
	ConnectRequiredErr = "connect_required"
)

// ConnectTokenRequest is what a gateway asks ConnectTokenPath: the access token of
// Caller (an identity as ServiceAccountCaller or OIDCCaller make) for Import
// ("namespace/name"). Refused marks that the remote refused the last token given, so the
// operator refreshes it rather than hand it out again.
type ConnectTokenRequest struct {
	Import  string `json:"import"`
	Caller  string `json:"caller"`
	Refused bool   `json:"refused,omitempty"`
}

// ConnectTokenResponse is ConnectTokenPath's answer. 200: AccessToken, valid for
// ExpiresIn seconds. 409 (Error ConnectRequiredErr): the caller has not connected, or
// must reconnect; ConnectURL, valid ExpiresIn seconds and usable once, is where the
// caller's user connects, and Message says so for people. Other statuses: Error and
// Message say what failed (401 the gateway's token, 403 an import the gateway does not
// serve).
type ConnectTokenResponse struct {
	AccessToken string `json:"accessToken,omitempty"`
	ExpiresIn   int64  `json:"expiresIn,omitempty"`
	Error       string `json:"error,omitempty"`
	ConnectURL  string `json:"connectURL,omitempty"`
	Message     string `json:"message,omitempty"`
}

// ServiceAccountCaller is the identity of a service-account caller: a recreated account
// (new UID) is a new caller.
func ServiceAccountCaller(namespaceName, uid string) string {
	return "serviceaccount:" + namespaceName + "#" + uid
}

// OIDCCaller is the identity of an OIDC caller.
func OIDCCaller(issuer, subject string) string {
	return "oidc:" + issuer + "#" + subject
}

// CallerKeyFileName is the file (and the key of the gateway's caller-keys Secret) that
// holds caller's credential for the import ("namespace/name"). It is a digest, so that
// neither a caller's name nor a subject shows in the Secret's keys.
func CallerKeyFileName(importRef, caller string) string {
	sum := sha256.Sum256([]byte(importRef + "\x00" + caller))
	return "c-" + hex.EncodeToString(sum[:20])
}
