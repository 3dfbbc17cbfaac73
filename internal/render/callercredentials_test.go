package render

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

func gatewayWithServiceAccounts(imports ...string) *cantusv1alpha1.SkillServer {
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	ss.Spec.Auth = &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}}
	for _, name := range imports {
		ss.Spec.Imports = append(ss.Spec.Imports, cantusv1alpha1.SkillImport{Name: name})
	}
	return ss
}

func exchangeImport() *cantusv1alpha1.RemoteToolImport {
	imp := readyImportOf("tickets", "create")
	imp.Spec.URL = "https://tickets.example/mcp"
	imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{TokenExchange: &cantusv1alpha1.TokenExchange{
		TokenEndpoint:      "https://sts.example/token",
		Audience:           "tickets",
		Scopes:             []string{"read", "write"},
		ClientID:           "gateway",
		ClientSecret:       &cantusv1alpha1.SecretKeyRef{Name: "sts-client", Key: "secret"},
		ActorTokenAudience: "sts.example",
	}}
	imp.Status.CallerCredentials = &cantusv1alpha1.CallerCredentialsStatus{
		Mode: cantusv1alpha1.CallerCredentialsModeTokenExchange, TokenEndpointChecked: true, TokenEndpointAddresses: []string{"192.0.2.7"},
	}
	return imp
}

// Each re-exported tool of an import with spec.callerCredentials carries the adapter's
// config for it, naming files, never values: the client secret projected from its
// Secret, the actor token from the pod's service account, the caller keys from the
// gateway's caller-keys Secret (mounted once, whole).
func TestCallerCredentials_RenderProducesTheAdapterConfig(t *testing.T) {
	keys := readyImportOf("notes", "write")
	keys.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Header: "X-Api-Key",
		PerCallerSecret: &cantusv1alpha1.PerCallerSecret{ValuePrefix: ptr.To("")}}
	ss := gatewayWithServiceAccounts("tickets", "notes")
	out := reexport(ss, map[string]*cantusv1alpha1.RemoteToolImport{"tickets": exchangeImport(), "notes": keys}, nil)
	if len(out.tools) != 2 || len(out.report.CallerCredentialsRefused) != 0 {
		t.Fatalf("tools %d, refused %+v, unresolved %v", len(out.tools), out.report.CallerCredentialsRefused, out.report.Unresolved)
	}
	want := map[string]*adapterconfig.CallerCredentials{
		"create": {Header: "Authorization", ValuePrefix: "Bearer ", TokenExchange: &adapterconfig.TokenExchange{
			TokenEndpoint: "https://sts.example/token", Addresses: []string{"192.0.2.7"}, Resource: "https://tickets.example/mcp",
			Audience: "tickets", Scopes: []string{"read", "write"}, ClientID: "gateway",
			ClientSecretFile: ImportFilesDir + "/tickets/client-secret", ActorTokenFile: ImportFilesDir + "/tickets/actor-token",
			MaxCacheTTL: adapterconfig.Duration{Duration: 15 * time.Minute},
		}},
		"write": {Header: "X-Api-Key", ValuePrefix: "", PerCallerSecret: &adapterconfig.PerCallerSecret{
			Dir: CallerKeysDir, Namespace: "books", Label: "cantus.dev/caller-credentials-for=notes", Key: "token",
		}},
	}
	for _, tool := range out.tools {
		if got := tool.Remote.CallerCredentials; !reflect.DeepEqual(got, want[tool.Name]) {
			t.Errorf("%s: caller credentials %+v (exchange %+v), want %+v", tool.Name, got, got.TokenExchange, want[tool.Name])
		}
	}
	wantFiles := []File{
		{Path: ImportFilesDir + "/tickets/client-secret", Secret: "sts-client", Key: "secret"},
		{Path: ImportFilesDir + "/tickets/actor-token", ServiceAccountTokenAudience: "sts.example"},
		{Path: CallerKeysDir, Secret: "gw-caller-keys", AllKeys: true},
	}
	if !reflect.DeepEqual(out.files, wantFiles) {
		t.Errorf("files %+v, want %+v", out.files, wantFiles)
	}
	if !reflect.DeepEqual(out.report.PerCallerSecret, []string{"notes"}) {
		t.Errorf("per-caller imports %v, want [notes]", out.report.PerCallerSecret)
	}
}

// A gateway whose callers have no identity, or whose exchange would ask for a token it
// accepts itself, does not serve the import, and says why.
func TestCallerCredentials_RenderRefusesWhatCannotActForCallers(t *testing.T) {
	bearer := gatewayWithServiceAccounts("tickets")
	bearer.Spec.Auth = &cantusv1alpha1.AuthSpec{BearerTokenSecretRef: &cantusv1alpha1.SecretKeyRef{Name: "tokens"}}
	own := exchangeImport()
	own.Spec.CallerCredentials.TokenExchange.Audience = "GW.books.skillserver.cantus.dev/"
	unchecked := exchangeImport()
	unchecked.Status.CallerCredentials = nil
	for name, c := range map[string]struct {
		ss     *cantusv1alpha1.SkillServer
		imp    *cantusv1alpha1.RemoteToolImport
		reason string
	}{
		"no identity":      {bearer, exchangeImport(), cantusv1alpha1.ReasonCallerIdentityRequired},
		"no auth":          {&cantusv1alpha1.SkillServer{ObjectMeta: bearer.ObjectMeta, Spec: cantusv1alpha1.SkillServerSpec{Imports: bearer.Spec.Imports}}, exchangeImport(), cantusv1alpha1.ReasonCallerIdentityRequired},
		"own audience":     {gatewayWithServiceAccounts("tickets"), own, cantusv1alpha1.ReasonPassThroughAudience},
		"endpoint unknown": {gatewayWithServiceAccounts("tickets"), unchecked, cantusv1alpha1.ReasonImportsNotReady},
	} {
		out := reexport(c.ss, map[string]*cantusv1alpha1.RemoteToolImport{"tickets": c.imp}, nil)
		if len(out.tools) != 0 || len(out.files) != 0 {
			t.Errorf("%s: served %d tools and %d files", name, len(out.tools), len(out.files))
		}
		if len(out.report.CallerCredentialsRefused) != 1 || out.report.CallerCredentialsRefused[0].Reason != c.reason || !out.report.CallerCredentials {
			t.Errorf("%s: refused %+v, want reason %s", name, out.report.CallerCredentialsRefused, c.reason)
		}
	}
}

// An actor token is never asked for an audience that works elsewhere: the API
// server's, the gateway's own, or another server's.
func TestCallerCredentials_RenderRefusesActorTokensForAudiencesThatWorkElsewhere(t *testing.T) {
	for _, audience := range []string{"https://kubernetes.default.svc", "https://api.cluster.example", "gw.books.skillserver.cantus.dev", "other.books.skillserver.cantus.dev"} {
		imp := exchangeImport()
		imp.Spec.CallerCredentials.TokenExchange.ActorTokenAudience = audience
		out := reexport(gatewayWithServiceAccounts("tickets"), map[string]*cantusv1alpha1.RemoteToolImport{"tickets": imp}, nil, "https://api.cluster.example")
		if len(out.tools) != 0 || len(out.report.CallerCredentialsRefused) != 1 || out.report.CallerCredentialsRefused[0].Reason != cantusv1alpha1.ReasonForbiddenActorAudience {
			t.Errorf("%s: served %d tools, refused %+v", audience, len(out.tools), out.report.CallerCredentialsRefused)
		}
	}
}
