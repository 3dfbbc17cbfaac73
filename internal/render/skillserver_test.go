package render

import (
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/access"
)

// readyImport is a RemoteToolImport whose status serves tools.
func readyImportOf(name string, tools ...string) *cantusv1alpha1.RemoteToolImport {
	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "books", Generation: 1},
		Spec:       cantusv1alpha1.RemoteToolImportSpec{Transport: cantusv1alpha1.ImportTransportStreamableHTTP, URL: "http://remote.example/mcp"},
	}
	imp.Status.ObservedGeneration = 1
	for _, c := range []string{cantusv1alpha1.ConditionSourceAllowed, cantusv1alpha1.ConditionReady} {
		apimeta.SetStatusCondition(&imp.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "Test", ObservedGeneration: 1})
	}
	for _, t := range tools {
		imp.Status.Tools = append(imp.Status.Tools, cantusv1alpha1.DiscoveredTool{Name: t, InputSchema: &runtime.RawExtension{Raw: []byte(`{"type":"object"}`)}})
	}
	return imp
}

func countsSince(before Counts) Counts {
	now := CountsSoFar()
	return Counts{
		SpecValidations:    now.SpecValidations - before.SpecValidations,
		RuleCompilations:   now.RuleCompilations - before.RuleCompilations,
		ImportedToolChecks: now.ImportedToolChecks - before.ImportedToolChecks,
	}
}

// The spec's schemas and rules are checked once per generation however often a server
// is rendered (by the controller, then the catalog); each imported tool once per call.
func TestSkillServerChecksEachPartOnce(t *testing.T) {
	ss := authServer(nil, &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{{Tools: []string{"a"}, Groups: []string{"readers"}}}})
	ss.UID, ss.Generation = "uid-once", 1
	ss.Spec.Skills = []cantusv1alpha1.Skill{{Name: "a", InputSchema: schema(`{"type":"object","title":"A"}`), Template: &cantusv1alpha1.TemplateBackend{Text: "x"}}}
	ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "remote"}}
	inputs := Inputs{Imports: map[string]*cantusv1alpha1.RemoteToolImport{"remote": readyImportOf("remote", "b", "c")}}

	before := CountsSoFar()
	for range 3 {
		got, err := SkillServer(ss, inputs)
		if err != nil || got.Report.Invalid != nil {
			t.Fatalf("render: %v, %v", err, got.Report.Invalid)
		}
		if len(got.Config.Tools) != 3 || got.Hash == "" || got.RolloutHash == "" {
			t.Fatalf("rendered %d tools, hashes %q %q", len(got.Config.Tools), got.Hash, got.RolloutHash)
		}
		if len(got.Report.NonPortableKeys) != 1 || len(got.Report.Imports.Served) != 2 {
			t.Fatalf("report %+v", got.Report)
		}
	}
	if got, want := countsSince(before), (Counts{SpecValidations: 1, RuleCompilations: 1, ImportedToolChecks: 6}); got != want {
		t.Errorf("three renders of one generation: %+v, want %+v", got, want)
	}

	ss.Generation = 2
	before = CountsSoFar()
	got, _ := SkillServer(ss, Inputs{})
	if c := countsSince(before); c != (Counts{SpecValidations: 1, RuleCompilations: 1}) {
		t.Errorf("a new generation: %+v", c)
	}
	reader := &access.Caller{Groups: []string{"readers"}}
	if !got.Authorization.Allows(reader, access.ItemTool, "a") || got.Authorization.Allows(&access.Caller{}, access.ItemTool, "a") {
		t.Error("the compiled rules do not decide as written")
	}
}

// What the adapter would refuse is reported, not rendered into hashes: the server keeps
// its last good config.
func TestSkillServerReportsWhatCannotBeServed(t *testing.T) {
	cases := map[string]func(*cantusv1alpha1.SkillServer){
		"a template that does not parse": func(ss *cantusv1alpha1.SkillServer) {
			ss.Spec.Skills[0].Template.Text = "{{ .x "
		},
		"a rule that does not compile": func(ss *cantusv1alpha1.SkillServer) {
			ss.Spec.Authorization = &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{{Tools: []string{"a"}, When: "claims.x.("}}}
		},
		"service-account tokens without the cluster's keys": func(ss *cantusv1alpha1.SkillServer) {
			ss.Spec.Auth = &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}}
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			ss := authServer(nil, nil)
			ss.Spec.Skills = []cantusv1alpha1.Skill{{Name: "a", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}}}
			breakIt(ss)
			got, err := SkillServer(ss, Inputs{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Report.Invalid == nil || got.Hash != "" || got.RolloutHash != "" {
				t.Errorf("invalid %v, hashes %q %q", got.Report.Invalid, got.Hash, got.RolloutHash)
			}
		})
	}
}

// The rendered config carries the cluster's keys to the server's service-account issuer.
func TestSkillServerRendersTheClusterIssuer(t *testing.T) {
	ss := authServer(&cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}}, nil)
	got, err := SkillServer(ss, Inputs{Cluster: clusterIssuer})
	if err != nil || got.Report.Invalid != nil {
		t.Fatalf("render: %v, %v", err, got.Report.Invalid)
	}
	issuers := got.Config.Auth.Issuers
	if len(issuers) != 1 || issuers[0].URL != clusterIssuer.URL || string(issuers[0].JWKS) != string(clusterIssuer.JWKS) {
		t.Errorf("issuers %+v", issuers)
	}
}
