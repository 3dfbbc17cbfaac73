package render

import (
	"strings"
	"testing"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// Search mode renders into the adapter config with its defaults; All mode renders
// nothing, so the config (and its hash) of a server listing every tool is unchanged.
func TestDiscoveryRendersSearchModeOnly(t *testing.T) {
	ss := authServer(nil, nil)
	ss.Spec.Skills = []cantusv1alpha1.Skill{{Name: "a", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}}}
	plain, _ := SkillServer(ss, Inputs{})
	ss.Spec.Discovery = &cantusv1alpha1.DiscoverySpec{Mode: cantusv1alpha1.DiscoveryAll}
	all, _ := SkillServer(ss, Inputs{})
	if all.Config.Discovery != nil || all.Hash != plain.Hash {
		t.Fatalf("All mode changed the config: %+v, hash %s vs %s", all.Config.Discovery, all.Hash, plain.Hash)
	}
	ss.Spec.Discovery = &cantusv1alpha1.DiscoverySpec{Mode: cantusv1alpha1.DiscoverySearch, Pinned: []string{"a*"}}
	search, _ := SkillServer(ss, Inputs{})
	d := search.Config.Discovery
	if search.Report.Invalid != nil || d == nil || d.FindToolName != "find_tools" || d.CallToolName != "call_tool" || d.DefaultLimit != 5 || d.MaxLimit != 20 || !d.Pins("abc") {
		t.Fatalf("Search mode rendered %+v (invalid: %v)", d, search.Report.Invalid)
	}
}

// A declared or imported tool that takes a meta-tool's name is refused at render, the
// message naming both.
func TestDiscoveryRefusesAToolNamedLikeAMetaTool(t *testing.T) {
	ss := authServer(nil, nil)
	ss.Spec.Skills = []cantusv1alpha1.Skill{{Name: "find_tools", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}}}
	ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "remote"}}
	ss.Spec.Discovery = &cantusv1alpha1.DiscoverySpec{Mode: cantusv1alpha1.DiscoverySearch, CallToolName: "run"}
	got, err := SkillServer(ss, Inputs{Imports: map[string]*cantusv1alpha1.RemoteToolImport{"remote": readyImportOf("remote", "run")}})
	if err != nil {
		t.Fatal(err)
	}
	msg := ""
	if got.Report.Invalid != nil {
		msg = got.Report.Invalid.Error()
	}
	for _, want := range []string{`tool "find_tools" has the name of the discovery meta-tool "find_tools" (spec.discovery.findToolName)`,
		`tool imported from books/remote as "run" has the name of the discovery meta-tool "run" (spec.discovery.callToolName)`} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, msg)
		}
	}
	if got.Hash != "" {
		t.Error("a refused config was hashed")
	}
}
