package render

import (
	"fmt"
	"path"
	"slices"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// ConnectCAKey is the key of a gateway's caller-keys Secret that holds the CA bundle
// the operator's connect endpoint is served with (mounted at CallerKeysDir with the
// rest): the gateway trusts only it there.
const ConnectCAKey = "connect-ca.crt"

// connectTokenFile is the gateway's own token for the operator's connect endpoint,
// issued for adapterconfig.ConnectAudience.
const connectTokenFile = "connect-token"

// connectCredentials is the adapter's part of connect mode: the operator's endpoint
// (filled in by SkillServer from Inputs.ConnectEndpoint), its CA, and the gateway's
// token for it.
func connectCredentials(imp *cantusv1alpha1.RemoteToolImport, out *adapterconfig.CallerCredentials, dir string) (*adapterconfig.CallerCredentials, []File) {
	out.ValuePrefix = cantusv1alpha1.DefaultCallerCredentialValuePrefix
	f := File{Path: path.Join(dir, connectTokenFile), ServiceAccountTokenAudience: adapterconfig.ConnectAudience}
	out.Connect = &adapterconfig.Connect{TokenFile: f.Path, CAFile: path.Join(CallerKeysDir, ConnectCAKey)}
	if s := imp.Status.CallerCredentials; s != nil {
		out.Connect.AuthorizationServer = s.AuthorizationServer
	}
	return out, []File{f}
}

// refuseConnect refuses connect mode where the operator would hand callers' tokens to
// more than the gateway: it authorizes a gateway by its service account, so a gateway
// on the namespace's default account would share callers' tokens with every pod that
// runs as it. An import whose authorization server was not checked yet waits.
func refuseConnect(ss *cantusv1alpha1.SkillServer, imp *cantusv1alpha1.RemoteToolImport) (reason, message string) {
	if ss.Spec.Pod == nil || ss.Spec.Pod.ServiceAccountName == "" || ss.Spec.Pod.ServiceAccountName == "default" {
		return cantusv1alpha1.ReasonGatewayServiceAccountRequired, fmt.Sprintf(
			"import %s connects callers' own accounts (spec.callerCredentials.connect): the operator hands their tokens to the gateway's service account, so the gateway needs one of its own (spec.pod.serviceAccountName), not the namespace's default one that other pods share",
			imp.Name)
	}
	if s := imp.Status.CallerCredentials; s == nil || !s.AuthorizationServerChecked {
		return cantusv1alpha1.ReasonImportsNotReady, fmt.Sprintf("import %s: its authorization server has not been checked against the ToolSourcePolicies yet", imp.Name)
	}
	return "", ""
}

// connect mounts the caller-keys Secret, which carries the operator's CA, for an
// import in connect mode.
func (out *reexported) connect(ss *cantusv1alpha1.SkillServer, importName string) {
	if len(out.report.PerCallerSecret) == 0 && len(out.report.Connect) == 0 {
		out.files = append(out.files, File{Path: CallerKeysDir, Secret: CallerKeysSecretName(ss.Name), AllKeys: true})
	}
	if !slices.Contains(out.report.Connect, importName) {
		out.report.Connect = append(out.report.Connect, importName)
	}
}

// setConnectEndpoint points every remote in connect mode at the operator's endpoint.
func setConnectEndpoint(cfg *adapterconfig.Config, endpoint string) {
	set := func(r *adapterconfig.RemoteBackend) {
		if r != nil && r.CallerCredentials != nil && r.CallerCredentials.Connect != nil {
			r.CallerCredentials.Connect.Endpoint = endpoint
		}
	}
	for i := range cfg.Tools {
		set(cfg.Tools[i].Remote)
	}
	if c := cfg.Imported; c != nil {
		for _, items := range [][]adapterconfig.ImportedItem{c.Prompts, c.Resources, c.ResourceTemplates, c.Skills} {
			for i := range items {
				set(&items[i].Remote)
			}
		}
	}
}
