package render

import (
	"reflect"
	"testing"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

func connectImport() *cantusv1alpha1.RemoteToolImport {
	imp := readyImportOf("tracker", "issues")
	imp.Spec.URL = "https://tracker.example/mcp"
	imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{}}
	imp.Status.CallerCredentials = &cantusv1alpha1.CallerCredentialsStatus{
		Mode: cantusv1alpha1.CallerCredentialsModeConnect, AuthorizationServer: "https://login.tracker.example", AuthorizationServerChecked: true,
	}
	return imp
}

func connectGateway() *cantusv1alpha1.SkillServer {
	ss := gatewayWithServiceAccounts("tracker")
	ss.Spec.Pod = &cantusv1alpha1.PodOverrides{ServiceAccountName: "tracker-gateway"}
	return ss
}

// An import in connect mode gives the gateway the operator's token endpoint, the CA it
// is served with (from the caller-keys Secret, mounted whole) and the gateway's own
// token for the connect audience, projected: files, never values.
func TestCallerCredentials_RenderConnectGivesTheOperatorsEndpoint(t *testing.T) {
	out := reexport(connectGateway(), map[string]*cantusv1alpha1.RemoteToolImport{"tracker": connectImport()}, nil)
	cfg := adapterconfig.Config{Tools: out.tools}
	setConnectEndpoint(&cfg, "https://cantus-catalog.cantus-system.svc"+adapterconfig.ConnectTokenPath)
	var got *adapterconfig.CallerCredentials
	for _, tool := range cfg.Tools {
		if tool.Name == "issues" {
			got = tool.Remote.CallerCredentials
		}
	}
	want := &adapterconfig.CallerCredentials{Header: "Authorization", ValuePrefix: "Bearer ", Connect: &adapterconfig.Connect{
		Endpoint: "https://cantus-catalog.cantus-system.svc" + adapterconfig.ConnectTokenPath,
		CAFile:   CallerKeysDir + "/" + ConnectCAKey, TokenFile: ImportFilesDir + "/tracker/connect-token",
		AuthorizationServer: "https://login.tracker.example",
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("caller credentials %+v (connect %+v), want %+v", got, got.Connect, want.Connect)
	}
	wantFiles := []File{
		{Path: ImportFilesDir + "/tracker/connect-token", ServiceAccountTokenAudience: adapterconfig.ConnectAudience},
		{Path: CallerKeysDir, Secret: "gw-caller-keys", AllKeys: true},
	}
	if !reflect.DeepEqual(out.files, wantFiles) {
		t.Errorf("files %+v, want %+v", out.files, wantFiles)
	}
	if !reflect.DeepEqual(out.report.Connect, []string{"tracker"}) {
		t.Errorf("connect imports %v", out.report.Connect)
	}
}

// The operator hands callers' tokens to the gateway's service account, so a gateway on
// the namespace's default one is refused; and an import whose authorization server was
// not checked waits.
func TestCallerCredentials_RenderRefusesConnectOnTheDefaultServiceAccount(t *testing.T) {
	unchecked := connectImport()
	unchecked.Status.CallerCredentials.AuthorizationServerChecked = false
	explicitDefault := connectGateway()
	explicitDefault.Spec.Pod.ServiceAccountName = "default"
	for name, c := range map[string]struct {
		ss     *cantusv1alpha1.SkillServer
		imp    *cantusv1alpha1.RemoteToolImport
		reason string
	}{
		"no service account": {gatewayWithServiceAccounts("tracker"), connectImport(), cantusv1alpha1.ReasonGatewayServiceAccountRequired},
		"the default one":    {explicitDefault, connectImport(), cantusv1alpha1.ReasonGatewayServiceAccountRequired},
		"server not checked": {connectGateway(), unchecked, cantusv1alpha1.ReasonImportsNotReady},
	} {
		out := reexport(c.ss, map[string]*cantusv1alpha1.RemoteToolImport{"tracker": c.imp}, nil)
		if len(out.tools) != 0 || len(out.files) != 0 {
			t.Errorf("%s: served %d tools and %d files", name, len(out.tools), len(out.files))
		}
		if len(out.report.CallerCredentialsRefused) != 1 || out.report.CallerCredentialsRefused[0].Reason != c.reason {
			t.Errorf("%s: refused %+v, want reason %s", name, out.report.CallerCredentialsRefused, c.reason)
		}
	}
}
