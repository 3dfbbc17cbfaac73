package render

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

func withContent(imp *cantusv1alpha1.RemoteToolImport, prompts, resources, templates []string) *cantusv1alpha1.RemoteToolImport {
	def := func(raw string) cantusv1alpha1.DiscoveredContent {
		return cantusv1alpha1.DiscoveredContent{Definition: &runtime.RawExtension{Raw: []byte(raw)}}
	}
	for _, p := range prompts {
		imp.Status.Prompts = append(imp.Status.Prompts, cantusv1alpha1.DiscoveredPrompt{DiscoveredContent: def(`{"name":"` + p + `","_meta":{"k":1}}`)})
	}
	for _, r := range resources {
		imp.Status.Resources = append(imp.Status.Resources, cantusv1alpha1.DiscoveredResource{URI: r, DiscoveredContent: def(`{"uri":"` + r + `","name":"r"}`)})
	}
	for _, t := range templates {
		imp.Status.ResourceTemplates = append(imp.Status.ResourceTemplates, cantusv1alpha1.DiscoveredResourceTemplate{URITemplate: t, DiscoveredContent: def(`{"uriTemplate":"` + t + `","name":"t"}`)})
	}
	return imp
}

// spec.imports[] applies to prompts by name (include, exclude, prefix, renames);
// resources and templates keep their URIs; a URI that two imports, or an import and the
// server, serve is a collision reported with both; an item the adapter could not serve
// (no definition, a template that does not parse) is skipped and named.
func TestReexportContent(t *testing.T) {
	a := withContent(readyImportOf("a"), []string{"greet", "bye", "secret"}, []string{"file:///a", "file:///shared", "file:///own"}, []string{"x://{id}"})
	b := withContent(readyImportOf("b"), []string{"greet"}, []string{"file:///shared"}, []string{"y://{bad"})
	b.Status.Resources = append(b.Status.Resources, cantusv1alpha1.DiscoveredResource{URI: "file:///big", DiscoveredContent: cantusv1alpha1.DiscoveredContent{Clipped: []string{"definition"}}})
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	ss.Spec.Imports = []cantusv1alpha1.SkillImport{
		{Name: "a", Prefix: "a_", Exclude: []string{"secret"}, Renames: []cantusv1alpha1.ToolRename{{From: "bye", To: "farewell"}}},
		{Name: "b", Prefix: "b_"},
	}
	cfg := &adapterconfig.Config{Resources: []adapterconfig.Resource{{URI: "file:///own", Name: "own"}}}
	report := reexportContent(ss, map[string]*cantusv1alpha1.RemoteToolImport{"a": a, "b": b}, cfg)

	keys := func(items []adapterconfig.ImportedItem) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.Key)
		}
		return out
	}
	if got := strings.Join(keys(cfg.Imported.Prompts), ","); got != "a_greet,farewell,b_greet" {
		t.Errorf("prompts %s", got)
	}
	if p := cfg.Imported.Prompts[1]; p.Remote.RemoteName != "bye" || string(p.Definition) != `{"_meta":{"k":1},"name":"farewell"}` {
		t.Errorf("renamed prompt: remote %q, definition %s", p.Remote.RemoteName, p.Definition)
	}
	if got := strings.Join(keys(cfg.Imported.Resources), ","); got != "file:///a" {
		t.Errorf("resources %s", got)
	}
	if got := strings.Join(keys(cfg.Imported.ResourceTemplates), ","); got != "x://{id}" {
		t.Errorf("templates %s", got)
	}
	collisions := strings.Join(report.Collisions, "\n")
	for _, want := range []string{`resource "file:///shared" from import a and import b`, `resource "file:///own" from this server and import a`} {
		if !strings.Contains(collisions, want) {
			t.Errorf("collisions %q lack %q", collisions, want)
		}
	}
	skipped := strings.Join(report.Skipped, "\n")
	for _, want := range []string{`resource "file:///big" from import b`, `resource template "y://{bad" from import b`} {
		if !strings.Contains(skipped, want) {
			t.Errorf("skipped %q lack %q", skipped, want)
		}
	}
	if report.Prompts != 3 || report.Resources != 1 || report.ResourceTemplates != 1 {
		t.Errorf("counts %+v", report)
	}
	if err := adapterconfig.Validate(&adapterconfig.Config{Transport: adapterconfig.TransportStreamableHTTP, Imported: cfg.Imported}); err != nil {
		t.Errorf("the adapter refuses what render served: %v", err)
	}
	raw, _ := json.Marshal(cfg.Imported)
	if strings.Contains(string(raw), "file:///shared") {
		t.Error("a collided URI must not be served by either import")
	}
}

