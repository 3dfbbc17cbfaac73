package render

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

var clusterIssuer = adapterconfig.Issuer{URL: "https://kubernetes.default.svc", JWKS: json.RawMessage(`{"keys":[{"kid":"k"}]}`)}

func authServer(auth *cantusv1alpha1.AuthSpec, authz *cantusv1alpha1.AuthorizationSpec) *cantusv1alpha1.SkillServer {
	return &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "library", Namespace: "books"},
		Spec:       cantusv1alpha1.SkillServerSpec{Auth: auth, Authorization: authz},
	}
}

func TestRenderAuthWithoutAuthRendersNothing(t *testing.T) {
	if got := renderAuth(authServer(nil, nil), clusterIssuer, ""); !reflect.DeepEqual(got, renderedAuth{}) {
		t.Fatalf("got %+v, want nothing", got)
	}
}

// Every kind at once: the token Secret and the OIDC CA are files the runtimes provide,
// the service-account issuer carries the cluster's keys and the server's own audience.
func TestRenderAuthRendersEveryKind(t *testing.T) {
	ss := authServer(&cantusv1alpha1.AuthSpec{
		BearerTokenSecretRef: &cantusv1alpha1.SecretKeyRef{Name: "tokens"},
		ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{},
		OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: "https://login.example.com", Audiences: []string{"cantus"},
			CABundle: &cantusv1alpha1.OIDCCABundle{ConfigMapRef: cantusv1alpha1.ConfigMapKeyRef{Name: "issuer-ca"}}},
	}, &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
		{Tools: []string{"search_*"}, ServiceAccounts: []string{"agents/*"}, When: "claims.sub != ''"},
	}})

	got := renderAuth(ss, clusterIssuer, "")

	want := renderedAuth{
		BearerTokenFile: BearerTokenFile,
		Config: &adapterconfig.AuthConfig{
			Issuers: []adapterconfig.Issuer{
				{Kind: adapterconfig.IssuerServiceAccount, URL: clusterIssuer.URL, Audiences: []string{"library.books.skillserver.cantus.dev"}, JWKS: clusterIssuer.JWKS},
				{Kind: adapterconfig.IssuerOIDC, URL: "https://login.example.com", Audiences: []string{"cantus"}, CAFile: oidcCAFile, GroupsPrefix: "oidc:"},
			},
			Authorization: &adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{
				{Tools: []string{"search_*"}, ServiceAccounts: []string{"agents/*"}, When: "claims.sub != ''"},
			}},
		},
		Files: []File{
			{Path: BearerTokenFile, Secret: "tokens", Key: "token"},
			{Path: oidcCAFile, ConfigMap: "issuer-ca", Key: "ca.crt"},
		},
		Groups:    &GroupsReport{Prefix: "oidc:"},
		Audiences: &AudiencesReport{},
	}
	if !reflect.DeepEqual(got, want) {
		gotJSON, _ := json.MarshalIndent(got, "", " ")
		wantJSON, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("rendered\n%s\nwant\n%s", gotJSON, wantJSON)
	}
}

func TestRenderAuthKeepsTheAudiencesGiven(t *testing.T) {
	ss := authServer(&cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{Audiences: []string{"a", "b"}}}, nil)
	got := renderAuth(ss, clusterIssuer, "")
	if got.BearerTokenFile != "" || len(got.Files) != 0 {
		t.Errorf("a server without a token Secret got a token file: %+v", got)
	}
	if aud := got.Config.Issuers[0].Audiences; !reflect.DeepEqual(aud, []string{"a", "b"}) {
		t.Errorf("audiences %v, want [a b]", aud)
	}
}

// Rotated issuer keys and changed rules reach the adapter by reload, not by rolling pods.
func TestRolloutHashIgnoresAuth(t *testing.T) {
	cfg := &adapterconfig.Config{Server: adapterconfig.ServerInfo{Name: "s"}, Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{clusterIssuer}}}
	before, _ := rolloutHashOf(cfg)
	cfg.Auth.Issuers[0].JWKS = json.RawMessage(`{"keys":[{"kid":"rotated"}]}`)
	cfg.Auth.Authorization = &adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{{Tools: []string{"*"}}}}
	after, _ := rolloutHashOf(cfg)
	if before != after {
		t.Fatal("a change of auth would roll the pods")
	}
	full1, _ := hashOf(cfg)
	cfg.Auth.Issuers[0].JWKS = json.RawMessage(`{"keys":[]}`)
	full2, _ := hashOf(cfg)
	if full1 == full2 {
		t.Fatal("the config hash misses a change of issuer keys, so the new keys would never be written")
	}
}

