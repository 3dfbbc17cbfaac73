package render

import (
	"fmt"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Where the adapter reads what authentication needs, beside the imports' files so that
// both runtimes provide them the same way (projected, or written on the host).
const (
	authFilesDir = ImportFilesDir + "/_auth"
	// BearerTokenFile holds the static bearer tokens, one per line.
	BearerTokenFile = authFilesDir + "/tokens"
	oidcCAFile      = authFilesDir + "/oidc-ca.crt"
)

// DefaultServiceAccountAudience is the audience a service-account token must be issued
// for when spec.auth.serviceAccountTokens names none: unique to the server, so that a
// token minted for it is not accepted by another server.
func DefaultServiceAccountAudience(ss *cantusv1alpha1.SkillServer) string {
	return fmt.Sprintf("%s.%s.skillserver.cantus.dev", ss.Name, ss.Namespace)
}

// ServesServiceAccountTokens says whether the server accepts the cluster's
// service-account tokens, and so needs the cluster issuer's keys.
func ServesServiceAccountTokens(ss *cantusv1alpha1.SkillServer) bool {
	return ss.Spec.Auth != nil && ss.Spec.Auth.ServiceAccountTokens != nil
}

// renderedAuth is what a SkillServer's auth and authorization add to its adapter config.
type renderedAuth struct {
	BearerTokenFile string
	Config          *adapterconfig.AuthConfig
	// Files are the bearer tokens and the OIDC CA bundle.
	Files []File
}

// renderAuth renders spec.auth and spec.authorization. cluster is this cluster's
// service-account issuer with its keys (URL and JWKS) and the bindings it revoked; it is
// read only when the server accepts service-account tokens.
func renderAuth(ss *cantusv1alpha1.SkillServer, cluster adapterconfig.Issuer) renderedAuth {
	spec := ss.Spec.Auth
	if spec == nil {
		return renderedAuth{}
	}
	var out renderedAuth
	if ref := spec.BearerTokenSecretRef; ref != nil {
		out.BearerTokenFile = BearerTokenFile
		out.Files = append(out.Files, File{Path: BearerTokenFile, Secret: ref.Name, Key: ref.KeyOrDefault()})
	}
	var issuers []adapterconfig.Issuer
	if sa := spec.ServiceAccountTokens; sa != nil {
		issuers = append(issuers, serviceAccountIssuer(ss, sa, cluster))
	}
	if oidc := spec.OIDC; oidc != nil {
		issuer, file := oidcIssuer(oidc)
		issuers = append(issuers, issuer)
		out.Files = append(out.Files, file...)
	}
	rules := authorization(ss.Spec.Authorization)
	if len(issuers) > 0 || rules != nil {
		out.Config = &adapterconfig.AuthConfig{Issuers: issuers, Authorization: rules}
	}
	return out
}

func serviceAccountIssuer(ss *cantusv1alpha1.SkillServer, sa *cantusv1alpha1.ServiceAccountTokenAuth, cluster adapterconfig.Issuer) adapterconfig.Issuer {
	audiences := sa.Audiences
	if len(audiences) == 0 {
		audiences = []string{DefaultServiceAccountAudience(ss)}
	}
	return adapterconfig.Issuer{
		Kind:             adapterconfig.IssuerServiceAccount,
		URL:              cluster.URL,
		Audiences:        audiences,
		JWKS:             cluster.JWKS,
		RevokedUIDs:      cluster.RevokedUIDs,
		MaxTokenLifetime: cluster.MaxTokenLifetime,
		// Kept apart from the pods so that a restarted operator recalls each kind.
		RevokedServiceAccountUIDs: cluster.RevokedServiceAccountUIDs,
		RefuseIssuedBefore:        cluster.RefuseIssuedBefore,
	}
}

func oidcIssuer(oidc *cantusv1alpha1.OIDCAuth) (adapterconfig.Issuer, []File) {
	issuer := adapterconfig.Issuer{Kind: adapterconfig.IssuerOIDC, URL: oidc.IssuerURL, Audiences: oidc.Audiences}
	if oidc.CABundle == nil {
		return issuer, nil
	}
	ref := oidc.CABundle.ConfigMapRef
	issuer.CAFile = oidcCAFile
	return issuer, []File{{Path: oidcCAFile, ConfigMap: ref.Name, Key: ref.KeyOrDefault()}}
}

// authorization is the adapter's form of a SkillServer's rules; the catalog evaluates the
// same form to show each caller only what it may call.
func authorization(in *cantusv1alpha1.AuthorizationSpec) *adapterconfig.Authorization {
	if in == nil {
		return nil
	}
	out := &adapterconfig.Authorization{Rules: make([]adapterconfig.AuthorizationRule, 0, len(in.Rules))}
	for _, r := range in.Rules {
		out.Rules = append(out.Rules, adapterconfig.AuthorizationRule{
			Tools: r.Tools, Prompts: r.Prompts, Resources: r.Resources, Skills: r.Skills,
			ServiceAccounts: r.ServiceAccounts, Groups: r.Groups, When: r.When,
		})
	}
	return out
}