// Skills are selected by skill path and moved under the prefix (without its trailing
// "_"), their files with them; the files of a skill left out are not served as plain
// resources either.
func TestReexportSkillsUnderThePrefix(t *testing.T) {
	imp := withContent(readyImportOf("a"), nil, []string{"skill://acme/forms/SKILL.md", "skill://acme/forms/ref.md", "skill://acme/secret/SKILL.md", "docs://x"}, nil)
	for _, path := range []string{"acme/forms", "acme/secret"} {
		entry := `{"uri":"skill://` + path + `/SKILL.md","frontmatter":{"name":"n"},"resources":[{"uri":"skill://` + path + `/SKILL.md","digest":"sha256:00","size":1}]}`
		imp.Status.Skills = append(imp.Status.Skills, cantusv1alpha1.DiscoveredSkill{URI: "skill://" + path + "/SKILL.md",
			DiscoveredContent: cantusv1alpha1.DiscoveredContent{Definition: &runtime.RawExtension{Raw: []byte(entry)}}})
	}
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "a", Prefix: "lib_", Exclude: []string{"acme/secret"}}}
	cfg := &adapterconfig.Config{}
	report := reexportContent(ss, map[string]*cantusv1alpha1.RemoteToolImport{"a": imp}, cfg)
	if report.Skills != 1 || len(cfg.Imported.Skills) != 1 || cfg.Imported.Skills[0].Key != "skill://lib/acme/forms/SKILL.md" {
		t.Fatalf("skills %+v", cfg.Imported.Skills)
	}
	if !strings.Contains(string(cfg.Imported.Skills[0].Definition), `{"digest":"sha256:00","size":1,"uri":"skill://lib/acme/forms/SKILL.md"}`) {
		t.Errorf("the entry's resources must be moved, digests kept: %s", cfg.Imported.Skills[0].Definition)
	}
	var got []string
	for _, r := range cfg.Imported.Resources {
		got = append(got, r.Key+"<"+r.RemoteKey)
	}
	if want := "skill://lib/acme/forms/SKILL.md<skill://acme/forms/SKILL.md,skill://lib/acme/forms/ref.md<skill://acme/forms/ref.md,docs://x<"; strings.Join(got, ",") != want {
		t.Errorf("resources %v, want %s", got, want)
	}
	if err := adapterconfig.Validate(&adapterconfig.Config{Transport: adapterconfig.TransportStreamableHTTP, Imported: cfg.Imported}); err != nil {
		t.Errorf("the adapter refuses what render served: %v", err)
	}
}

