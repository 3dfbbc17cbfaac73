package render

import (
	"fmt"
	"path"
	"slices"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// CallerKeysDir is where a gateway reads the per-caller keys of the imports it
// re-exports: every key of its caller-keys Secret (CallerKeysSecretName), one file each,
// named adapterconfig.CallerKeyFileName. The kubernetes runtime mounts the Secret as a
// volume of its own (not a projection of chosen keys), so that the kubelet brings new
// and removed keys without a change of the pod template; the local runtime writes the
// files.
const CallerKeysDir = "/var/run/cantus/caller-keys"

// CallerKeysSecretName is the Secret, in the gateway's namespace and controlled by it,
// in which the operator gathers the per-caller keys the gateway's imports use.
func CallerKeysSecretName(server string) string { return server + "-caller-keys" }

// CallerSecretLabel is the label selector, "<label>=<import>", that marks the per-caller
// Secrets of an import.
func CallerSecretLabel(importName string) string {
	return cantusv1alpha1.LabelCallerCredentialsFor + "=" + importName
}

// CallerCredentialsRefusal is an import with spec.callerCredentials that a gateway does
// not serve because it could not act for its callers there.
type CallerCredentialsRefusal struct {
	Import  string
	Reason  string
	Message string
}

// callerCredentials is the adapter's part of an import's spec.callerCredentials, and the
// files it reads: the client credential and the gateway's own actor token.
func callerCredentials(imp *cantusv1alpha1.RemoteToolImport, dir string) (*adapterconfig.CallerCredentials, []File) {
	spec := imp.Spec.CallerCredentials
	if spec == nil {
		return nil, nil
	}
	out := &adapterconfig.CallerCredentials{Header: spec.HeaderOrDefault()}
	if spec.Connect != nil {
		return connectCredentials(imp, out, dir)
	}
	if p := spec.PerCallerSecret; p != nil {
		out.ValuePrefix = p.ValuePrefixOrDefault()
		out.PerCallerSecret = &adapterconfig.PerCallerSecret{
			Dir: CallerKeysDir, Namespace: imp.Namespace, Label: CallerSecretLabel(imp.Name), Key: p.KeyOrDefault(),
		}
		return out, nil
	}
	te := spec.TokenExchange
	out.ValuePrefix = cantusv1alpha1.DefaultCallerCredentialValuePrefix
	x := &adapterconfig.TokenExchange{
		TokenEndpoint: te.TokenEndpoint,
		Resource:      imp.Spec.URL,
		Audience:      te.Audience,
		Scopes:        slices.Clone(te.Scopes),
		ClientID:      te.ClientID,
		MaxCacheTTL:   adapterconfig.Duration{Duration: te.MaxCacheTTLOrDefault()},
	}
	if s := imp.Status.CallerCredentials; s != nil {
		// Exchanges connect only where the operator's policy check connected.
		x.Addresses = slices.Clone(s.TokenEndpointAddresses)
	}
	var files []File
	if ref := te.ClientSecret; ref != nil {
		f := File{Path: path.Join(dir, "client-secret"), Secret: ref.Name, Key: ref.KeyOrDefault()}
		x.ClientSecretFile = f.Path
		files = append(files, f)
	}
	if ref := te.PrivateKey; ref != nil {
		f := File{Path: path.Join(dir, "client-private-key"), Secret: ref.Name, Key: ref.KeyOrDefault()}
		x.PrivateKeyFile = f.Path
		files = append(files, f)
	}
	if te.ActorTokenAudience != "" {
		f := File{Path: path.Join(dir, "actor-token"), ServiceAccountTokenAudience: te.ActorTokenAudience}
		x.ActorTokenFile = f.Path
		files = append(files, f)
	}
	out.TokenExchange = x
	return out, files
}

// refuseCallerCredentials says why the gateway cannot serve an import with
// spec.callerCredentials: its callers have no identity to act as, or the exchange would
// ask for a token the gateway itself accepts (the remote could replay it here: the
// caller's token passed through in all but name). "" when it can, or the import has none.
func refuseCallerCredentials(ss *cantusv1alpha1.SkillServer, imp *cantusv1alpha1.RemoteToolImport, reserved []string) (reason, message string) {
	spec := imp.Spec.CallerCredentials
	if spec == nil {
		return "", ""
	}
	auth := ss.Spec.Auth
	if auth == nil || (auth.ServiceAccountTokens == nil && auth.OIDC == nil) {
		return cantusv1alpha1.ReasonCallerIdentityRequired, fmt.Sprintf(
			"import %s sends each caller's own credential to its remote (spec.callerCredentials), so this gateway's callers need an identity: set spec.auth.serviceAccountTokens (agents call with their service-account tokens) or spec.auth.oidc; a static bearer token (spec.auth.bearerTokenSecretRef) names no caller",
			imp.Name)
	}
	if te := spec.TokenExchange; te != nil && te.Audience != "" {
		want := normalAudience(te.Audience)
		if slices.ContainsFunc(inboundAudiences(ss), func(a string) bool { return normalAudience(a) == want }) {
			return cantusv1alpha1.ReasonPassThroughAudience, fmt.Sprintf(
				"import %s exchanges callers' tokens for audience %q, which this gateway accepts itself (spec.auth): the remote would get a token it could use at this gateway, the caller's token passed through in all but name; set spec.callerCredentials.tokenExchange.audience to the remote's own audience",
				imp.Name, te.Audience)
		}
	}
	if te := spec.TokenExchange; te != nil && te.ActorTokenAudience != "" {
		if reason, message := refuseActorAudience(ss, imp.Name, te.ActorTokenAudience, reserved); reason != "" {
			return reason, message
		}
	}
	if spec.Connect != nil {
		if reason, message := refuseConnect(ss, imp); reason != "" {
			return reason, message
		}
	}
	if spec.TokenExchange != nil && (imp.Status.CallerCredentials == nil || !imp.Status.CallerCredentials.TokenEndpointChecked) {
		return cantusv1alpha1.ReasonImportsNotReady, fmt.Sprintf("import %s: its token endpoint has not been checked against the ToolSourcePolicies yet", imp.Name)
	}
	return "", ""
}

// refuseActorAudience refuses an actor token the gateway's pods would get for an
// audience that works elsewhere: the API server's, this gateway's own, or another
// server's. The token goes to the token endpoint, which must not be able to replay it
// there.
func refuseActorAudience(ss *cantusv1alpha1.SkillServer, importName, audience string, reserved []string) (reason, message string) {
	norm := normalAudience(audience)
	own := norm == normalAudience(DefaultServiceAccountAudience(ss)) ||
		slices.ContainsFunc(inboundAudiences(ss), func(a string) bool { return normalAudience(a) == norm })
	elsewhere := forbiddenAudiences(ss, []string{audience}, slices.Concat(reserved, apiServerAudiences))
	if !own && len(elsewhere) == 0 {
		return "", ""
	}
	return cantusv1alpha1.ReasonForbiddenActorAudience, fmt.Sprintf(
		"import %s asks for the gateway's own service-account token for audience %q as the actor token: a token for that audience works at the API server or at a SkillServer, and the token endpoint could replay it there; set spec.callerCredentials.tokenExchange.actorTokenAudience to the token endpoint's own audience",
		importName, audience)
}

// apiServerAudiences are the audiences API servers accept by default, refused for an
// actor token even when the operator was told of none.
var apiServerAudiences = []string{"https://kubernetes.default.svc", "https://kubernetes.default.svc.cluster.local", "kubernetes", "api"}

// inboundAudiences are the audiences the gateway accepts callers' tokens for.
func inboundAudiences(ss *cantusv1alpha1.SkillServer) []string {
	var out []string
	if sa := ss.Spec.Auth.ServiceAccountTokens; sa != nil {
		out = append(out, sa.Audiences...)
		if len(sa.Audiences) == 0 {
			out = append(out, DefaultServiceAccountAudience(ss))
		}
	}
	if oidc := ss.Spec.Auth.OIDC; oidc != nil {
		out = append(out, oidc.Audiences...)
	}
	return out
}
