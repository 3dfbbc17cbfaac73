// Package access decides who calls an adapter and which tools they may use: it checks
// the bearer tokens a request presents (shared static tokens, Kubernetes
// service-account tokens, OIDC tokens) and evaluates a SkillServer's authorization
// rules. It is shared by the adapter, which enforces it, and the operator, which checks
// rules at apply time and filters its catalog by them.
package access

import (
	"context"
	"fmt"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// KindBearer is the kind of a caller that presented one of the static bearer tokens;
// the others are adapterconfig.IssuerServiceAccount and adapterconfig.IssuerOIDC.
const KindBearer = "bearer"

// Caller is who made a request, as its token says.
type Caller struct {
	Kind string
	// Subject is the token's "sub" (empty for a static token).
	Subject string
	// Issuer is the token's "iss" (empty for a static token).
	Issuer string
	// ServiceAccount is "namespace/name" for a service-account token.
	ServiceAccount string
	// ServiceAccountUID is the account's UID, for a service-account token: a recreated
	// account is another caller.
	ServiceAccountUID string
	// Groups the token puts the caller in.
	Groups []string
	// Claims are the verified token's claims, for the rules' CEL expressions.
	Claims map[string]any

	// token is the verified token as presented, for a token exchange on the caller's
	// behalf; unexported so that no formatting of a Caller prints it.
	token string
}

// Identity names the caller for per-caller credentials: a service account with its UID,
// or an OIDC issuer and subject. It is "" for a caller with no identity of its own (a
// static bearer token, or none).
func (c *Caller) Identity() string {
	switch {
	case c == nil:
		return ""
	case c.ServiceAccount != "":
		return adapterconfig.ServiceAccountCaller(c.ServiceAccount, c.ServiceAccountUID)
	case c.Kind == adapterconfig.IssuerOIDC && c.Subject != "":
		return adapterconfig.OIDCCaller(c.Issuer, c.Subject)
	default:
		return ""
	}
}

// SubjectToken is the verified token the caller presented ("" for a static token), to
// be exchanged on its behalf; never to be sent on as it is.
func (c *Caller) SubjectToken() string {
	if c == nil {
		return ""
	}
	return c.token
}

// String names the caller in audit logs, never with its token.
func (c *Caller) String() string {
	switch {
	case c == nil:
		return "anonymous"
	case c.ServiceAccount != "":
		return "serviceaccount:" + c.ServiceAccount
	case c.Kind == KindBearer:
		return KindBearer
	default:
		return fmt.Sprintf("%s:%s (%s)", c.Kind, c.Subject, c.Issuer)
	}
}

type callerKey struct{}

// WithCaller returns ctx carrying the caller.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller ctx carries.
func CallerFrom(ctx context.Context) (*Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(*Caller)
	return c, ok
}