// An import whose remote declared resources.subscribe has its resources and templates
// marked subscribable (not its prompts), unless it is a stdio import, whose bridge
// passes no notifications on; the rollout hash changes with it, since the gateway
// declares resources.subscribe when it starts.
func TestReexportMarksSubscribableResources(t *testing.T) {
	subscribable := func(name string, transport cantusv1alpha1.ImportTransport) *cantusv1alpha1.RemoteToolImport {
		imp := withContent(readyImportOf(name), []string{name + "p"}, []string{"file:///" + name}, []string{name + "://{id}"})
		imp.Spec.Transport = transport
		if transport == cantusv1alpha1.ImportTransportStdio {
			imp.Spec.URL, imp.Status.BridgeURL = "", "http://10.0.0.9:8080/mcp"
		}
		imp.Status.ServerInfo = &cantusv1alpha1.RemoteServerInfo{Capabilities: []string{"prompts", "resources", "resources.subscribe"}}
		return imp
	}
	imports := map[string]*cantusv1alpha1.RemoteToolImport{
		"plain": withContent(readyImportOf("plain"), nil, []string{"file:///plain"}, nil),
		"subs":  subscribable("subs", cantusv1alpha1.ImportTransportStreamableHTTP),
		"stdio": subscribable("stdio", cantusv1alpha1.ImportTransportStdio),
	}
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "plain"}, {Name: "subs"}, {Name: "stdio"}}
	cfg := &adapterconfig.Config{Transport: adapterconfig.TransportStreamableHTTP}
	reexportContent(ss, imports, cfg)
	marked := map[string]bool{}
	for _, items := range [][]adapterconfig.ImportedItem{cfg.Imported.Prompts, cfg.Imported.Resources, cfg.Imported.ResourceTemplates} {
		for _, it := range items {
			marked[it.Key] = it.Remote.Subscribe
		}
	}
	want := map[string]bool{"file:///plain": false, "file:///subs": true, "subs://{id}": true, "subsp": false,
		"file:///stdio": false, "stdio://{id}": false, "stdiop": false}
	for key, w := range want {
		if got, ok := marked[key]; !ok || got != w {
			t.Errorf("%s: subscribe %v (served %v), want %v", key, got, ok, w)
		}
	}
	if !adapterconfig.RelaysSubscriptions(cfg) {
		t.Error("a stateful gateway of a subscribable import does not relay subscriptions")
	}
	if !strings.Contains(strings.Join(importedEndpoints(cfg), "\n"), "relays resource subscriptions") {
		t.Error("relaying subscriptions is not in the rollout hash")
	}
	cfg.Stateless = true
	if adapterconfig.RelaysSubscriptions(cfg) {
		t.Error("a stateless gateway relays subscriptions")
	}
}

// importWithSkill is an import that lists the skill at path, with entry as its
// skills/list entry, and the resources uris.
func importWithSkill(name, path, entry string, uris ...string) *cantusv1alpha1.RemoteToolImport {
	imp := withContent(readyImportOf(name), nil, uris, nil)
	imp.Status.Skills = append(imp.Status.Skills, cantusv1alpha1.DiscoveredSkill{URI: "skill://" + path + "/SKILL.md",
		DiscoveredContent: cantusv1alpha1.DiscoveredContent{Definition: &runtime.RawExtension{Raw: []byte(entry)}}})
	return imp
}

// A skill's entry lists as its files only URIs under its own skill://<path>/: one that
// names another URI (here another import's resource) is dropped from the entry served,
// with or without a prefix, and the report says so; the resource itself stays its own
// import's.
func TestAnImportedSkillsEntryKeepsOnlyItsOwnFiles(t *testing.T) {
	for _, prefix := range []string{"", "lib_"} {
		t.Run("prefix "+prefix, func(t *testing.T) {
			evil := importWithSkill("evil", "evil",
				`{"uri":"skill://evil/SKILL.md","frontmatter":{"name":"evil"},"resources":[{"uri":"skill://evil/SKILL.md","digest":"sha256:00","size":1},{"uri":"docs://secret","digest":"sha256:01","size":1},{"uri":"skill://evil-twin/x.md"}]}`,
				"skill://evil/SKILL.md")
			db := withContent(readyImportOf("db"), nil, []string{"docs://guide", "docs://secret"}, nil)
			ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
			ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "evil", Prefix: prefix}, {Name: "db"}}
			cfg := &adapterconfig.Config{}
			report := reexportContent(ss, map[string]*cantusv1alpha1.RemoteToolImport{"evil": evil, "db": db}, cfg)

			if len(cfg.Imported.Skills) != 1 {
				t.Fatalf("skills %+v", cfg.Imported.Skills)
			}
			var entry struct {
				Resources []struct {
					URI string `json:"uri"`
				} `json:"resources"`
			}
			if err := json.Unmarshal(cfg.Imported.Skills[0].Definition, &entry); err != nil {
				t.Fatal(err)
			}
			want := "skill://evil/SKILL.md"
			if prefix != "" {
				want = "skill://lib/evil/SKILL.md"
			}
			if len(entry.Resources) != 1 || entry.Resources[0].URI != want {
				t.Errorf("the entry served lists %+v, want only %s: %s", entry.Resources, want, cfg.Imported.Skills[0].Definition)
			}
			skipped := strings.Join(report.Skipped, "\n")
			for _, uri := range []string{"docs://secret", "skill://evil-twin/x.md"} {
				if !strings.Contains(skipped, uri) || !strings.Contains(skipped, "import evil") {
					t.Errorf("skipped %q does not say that %s was dropped from evil's skill", skipped, uri)
				}
			}
			var served []string
			for _, r := range cfg.Imported.Resources {
				served = append(served, r.Key+"@"+r.Remote.Import)
			}
			if got := strings.Join(served, ","); !strings.Contains(got, "docs://secret@books/db") {
				t.Errorf("resources %s: docs://secret must stay db's", got)
			}
			if err := adapterconfig.Validate(&adapterconfig.Config{Transport: adapterconfig.TransportStreamableHTTP, Imported: cfg.Imported}); err != nil {
				t.Errorf("the adapter refuses what render served: %v", err)
			}
		})
	}
}

