package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

const pdfSkillMD = "---\nname: pdf-forms\ndescription: Fill PDF forms.\n---\n# PDF forms\nSee references/FORMS.md.\n"

func contentConfigMap(name string, data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{cantusv1alpha1.ContentLabel: "true"}},
		Data:       data, BinaryData: binary,
	}
}

func skillServerWithSkill(skill cantusv1alpha1.AgentSkill) *cantusv1alpha1.SkillServer {
	return &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "docs", Namespace: "team"},
		Spec:       cantusv1alpha1.SkillServerSpec{AgentSkills: []cantusv1alpha1.AgentSkill{skill}},
	}
}

func inputsOf(cms ...*corev1.ConfigMap) ContentInputs {
	in := ContentInputs{ConfigMaps: map[string]*corev1.ConfigMap{}}
	for _, cm := range cms {
		in.ConfigMaps[cm.Name] = cm
	}
	return in
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestRenderContentSkillFromConfigMap: items place keys at nested paths, binaryData keys
// are binary files, and every file is named by the sha256 of its exact bytes.
func TestRenderContentSkillFromConfigMap(t *testing.T) {
	logo := []byte{0x89, 'P', 'N', 'G', 0, 1, 2}
	cm := contentConfigMap("pdf", map[string]string{"SKILL.md": pdfSkillMD, "references.FORMS.md": "# Forms\n", "unused": "x"},
		map[string][]byte{"logo.png": logo})
	ss := skillServerWithSkill(cantusv1alpha1.AgentSkill{Name: "pdf-forms", Path: "acme/billing", ConfigMap: &cantusv1alpha1.SkillConfigMapSource{
		Name: "pdf", Items: []cantusv1alpha1.SkillFileItem{{Key: "SKILL.md", Path: "SKILL.md"}, {Key: "references.FORMS.md", Path: "references/FORMS.md"}, {Key: "logo.png", Path: "assets/logo.png"}},
	}})
	content, problems := RenderContent(ss, inputsOf(cm))
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if len(content.AgentSkills) != 1 {
		t.Fatalf("skills: %+v", content.AgentSkills)
	}
	skill := content.AgentSkills[0]
	if skill.Path != "acme/billing/pdf-forms" {
		t.Errorf("path %q", skill.Path)
	}
	want := map[string]struct {
		data []byte
		mime string
	}{
		"SKILL.md":            {[]byte(pdfSkillMD), "text/markdown"},
		"references/FORMS.md": {[]byte("# Forms\n"), "text/markdown"},
		"assets/logo.png":     {logo, "image/png"},
	}
	if len(skill.Files) != len(want) {
		t.Fatalf("files %+v, want %d", skill.Files, len(want))
	}
	for _, f := range skill.Files {
		w, ok := want[f.Path]
		if !ok {
			t.Fatalf("unexpected file %q", f.Path)
		}
		if f.Digest != "sha256:"+sha256Hex(w.data) || f.Size != int64(len(w.data)) || f.MimeType != w.mime {
			t.Errorf("%s: digest %s size %d mime %s", f.Path, f.Digest, f.Size, f.MimeType)
		}
		if string(content.Files[sha256Hex(w.data)]) != string(w.data) {
			t.Errorf("%s: the content files do not hold its bytes under its digest", f.Path)
		}
	}
	if string(skill.Frontmatter) != `{"description":"Fill PDF forms.","name":"pdf-forms"}` {
		t.Errorf("frontmatter %s", skill.Frontmatter)
	}
	served := content.Skills[0]
	if served.URI != "skill://acme/billing/pdf-forms/SKILL.md" || served.Name != "pdf-forms" || served.Digest != SkillManifestDigest(skill.Path, skill.Frontmatter, skill.Files) {
		t.Errorf("status entry %+v", served)
	}
	cfg := renderedWith(t, ss, content).Config
	if err := adapterconfig.Validate(cfg); err != nil {
		t.Errorf("the contract refuses the rendered config: %v", err)
	}
}

// TestRenderContentRefusesInvalidSkills: each Agent Skills rule refuses its case with a
// message naming the ConfigMap, the file and the rule.
func TestRenderContentRefusesInvalidSkills(t *testing.T) {
	skill := func(name string, items ...cantusv1alpha1.SkillFileItem) cantusv1alpha1.AgentSkill {
		return cantusv1alpha1.AgentSkill{Name: name, ConfigMap: &cantusv1alpha1.SkillConfigMapSource{Name: "src", Items: items}}
	}
	md := func(front string) string { return "---\n" + front + "\n---\nbody\n" }
	many := map[string]string{"SKILL.md": pdfSkillMD}
	for i := range adapterconfig.MaxSkillFiles {
		many["f"+strings.Repeat("x", 1)+string(rune('a'+i%26))+hex.EncodeToString([]byte{byte(i >> 8), byte(i)})] = "x"
	}
	cases := []struct {
		name   string
		skill  cantusv1alpha1.AgentSkill
		data   map[string]string
		reason string
		want   []string
	}{
		{"no SKILL.md", skill("pdf-forms"), map[string]string{"README.md": "x"}, cantusv1alpha1.ReasonContentMissing, []string{"ConfigMap src", "no file SKILL.md"}},
		{"no frontmatter", skill("pdf-forms"), map[string]string{"SKILL.md": "# just text"}, cantusv1alpha1.ReasonInvalidContent, []string{"ConfigMap src", "file SKILL.md (key SKILL.md)", "first line must be ---"}},
		{"unclosed frontmatter", skill("pdf-forms"), map[string]string{"SKILL.md": "---\nname: pdf-forms\n"}, cantusv1alpha1.ReasonInvalidContent, []string{"no closing --- line"}},
		{"frontmatter not YAML", skill("pdf-forms"), map[string]string{"SKILL.md": md("name: [pdf")}, cantusv1alpha1.ReasonInvalidContent, []string{"not YAML"}},
		{"frontmatter with an alias", skill("pdf-forms"), map[string]string{"SKILL.md": md("name: pdf-forms\ndescription: &d d\nagain: *d")}, cantusv1alpha1.ReasonInvalidContent,
			[]string{"ConfigMap src", "file SKILL.md (key SKILL.md)", "YAML anchors and aliases are not allowed"}},
		{"no name", skill("pdf-forms"), map[string]string{"SKILL.md": md("description: d")}, cantusv1alpha1.ReasonInvalidContent, []string{"ConfigMap src", "frontmatter has no name"}},
		{"name differs", skill("pdf-forms"), map[string]string{"SKILL.md": md("name: pdf\ndescription: d")}, cantusv1alpha1.ReasonInvalidContent, []string{"ConfigMap src", `"pdf" must equal the skill directory's name "pdf-forms"`}},
		{"no description", skill("pdf-forms"), map[string]string{"SKILL.md": md("name: pdf-forms")}, cantusv1alpha1.ReasonInvalidContent, []string{"frontmatter has no description"}},
		{"description too long", skill("pdf-forms"), map[string]string{"SKILL.md": md("name: pdf-forms\ndescription: " + strings.Repeat("é", 1025))}, cantusv1alpha1.ReasonInvalidContent, []string{"1025 characters, more than 1024"}},
		{"too many files", skill("pdf-forms"), many, cantusv1alpha1.ReasonInvalidContent, []string{"513 files, more than the 512"}},
		{"path with ..", skill("pdf-forms", cantusv1alpha1.SkillFileItem{Key: "SKILL.md", Path: "SKILL.md"}, cantusv1alpha1.SkillFileItem{Key: "a", Path: "x/../../a"}),
			map[string]string{"SKILL.md": pdfSkillMD, "a": "x"}, cantusv1alpha1.ReasonInvalidContent, []string{`file "x/../../a"`, `".." segment`}},
		{"absolute path", skill("pdf-forms", cantusv1alpha1.SkillFileItem{Key: "SKILL.md", Path: "SKILL.md"}, cantusv1alpha1.SkillFileItem{Key: "a", Path: "/etc/a"}),
			map[string]string{"SKILL.md": pdfSkillMD, "a": "x"}, cantusv1alpha1.ReasonInvalidContent, []string{`file "/etc/a"`, "relative"}},
		{"empty segment", skill("pdf-forms", cantusv1alpha1.SkillFileItem{Key: "SKILL.md", Path: "SKILL.md"}, cantusv1alpha1.SkillFileItem{Key: "a", Path: "x//a"}),
			map[string]string{"SKILL.md": pdfSkillMD, "a": "x"}, cantusv1alpha1.ReasonInvalidContent, []string{`file "x//a"`, "empty segment"}},
		{"item key missing", skill("pdf-forms", cantusv1alpha1.SkillFileItem{Key: "SKILL.md", Path: "SKILL.md"}, cantusv1alpha1.SkillFileItem{Key: "gone", Path: "a.md"}),
			map[string]string{"SKILL.md": pdfSkillMD}, cantusv1alpha1.ReasonContentMissing, []string{"key gone (for file a.md) is in neither data nor binaryData"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			content, problems := RenderContent(skillServerWithSkill(tc.skill), inputsOf(contentConfigMap("src", tc.data, nil)))
			if len(content.AgentSkills) != 0 {
				t.Errorf("an invalid skill was rendered: %+v", content.AgentSkills)
			}
			if len(problems) == 0 {
				t.Fatal("no problem reported")
			}
			all := ""
			for _, p := range problems {
				all += p.Reason + ": " + p.Message + "\n"
			}
			if problems[0].Reason != tc.reason {
				t.Errorf("reason %s, want %s:\n%s", problems[0].Reason, tc.reason, all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("the problems do not say %q:\n%s", w, all)
				}
			}
		})
	}
}

// TestRenderContentMissingSources: a ConfigMap that is not there, or is there without
// the label, is ContentMissing with a message that says what to do.
func TestRenderContentMissingSources(t *testing.T) {
	ss := skillServerWithSkill(cantusv1alpha1.AgentSkill{Name: "pdf-forms", ConfigMap: &cantusv1alpha1.SkillConfigMapSource{Name: "pdf"}})
	ss.Spec.Resources = []cantusv1alpha1.ServedResource{{URI: "docs://logo", Name: "logo", ConfigMapKeyRef: &cantusv1alpha1.ContentKeyRef{Name: "pdf", Key: "logo.png"}}}
	for _, tc := range []struct {
		name string
		in   ContentInputs
		want string
	}{
		{"missing", ContentInputs{}, "ConfigMap pdf not found: create it, labelled cantus.dev/content=true"},
		{"unlabelled", ContentInputs{Unlabelled: map[string]bool{"pdf": true}}, "ConfigMap pdf exists but does not carry the label cantus.dev/content=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, problems := RenderContent(ss, tc.in)
			if len(problems) != 2 {
				t.Fatalf("want a problem for the skill and one for the resource, got %+v", problems)
			}
			for _, p := range problems {
				if p.Reason != cantusv1alpha1.ReasonContentMissing || !strings.Contains(p.Message, tc.want) {
					t.Errorf("%s: %s, want %s", p.Reason, p.Message, tc.want)
				}
			}
		})
	}
}

