package connect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// An OIDC caller ("oidc:<issuer>#<subject>") may connect only where the import's
// authorization server is its own identity provider: the user who signs in there must
// be the caller's subject, which the ID token of that sign-in proves. At another
// identity provider the operator cannot tell who signs in, so such callers are refused.

// errOtherSubject: the ID token is valid but names another subject than the caller's.
var errOtherSubject = errors.New("signed in as a different user than the agent's")

// oidcCaller splits an OIDC caller's identity; the issuer is an https URL, which holds
// no "#", so the first one ends it.
func oidcCaller(caller string) (issuer, subject string, ok bool) {
	return cutPair(caller, "oidc:", "#")
}

// sameIssuer compares issuer identifiers, a trailing slash aside.
func sameIssuer(a, b string) bool {
	return a != "" && strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// checkOIDCCaller says why an OIDC caller cannot connect for imp, or "" when it can:
// the import's authorization server is the caller's issuer.
func checkOIDCCaller(imp *cantusv1alpha1.RemoteToolImport, issuer string) string {
	as := ""
	if s := imp.Status.CallerCredentials; s != nil {
		as = s.AuthorizationServer
	}
	if sameIssuer(as, issuer) {
		return ""
	}
	if as == "" {
		return "the import's authorization server is not known yet, so the operator cannot check that it is the OIDC caller's identity provider " + issuer
	}
	return fmt.Sprintf("an OIDC caller connects only where the import's authorization server is its own identity provider: %s is not %s, and the operator cannot verify who signs in at another identity provider", as, issuer)
}

// idTokenClockSkew is how far ahead of the operator's the identity provider's clock may be.
const idTokenClockSkew = 30 * time.Second

// idTokenCheck is what an ID token returned to the callback must say.
type idTokenCheck struct {
	issuer, clientID, nonce, subject string
	jwksURL                          string
	http                             *http.Client
}

// verifyIDToken checks raw's signature against the authorization server's keys, its
// iss, aud (the client), exp, iat and nonce (zitadel/oidc's relying-party verifier),
// then that its subject is the caller's: errOtherSubject when it is not.
func verifyIDToken(ctx context.Context, raw string, c idTokenCheck) error {
	if raw == "" {
		return errors.New("the authorization server returned no ID token for the openid scope")
	}
	if c.jwksURL == "" {
		return errors.New("the authorization server's metadata has no jwks_uri to check ID tokens with")
	}
	v := rp.NewIDTokenVerifier(c.issuer, c.clientID, rp.NewRemoteKeySet(c.http, c.jwksURL),
		rp.WithNonce(func(context.Context) string { return c.nonce }),
		// The identity provider's clock may run a little ahead of the operator's: an
		// ID token just issued would otherwise be "issued in the future". (The
		// verifier also asks that much more life of exp, which a fresh token has.)
		rp.WithIssuedAtOffset(idTokenClockSkew))
	claims, err := rp.VerifyIDToken[*oidc.IDTokenClaims](ctx, raw, v)
	if err != nil {
		return fmt.Errorf("the ID token: %w", err)
	}
	if claims.Subject != c.subject {
		return errOtherSubject
	}
	return nil
}

// idTokenFailure names what failed in an ID token, for logs and metrics: never the
// token, nor the nonce an error message of the verifier quotes.
func idTokenFailure(err error) string {
	for _, k := range []struct {
		err  error
		name string
	}{
		{errOtherSubject, "other_subject"}, {oidc.ErrNonceInvalid, "nonce"}, {oidc.ErrAudience, "audience"},
		{oidc.ErrIssuerInvalid, "issuer"}, {oidc.ErrExpired, "expired"}, {oidc.ErrSignatureInvalid, "signature"},
		{oidc.ErrAzpMissing, "azp"}, {oidc.ErrAzpInvalid, "azp"}, {oidc.ErrIatInFuture, "iat"}, {oidc.ErrIatMissing, "iat"},
	} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "invalid"
}