// A skill entry whose resources are not a list of files with a uri cannot be served as
// listed: it is skipped, rather than given to an adapter that would refuse the config.
func TestAnImportedSkillWithMalformedResourcesIsSkipped(t *testing.T) {
	for _, resources := range []string{`"x"`, `[1]`, `[{"uri":5}]`} {
		imp := importWithSkill("a", "s", `{"uri":"skill://s/SKILL.md","frontmatter":{"name":"s"},"resources":`+resources+`}`, "skill://s/SKILL.md")
		ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
		ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "a"}}
		cfg := &adapterconfig.Config{}
		report := reexportContent(ss, map[string]*cantusv1alpha1.RemoteToolImport{"a": imp}, cfg)
		if cfg.Imported != nil && len(cfg.Imported.Skills) != 0 {
			t.Errorf("resources %s: skill served: %s", resources, cfg.Imported.Skills[0].Definition)
		}
		if !strings.Contains(strings.Join(report.Skipped, "\n"), `skill "skill://s/SKILL.md" from import a`) {
			t.Errorf("resources %s: skipped %q", resources, report.Skipped)
		}
	}
}

// The server's own skills, from ConfigMaps and images alike, take their whole
// skill://<path>/ directory: an imported skill of the same path, of a path inside it or
// around it, and an imported resource under it (or the directory itself) are
// collisions, served by neither.
func TestTheServersOwnSkillsTakeTheirDirectories(t *testing.T) {
	entry := func(path string) string {
		return `{"uri":"skill://` + path + `/SKILL.md","frontmatter":{"name":"n"},"resources":[{"uri":"skill://` + path + `/SKILL.md"}]}`
	}
	imports := map[string]*cantusv1alpha1.RemoteToolImport{
		"same":   importWithSkill("same", "img/forms", entry("img/forms"), "skill://img/forms/SKILL.md", "skill://img/forms/extra.md"),
		"inner":  importWithSkill("inner", "cm/refunds/deep", entry("cm/refunds/deep"), "skill://cm/refunds/deep/SKILL.md"),
		"outer":  importWithSkill("outer", "img", entry("img"), "skill://img/SKILL.md"),
		"plain":  withContent(readyImportOf("plain"), nil, []string{"skill://img/forms/planted.md", "skill://img/forms", "skill://cm/refunds/planted.md", "skill://img/formsx/ok.md"}, nil),
		"unrelt": importWithSkill("unrelt", "other", entry("other"), "skill://other/SKILL.md"),
	}
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	for _, name := range []string{"same", "inner", "outer", "plain", "unrelt"} {
		ss.Spec.Imports = append(ss.Spec.Imports, cantusv1alpha1.SkillImport{Name: name})
	}
	cfg := &adapterconfig.Config{
		AgentSkills: []adapterconfig.AgentSkill{{Path: "cm/refunds", Files: []adapterconfig.SkillFile{{Path: "SKILL.md"}}}},
		ImageSkills: []adapterconfig.ImageSkill{{Path: "img/forms", Dir: "/skills/0"}},
	}
	report := reexportContent(ss, imports, cfg)

	var skills, resources []string
	for _, s := range cfg.Imported.Skills {
		skills = append(skills, s.Key)
	}
	for _, r := range cfg.Imported.Resources {
		resources = append(resources, r.Key)
	}
	if got := strings.Join(skills, ","); got != "skill://other/SKILL.md" {
		t.Errorf("imported skills served: %s, want only skill://other/SKILL.md", got)
	}
	if got := strings.Join(resources, ","); got != "skill://img/formsx/ok.md,skill://other/SKILL.md" {
		t.Errorf("imported resources served: %s", got)
	}
	collisions := strings.Join(report.Collisions, "\n")
	for _, want := range []string{
		`skill "skill://img/forms/SKILL.md" from this server and import same`,
		`skill "skill://cm/refunds/deep/SKILL.md" from this server and import inner`,
		`skill "skill://img/SKILL.md" from this server and import outer`,
		`resource "skill://img/forms/planted.md" from this server and import plain`,
		`resource "skill://img/forms" from this server and import plain`,
		`resource "skill://cm/refunds/planted.md" from this server and import plain`,
	} {
		if !strings.Contains(collisions, want) {
			t.Errorf("collisions %q lack %q", collisions, want)
		}
	}
}

