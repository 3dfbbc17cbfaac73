package controller

import (
	"encoding/json"
	"strings"
	"testing"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// TestSkillEntryDigestMatchesTheStatus: a skills/list entry as the Skills extension
// shapes it gives the same manifest digest the operator puts in the status.
func TestSkillEntryDigestMatchesTheStatus(t *testing.T) {
	md, forms := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	entry := json.RawMessage(`{"uri":"skill://acme/pdf-forms/SKILL.md","frontmatter":{"name":"pdf-forms","description":"d"},
		"resources":[{"uri":"skill://acme/pdf-forms/references/FORMS.md","digest":"` + forms + `","size":7},{"uri":"skill://acme/pdf-forms/SKILL.md","digest":"` + md + `","size":70}]}`)
	served, err := skillEntryManifest(entry)
	if err != nil {
		t.Fatal(err)
	}
	uri, digest := served.uri, served.digest
	want := render.SkillManifestDigest("acme/pdf-forms", json.RawMessage(`{"description":"d","name":"pdf-forms"}`), []adapterconfig.SkillFile{{Path: "SKILL.md", Digest: md, Size: 70}, {Path: "references/FORMS.md", Digest: forms, Size: 7}})
	if uri != "skill://acme/pdf-forms/SKILL.md" || digest != want {
		t.Errorf("got %s %s, want the status digest %s", uri, digest, want)
	}
}

// TestContentMismatch: missing and unexpected skills and prompts are named; a match
// says nothing, nor does a skill served with another digest (definitionDifferences
// tells that).
func TestContentMismatch(t *testing.T) {
	ss := &cantusv1alpha1.SkillServer{Status: cantusv1alpha1.SkillServerStatus{
		AgentSkills: []cantusv1alpha1.ServedAgentSkill{{URI: "skill://a/SKILL.md", Digest: "sha256:1"}, {URI: "skill://b/SKILL.md", Digest: "sha256:2"}},
		Prompts:     []string{"greet"},
	}}
	for _, tc := range []struct {
		name   string
		served ServedContent
		want   []string
	}{
		{"same", ServedContent{SkillDigests: map[string]string{"skill://a/SKILL.md": "sha256:1", "skill://b/SKILL.md": "sha256:2"}, Prompts: []string{"greet"}}, nil},
		{"stale skill", ServedContent{SkillDigests: map[string]string{"skill://a/SKILL.md": "sha256:old", "skill://b/SKILL.md": "sha256:2"}, Prompts: []string{"greet"}}, nil},
		{"missing and extra", ServedContent{SkillDigests: map[string]string{"skill://a/SKILL.md": "sha256:1", "skill://c/SKILL.md": "sha256:3"}, Prompts: []string{"bye"}},
			[]string{"missing: greet, skill://b/SKILL.md", "not expected: bye, skill://c/SKILL.md"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := contentMismatch(ss, tc.served, nil)
			if len(tc.want) == 0 && got != "" {
				t.Fatalf("a match reported: %s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q does not say %q", got, w)
				}
			}
		})
	}
}
