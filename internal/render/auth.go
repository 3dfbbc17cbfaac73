package render

import (
	"fmt"
	"slices"
	"strings"

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
	// Groups says how OIDC groups are matched; nil without spec.auth.oidc.
	Groups *GroupsReport
	// Audiences says which service-account and OIDC audiences were refused; nil without
	// spec.auth.serviceAccountTokens and spec.auth.oidc.
	Audiences *AudiencesReport
}

// AudiencesReport names the audiences of spec.auth.serviceAccountTokens and
// spec.auth.oidc that a tenant's server must not accept: a token for them works
// elsewhere (the API server, the catalog, another server), so an agent sending the
// wrong one would hand it to this server's owner.
type AudiencesReport struct {
	// Forbidden are the service-account audiences refused, in spec order.
	Forbidden []string
	// OIDCForbidden are the OIDC audiences refused, in spec order.
	OIDCForbidden []string
	// AuditPolicy, when set, names the Audit-mode ToolSourcePolicy that lets them be
	// accepted for now; otherwise they were left out of the rendered config.
	AuditPolicy string
}

// Refused says whether any audience was refused.
func (r *AudiencesReport) Refused() bool {
	return r != nil && (len(r.Forbidden) > 0 || len(r.OIDCForbidden) > 0)
}

// skillServerAudienceSuffix ends every server's default audience.
const skillServerAudienceSuffix = ".skillserver.cantus.dev"

// forbiddenAudiences are the audiences that are reserved (the API server's) or another
// server's default audience.
func forbiddenAudiences(ss *cantusv1alpha1.SkillServer, audiences, reserved []string) []string {
	own := DefaultServiceAccountAudience(ss)
	var out []string
	for _, a := range audiences {
		norm := normalAudience(a)
		otherServer := strings.HasSuffix(norm, skillServerAudienceSuffix) && norm != own
		isReserved := slices.ContainsFunc(reserved, func(r string) bool { return normalAudience(r) == norm })
		if otherServer || isReserved {
			out = append(out, a)
		}
	}
	return out
}

// normalAudience folds the spellings of one audience that some verifier may treat alike:
// case, surrounding space, a trailing slash or dot.
func normalAudience(a string) string {
	return strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(strings.TrimSpace(a)), "/"), ".")
}

// clusterIssuerAsOIDC refuses an OIDC issuer that is the cluster's service-account
// issuer (or one of the API server's own URLs): its tokens are the cluster's
// service-account tokens, and only spec.auth.serviceAccountTokens checks what they are
// bound to (a deleted pod or service account) and keeps their audiences to this server.
// Refused under Audit too: the adapter refuses such tokens from an OIDC issuer anyway.
func clusterIssuerAsOIDC(ss *cantusv1alpha1.SkillServer, cluster adapterconfig.Issuer, reserved []string) error {
	if ss.Spec.Auth == nil || ss.Spec.Auth.OIDC == nil {
		return nil
	}
	oidc := ss.Spec.Auth.OIDC
	issuer := normalAudience(oidc.IssuerURL)
	isCluster := cluster.URL != "" && normalAudience(cluster.URL) == issuer
	if !isCluster && !slices.ContainsFunc(reserved, func(r string) bool { return normalAudience(r) == issuer }) {
		return nil
	}
	return fmt.Errorf("spec.auth.oidc.issuerURL %q is this cluster's service-account issuer (or the API server's URL): "+
		"its tokens are service-account tokens, which are accepted only through spec.auth.serviceAccountTokens, "+
		"where their audience is this server's own and tokens of deleted pods and service accounts are refused; "+
		"remove spec.auth.oidc and set spec.auth.serviceAccountTokens (agents then ask for the audience %s)",
		oidc.IssuerURL, DefaultServiceAccountAudience(ss))
}

// GroupsReport says how a server matches OIDC groups against its rules.
type GroupsReport struct {
	// Prefix is put before every OIDC group.
	Prefix string
	// Unprefixed are the rule groups that lack DefaultOIDCGroupsPrefix and are not
	// Kubernetes groups (system:…): meant for OIDC tokens, written before the prefix.
	Unprefixed []string
	// AuditPolicy, when set, names the Audit-mode ToolSourcePolicy that keeps OIDC groups
	// unprefixed (Prefix "") because Unprefixed rules would stop matching.
	AuditPolicy string
}