// TestRenderContentResourcesAndPrompts: a data key is text, a binaryData key a blob,
// inline text stays inline; prompts and templates carry every field.
func TestRenderContentResourcesAndPrompts(t *testing.T) {
	blob := []byte{0, 1, 2, 255}
	text := "inline"
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "docs"}, Spec: cantusv1alpha1.SkillServerSpec{
		Resources: []cantusv1alpha1.ServedResource{
			{URI: "docs://guide", Name: "guide", ConfigMapKeyRef: &cantusv1alpha1.ContentKeyRef{Name: "res", Key: "guide.md"}},
			{URI: "docs://blob", Name: "blob", ConfigMapKeyRef: &cantusv1alpha1.ContentKeyRef{Name: "res", Key: "blob"}},
			{URI: "docs://inline", Name: "inline", Text: &text, Annotations: &cantusv1alpha1.ResourceAnnotations{Audience: []cantusv1alpha1.PromptRole{"user"}, Priority: "0.5"}},
		},
		ResourceTemplates: []cantusv1alpha1.ServedResourceTemplate{{URITemplate: "docs://{page}", Name: "page", Template: &cantusv1alpha1.TemplateBackend{Text: "{{ .page }}"}}},
		Prompts: []cantusv1alpha1.ServedPrompt{{Name: "greet", Arguments: []cantusv1alpha1.PromptArgument{{Name: "who", Required: true}},
			Messages: []cantusv1alpha1.PromptMessage{{Role: "user", Content: cantusv1alpha1.PromptContent{Type: "text", Text: "hi {{ .who }}"}}}}},
	}}
	content, problems := RenderContent(ss, inputsOf(contentConfigMap("res", map[string]string{"guide.md": "# G"}, map[string][]byte{"blob": blob})))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	r := content.Resources
	if r[0].Content == nil || r[0].Content.Binary || r[0].Content.Digest != "sha256:"+sha256Hex([]byte("# G")) || r[0].MimeType != "text/markdown" {
		t.Errorf("text resource %+v %+v", r[0], r[0].Content)
	}
	if r[1].Content == nil || !r[1].Content.Binary || string(content.Files[sha256Hex(blob)]) != string(blob) {
		t.Errorf("binary resource %+v", r[1])
	}
	if r[2].Text == nil || *r[2].Text != text || r[2].Content != nil || *r[2].Annotations.Priority != 0.5 {
		t.Errorf("inline resource %+v", r[2])
	}
	cfg := renderedWith(t, ss, content).Config
	if err := adapterconfig.Validate(cfg); err != nil {
		t.Errorf("the contract refuses the rendered config: %v", err)
	}
	if cfg.Prompts[0].Arguments[0].Required != true || cfg.Prompts[0].Messages[0].Content.Text != "hi {{ .who }}" || cfg.ResourceTemplates[0].Template == nil {
		t.Errorf("prompts %+v templates %+v", cfg.Prompts, cfg.ResourceTemplates)
	}
}

