package adapterconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// CallerCredentials is how a gateway obtains, for each caller, the caller's own
// credential for a remote (RemoteToolImport spec.callerCredentials). Exactly one of
// TokenExchange and PerCallerSecret is set.
type CallerCredentials struct {
	// Header carries the credential, as ValuePrefix followed by the credential.
	Header      string `json:"header"`
	ValuePrefix string `json:"valuePrefix,omitempty"`

	TokenExchange   *TokenExchange   `json:"tokenExchange,omitempty"`
	PerCallerSecret *PerCallerSecret `json:"perCallerSecret,omitempty"`

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