// OIDC groups are prefixed "oidc:" by default; rules naming groups written before the
// prefix are reported, and only where an Audit-mode policy covers the namespace are the
// groups left unprefixed for now (issue 23 #5).
func TestOIDCGroupsPrefixAndItsAuditPath(t *testing.T) {
	oidc := func(prefix *string) *cantusv1alpha1.AuthSpec {
		return &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: "https://login.example.com", Audiences: []string{"cantus"}, GroupsPrefix: prefix}}
	}
	rules := &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
		{Tools: []string{"*"}, Groups: []string{"admins", "system:serviceaccounts:prod", "oidc:ops", "admins"}},
	}}
	empty := ""
	tests := []struct {
		name  string
		auth  *cantusv1alpha1.AuthSpec
		audit string
		want  GroupsReport
	}{
		{"enforce: prefixed, the old groups reported", oidc(nil), "", GroupsReport{Prefix: "oidc:", Unprefixed: []string{"admins"}}},
		{"audit: unprefixed for now, reported with the policy", oidc(nil), "relaxed", GroupsReport{Prefix: "", Unprefixed: []string{"admins"}, AuditPolicy: "relaxed"}},
		{"a prefix set in the spec wins", oidc(&empty), "", GroupsReport{Prefix: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderAuth(authServer(tt.auth, rules), clusterIssuer, tt.audit)
			if !reflect.DeepEqual(*got.Groups, tt.want) {
				t.Errorf("groups report %+v, want %+v", *got.Groups, tt.want)
			}
			if p := got.Config.Issuers[0].GroupsPrefix; p != tt.want.Prefix {
				t.Errorf("issuer groups prefix %q, want %q", p, tt.want.Prefix)
			}
		})
	}
	// No unprefixed group: the prefix holds also in Audit mode.
	clean := &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{{Tools: []string{"*"}, Groups: []string{"oidc:ops"}}}}
	if got := renderAuth(authServer(oidc(nil), clean), clusterIssuer, "relaxed"); got.Groups.Prefix != "oidc:" {
		t.Errorf("audit mode without old groups dropped the prefix: %+v", got.Groups)
	}
}

// oidcIssuerOf is the OIDC issuer of a rendered config.
func oidcIssuerOf(t *testing.T, got Result) adapterconfig.Issuer {
	t.Helper()
	if got.Config == nil || got.Config.Auth == nil {
		t.Fatalf("no auth rendered: %+v", got.Report.Invalid)
	}
	for _, i := range got.Config.Auth.Issuers {
		if i.Kind == adapterconfig.IssuerOIDC {
			return i
		}
	}
	t.Fatalf("no OIDC issuer in %+v", got.Config.Auth.Issuers)
	return adapterconfig.Issuer{}
}

// spec.auth.oidc.audiences may not name the API server's audiences or another server's
// default audience either (review R10): under Enforce they are left out and reported,
// under an Audit-only policy they are accepted for now and reported with the policy.
func TestOIDCAudiencesThatAreReservedOrAnotherServersAreRefused(t *testing.T) {
	audiences := []string{"https://kubernetes.default.svc/", "cantus.dev/catalog", "payroll.books.skillserver.cantus.dev", "library.books.skillserver.cantus.dev", "cantus"}
	ss := authServer(&cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: "https://login.example.com", Audiences: audiences}}, nil)
	in := Inputs{Cluster: adapterconfig.Issuer{URL: "https://oidc.eks.example.com/id/1"}, ReservedAudiences: []string{"https://kubernetes.default.svc", "cantus.dev/catalog"}}

	got, err := SkillServer(ss, in)
	if err != nil || got.Report.Invalid != nil {
		t.Fatalf("render: %v, %v", err, got.Report.Invalid)
	}
	if aud := oidcIssuerOf(t, got).Audiences; !reflect.DeepEqual(aud, []string{"library.books.skillserver.cantus.dev", "cantus"}) {
		t.Errorf("enforce: the OIDC issuer accepts %v, want only the server's own and cantus", aud)
	}
	wantForbidden := audiences[:3]
	if got.Report.Audiences == nil || !reflect.DeepEqual(got.Report.Audiences.OIDCForbidden, wantForbidden) || got.Report.Audiences.AuditPolicy != "" {
		t.Errorf("enforce: report %+v, want OIDCForbidden %v", got.Report.Audiences, wantForbidden)
	}

	in.AuditPolicy = "relaxed"
	got, _ = SkillServer(ss, in)
	if aud := oidcIssuerOf(t, got).Audiences; !reflect.DeepEqual(aud, audiences) {
		t.Errorf("audit: the OIDC issuer accepts %v, want all of %v for now", aud, audiences)
	}
	if r := got.Report.Audiences; r == nil || !reflect.DeepEqual(r.OIDCForbidden, wantForbidden) || r.AuditPolicy != "relaxed" {
		t.Errorf("audit: report %+v", r)
	}

	// Nothing left: the server's own audience, never an issuer with none (which would not
	// render) nor a server without the issuer (which might serve unauthenticated).
	ss.Spec.Auth.OIDC.Audiences = audiences[:1]
	in.AuditPolicy = ""
	got, _ = SkillServer(ss, in)
	if aud := oidcIssuerOf(t, got).Audiences; !reflect.DeepEqual(aud, []string{"library.books.skillserver.cantus.dev"}) {
		t.Errorf("all refused: the OIDC issuer accepts %v", aud)
	}
}

// An OIDC issuer that is the cluster's own service-account issuer would accept the
// cluster's tokens without the service-account path's checks (audience, deleted pod or
// service account): it is refused, under Audit as under Enforce (review R10).
func TestOIDCIssuerThatIsTheClusterIssuerIsRefused(t *testing.T) {
	for _, url := range []string{"https://oidc.eks.example.com/id/1", "https://OIDC.eks.example.com/id/1/", "https://kubernetes.default.svc.cluster.local"} {
		for _, audit := range []string{"", "relaxed"} {
			ss := authServer(&cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: url, Audiences: []string{"cantus"}}}, nil)
			in := Inputs{Cluster: adapterconfig.Issuer{URL: "https://oidc.eks.example.com/id/1"}, AuditPolicy: audit,
				ReservedAudiences: []string{"https://kubernetes.default.svc", "https://kubernetes.default.svc.cluster.local"}}
			got, err := SkillServer(ss, in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Report.Invalid == nil || !strings.Contains(got.Report.Invalid.Error(), "spec.auth.serviceAccountTokens") {
				t.Errorf("issuer %s (audit %q): invalid = %v, want a refusal pointing at spec.auth.serviceAccountTokens", url, audit, got.Report.Invalid)
			}
		}
	}
}