// A skill's directory belongs to one import: a resource another import serves in it,
// and two imports' skills whose directories nest, are collisions, so that no import
// serves bytes under another's skill.
func TestAnImportedSkillsDirectoryIsItsImports(t *testing.T) {
	entry := func(path string) string {
		return `{"uri":"skill://` + path + `/SKILL.md","frontmatter":{"name":"n"},"resources":[{"uri":"skill://` + path + `/SKILL.md"}]}`
	}
	imports := map[string]*cantusv1alpha1.RemoteToolImport{
		"a": importWithSkill("a", "a", entry("a"), "skill://a/SKILL.md"),
		"b": withContent(readyImportOf("b"), nil, []string{"skill://a/planted.md", "skill://a", "skill://ab/ok.md"}, nil),
		"c": importWithSkill("c", "c", entry("c"), "skill://c/SKILL.md"),
		"d": importWithSkill("d", "c/d", entry("c/d"), "skill://c/d/SKILL.md"),
	}
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	for _, name := range []string{"a", "b", "c", "d"} {
		ss.Spec.Imports = append(ss.Spec.Imports, cantusv1alpha1.SkillImport{Name: name})
	}
	cfg := &adapterconfig.Config{}
	report := reexportContent(ss, imports, cfg)

	var skills, resources []string
	for _, s := range cfg.Imported.Skills {
		skills = append(skills, s.Key)
	}
	for _, r := range cfg.Imported.Resources {
		resources = append(resources, r.Key+"@"+r.Remote.Import)
	}
	if got := strings.Join(skills, ","); got != "skill://a/SKILL.md" {
		t.Errorf("imported skills served: %s, want only skill://a/SKILL.md", got)
	}
	if got := strings.Join(resources, ","); got != "skill://a/SKILL.md@books/a,skill://ab/ok.md@books/b" {
		t.Errorf("imported resources served: %s", got)
	}
	collisions := strings.Join(report.Collisions, "\n")
	for _, want := range []string{
		`resource "skill://a/planted.md" from import b lies in the directory of skill "skill://a/SKILL.md" from import a`,
		`resource "skill://a" from import b lies in the directory of skill "skill://a/SKILL.md" from import a`,
		`skill "skill://c/d/SKILL.md" from import d lies in the directory of skill "skill://c/SKILL.md" from import c`,
	} {
		if !strings.Contains(collisions, want) {
			t.Errorf("collisions %q lack %q", collisions, want)
		}
	}
}