// TestContentEditKeepsRolloutHash: an edit of a skill file changes the config hash (the
// adapter reloads) but not the rollout hash (the pods do not roll).
func TestContentEditKeepsRolloutHash(t *testing.T) {
	ss := skillServerWithSkill(cantusv1alpha1.AgentSkill{Name: "pdf-forms", ConfigMap: &cantusv1alpha1.SkillConfigMapSource{Name: "pdf"}})
	hashes := func(skillMD string) (string, string) {
		content, problems := RenderContent(ss, inputsOf(contentConfigMap("pdf", map[string]string{"SKILL.md": skillMD}, nil)))
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		rendered := renderedWith(t, ss, content)
		return rendered.Hash, rendered.RolloutHash
	}
	h1, r1 := hashes(pdfSkillMD)
	h2, r2 := hashes(pdfSkillMD + "more\n")
	if h1 == h2 {
		t.Error("the config hash did not change with the content")
	}
	if r1 != r2 {
		t.Error("the rollout hash changed with the content")
	}
}

// TestSkillFrontmatterYAML12: the frontmatter is read with YAML 1.2 semantics and
// carried into JSON faithfully.
func TestSkillFrontmatterYAML12(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"yes and no stay strings", "name: a\ndescription: d\nenabled: yes\noff: on", `{"description":"d","enabled":"yes","name":"a","off":"on"}`},
		{"true is a bool", "name: a\nflag: true", `{"flag":true,"name":"a"}`},
		{"numbers keep their value", "name: a\nint: 0x1F\nbig: 12345678901234\nfloat: 1.50\noctal: 0o17\nold: 017\nunderscore: 1_000", `{"big":12345678901234,"float":1.5,"int":31,"name":"a","octal":15,"old":17,"underscore":"1_000"}`},
		{"timestamps stay text", "name: a\ndate: 2026-09-01", `{"date":"2026-09-01","name":"a"}`},
		{"null", "name: a\nx: ~\ny:", `{"name":"a","x":null,"y":null}`},
		{"nested", "name: a\nmetadata:\n  tags: [pdf, forms]\n  version: \"1.0\"", `{"metadata":{"tags":["pdf","forms"],"version":"1.0"},"name":"a"}`},
		{"infinity stays text", "name: a\nx: .inf", `{"name":"a","x":".inf"}`},
		{"crlf", "name: a\r\ndescription: d\r\n", `{"description":"d","name":"a"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := adapterconfig.SkillFrontmatter([]byte("---\n" + tc.yaml + "\n---\nbody"))
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			_ = json.Unmarshal(got, &a)
			_ = json.Unmarshal([]byte(tc.want), &b)
			if ga, _ := json.Marshal(a); string(ga) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"---\n- a\n---\n", "---\nname: a\nname: b\n---\n", "no frontmatter", "---\nbase: &b {k: v}\nname: a\ncopy: *b\n---\n"} {
		if _, err := adapterconfig.SkillFrontmatter([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// renderedWith renders ss with content through the one render entry, which must accept it.
func renderedWith(t *testing.T, ss *cantusv1alpha1.SkillServer, content Content) Result {
	t.Helper()
	rendered, err := SkillServer(ss, Inputs{Content: content})
	if err != nil || rendered.Report.Invalid != nil {
		t.Fatalf("render: %v %v", err, rendered.Report.Invalid)
	}
	return rendered
}

// TestRenderContentImageSkill: a skill from an image is a volume mounted under
// /var/lib/cantus/skill-images/<i> and a config entry naming the image's folder that
// holds it (its path), for the adapter to read; the operator renders no file and no
// status entry for it (the pods report it).
func TestRenderContentImageSkill(t *testing.T) {
	ss := skillServerWithSkill(cantusv1alpha1.AgentSkill{Name: "cataloguing", Path: "library", Image: &cantusv1alpha1.SkillImageSource{
		Reference: "registry.example.com/skills:1", Path: "skills/cataloguing",
	}})
	content, problems := RenderContent(ss, inputsOf())
	if len(problems) > 0 || len(content.AgentSkills) > 0 || len(content.Files) > 0 || len(content.Skills) > 0 {
		t.Fatalf("an image skill renders no ConfigMap skill, file or status entry: %+v %v", content, problems)
	}
	want := ImageSkill{
		Volume: "skill-image-0", MountPath: "/var/lib/cantus/skill-images/0", Source: *ss.Spec.AgentSkills[0].Image,
		Config: adapterconfig.ImageSkill{Path: "library/cataloguing", Dir: "/var/lib/cantus/skill-images/0/skills/cataloguing", Source: "registry.example.com/skills:1"},
	}
	if len(content.ImageSkills) != 1 || content.ImageSkills[0] != want {
		t.Fatalf("image skills %+v, want %+v", content.ImageSkills, want)
	}
	var cfg adapterconfig.Config
	content.Apply(&cfg, ContentMountPath)
	if len(cfg.ImageSkills) != 1 || cfg.ImageSkills[0] != want.Config || cfg.ContentDir != "" {
		t.Errorf("config imageSkills %+v (contentDir %q), want [%+v] and no content folder", cfg.ImageSkills, cfg.ContentDir, want.Config)
	}
}