// renderAuth renders spec.auth and spec.authorization. cluster is this cluster's
// service-account issuer with its keys (URL and JWKS) and the bindings it revoked; its
// keys are read only when the server accepts service-account tokens, its URL also to
// refuse it as an OIDC issuer. auditPolicy names the
// Audit-mode ToolSourcePolicy when only such policies cover the namespace.
func renderAuth(ss *cantusv1alpha1.SkillServer, cluster adapterconfig.Issuer, auditPolicy string, reserved ...string) renderedAuth {
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
	if spec.ServiceAccountTokens != nil || spec.OIDC != nil {
		out.Audiences = &AudiencesReport{}
	}
	if sa := spec.ServiceAccountTokens; sa != nil {
		issuer := serviceAccountIssuer(ss, sa, cluster)
		out.Audiences.Forbidden = forbiddenAudiences(ss, issuer.Audiences, reserved)
		issuer.Audiences = out.Audiences.keep(ss, issuer.Audiences, out.Audiences.Forbidden, auditPolicy)
		issuers = append(issuers, issuer)
	}
	if oidc := spec.OIDC; oidc != nil {
		out.Groups = oidcGroupsOf(oidc, ss.Spec.Authorization, auditPolicy)
		issuer, file := oidcIssuer(oidc, out.Groups.Prefix)
		out.Audiences.OIDCForbidden = forbiddenAudiences(ss, issuer.Audiences, reserved)
		issuer.Audiences = out.Audiences.keep(ss, issuer.Audiences, out.Audiences.OIDCForbidden, auditPolicy)
		issuers = append(issuers, issuer)
		out.Files = append(out.Files, file...)
	}
	rules := authorization(ss.Spec.Authorization)
	if len(issuers) > 0 || rules != nil {
		out.Config = &adapterconfig.AuthConfig{Issuers: issuers, Authorization: rules}
	}
	return out
}

// keep says which audiences an issuer accepts: all of them for now where an Audit-mode
// policy lets forbidden ones through (the report names it), the allowed ones otherwise.
func (r *AudiencesReport) keep(ss *cantusv1alpha1.SkillServer, audiences, forbidden []string, auditPolicy string) []string {
	switch {
	case len(forbidden) == 0:
		return audiences
	case auditPolicy != "":
		r.AuditPolicy = auditPolicy
		return audiences
	}
	return allowedAudiences(ss, audiences, forbidden)
}

// allowedAudiences are audiences without the forbidden ones; the server's own default
// when none is left, so that a refused spec never widens what the server accepts.
func allowedAudiences(ss *cantusv1alpha1.SkillServer, audiences, forbidden []string) []string {
	kept := slices.DeleteFunc(slices.Clone(audiences), func(a string) bool { return slices.Contains(forbidden, a) })
	if len(kept) == 0 {
		kept = []string{DefaultServiceAccountAudience(ss)}
	}
	return kept
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
		// By namespace: a tenant's churn refuses only its own namespace's tokens.
		RefuseIssuedBeforeByNamespace: cluster.RefuseIssuedBeforeByNamespace,
	}
}

// oidcGroupsOf decides the OIDC groups prefix: the one the spec sets, else the default;
// but where only an Audit-mode policy covers the namespace and rules still name groups
// without the default prefix, none yet, so that a server working before the prefix
// existed keeps working while its owner moves the rules (the status warns).
func oidcGroupsOf(oidc *cantusv1alpha1.OIDCAuth, authz *cantusv1alpha1.AuthorizationSpec, auditPolicy string) *GroupsReport {
	report := &GroupsReport{Prefix: cantusv1alpha1.DefaultOIDCGroupsPrefix}
	if oidc.GroupsPrefix != nil {
		report.Prefix = *oidc.GroupsPrefix
		return report
	}
	report.Unprefixed = unprefixedGroups(authz, report.Prefix)
	if len(report.Unprefixed) > 0 && auditPolicy != "" {
		report.Prefix, report.AuditPolicy = "", auditPolicy
	}
	return report
}

// unprefixedGroups are the rules' groups that are neither Kubernetes groups nor
// prefixed, each once, in rule order.
func unprefixedGroups(authz *cantusv1alpha1.AuthorizationSpec, prefix string) []string {
	if authz == nil {
		return nil
	}
	var out []string
	for _, r := range authz.Rules {
		for _, g := range r.Groups {
			if !strings.HasPrefix(g, "system:") && !strings.HasPrefix(g, prefix) && !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

func oidcIssuer(oidc *cantusv1alpha1.OIDCAuth, groupsPrefix string) (adapterconfig.Issuer, []File) {
	issuer := adapterconfig.Issuer{Kind: adapterconfig.IssuerOIDC, URL: oidc.IssuerURL, Audiences: oidc.Audiences, GroupsPrefix: groupsPrefix}
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
