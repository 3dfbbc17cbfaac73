package render

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The backend a gateway calls an import with carries the eras the import's status
// recorded, newest first and only those the adapter knows; an import over sse or stdio
// carries none (2025-11-25 only).
func TestRemoteBackend_CarriesTheErasOfTheImportsStatus(t *testing.T) {
	imp := &cantusv1alpha1.RemoteToolImport{ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: "team"}}
	imp.Spec.URL, imp.Spec.Transport = "http://up.team:8080/mcp", cantusv1alpha1.ImportTransportStreamableHTTP
	imp.Status.Eras = []string{"2025-11-25", "2099-01-01", "2026-07-28"}
	b, _ := remoteBackend(imp)
	if !slices.Equal(b.Eras, []string{adapterconfig.EraModern, adapterconfig.EraLegacy}) {
		t.Errorf("eras %v, want 2026-07-28 and 2025-11-25", b.Eras)
	}
	imp.Status.Eras = nil
	if b, _ := remoteBackend(imp); b.Eras != nil {
		t.Errorf("an import without recorded eras got %v, want none", b.Eras)
	}
	imp.Status.Eras = []string{"2026-07-28"}
	imp.Spec.Transport = cantusv1alpha1.ImportTransportSSE
	if b, _ := remoteBackend(imp); b.Eras != nil {
		t.Errorf("an sse import got %v, want none", b.Eras)
	}
}

// Each imported tool of a dual-era import is served in the eras its remote lists it in,
// with its 2026-07-28 definition where that differs; the backend names the eras the
// remote serves at all, so that a gateway tells "not listed in this era" from "this era
// is translated".
func TestReexport_ServesEachToolInTheErasItsRemoteListsItIn(t *testing.T) {
	both := []string{adapterconfig.EraModern, adapterconfig.EraLegacy}
	imp := readyImportOf("dual", "echo", "plan", "versioned")
	imp.Status.Eras = both
	imp.Status.Tools[0].Eras = both
	imp.Status.Tools[1].Eras = []string{adapterconfig.EraModern}
	imp.Status.Tools[2].Eras = both
	imp.Status.Tools[2].EraDefinitions = []cantusv1alpha1.EraDefinition{{Era: adapterconfig.EraModern, Digest: "d",
		Definition: &runtime.RawExtension{Raw: []byte(`{"name":"versioned","description":"modern","inputSchema":{"type":"object"}}`)}}}
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "dual"}}
	out := reexport(ss, map[string]*cantusv1alpha1.RemoteToolImport{"dual": imp}, nil)
	backends := map[string]*adapterconfig.RemoteBackend{}
	for _, tool := range out.tools {
		backends[tool.Name] = tool.Remote
	}
	if len(backends) != 3 {
		t.Fatalf("served %v, want echo, plan and versioned", backends)
	}
	for name, b := range backends {
		if !slices.Equal(b.RemoteEras, both) {
			t.Errorf("%s: remoteEras %v, want both eras", name, b.RemoteEras)
		}
	}
	if b := backends["plan"]; !slices.Equal(b.Eras, []string{adapterconfig.EraModern}) || b.ListedTo(adapterconfig.EraLegacy) || !b.ListedTo(adapterconfig.EraModern) {
		t.Errorf("plan: eras %v, want 2026-07-28 only, not listed to 2025-11-25 callers", b.Eras)
	}
	if b := backends["echo"]; !slices.Equal(b.Eras, both) || len(b.ModernDefinition) != 0 {
		t.Errorf("echo: eras %v, modern definition %s; want both eras and none", b.Eras, b.ModernDefinition)
	}
	if b := backends["versioned"]; string(b.ModernDefinition) != `{"description":"modern","inputSchema":{"type":"object"}}` {
		t.Errorf("versioned: modern definition %s, want the 2026-07-28 entry without its name", b.ModernDefinition)
	}
}

// Each imported prompt, resource and template of a dual-era import is served in the
// eras its remote lists it in: one of 2026-07-28 only is not listed to older callers.
func TestReexportContent_ServesEachItemInTheErasItsRemoteListsItIn(t *testing.T) {
	both := []string{adapterconfig.EraModern, adapterconfig.EraLegacy}
	modern := []string{adapterconfig.EraModern}
	imp := withContent(readyImportOf("dual"), []string{"hello", "confirm"}, []string{"docs://guide"}, []string{"docs://{page}"})
	imp.Status.Eras = both
	imp.Status.Prompts[0].Eras, imp.Status.Prompts[1].Eras = both, modern
	imp.Status.Resources[0].Eras, imp.Status.ResourceTemplates[0].Eras = []string{adapterconfig.EraLegacy}, modern
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "dual"}}
	cfg := &adapterconfig.Config{}
	reexportContent(ss, map[string]*cantusv1alpha1.RemoteToolImport{"dual": imp}, cfg)

	want := map[string][]string{"hello": both, "confirm": modern, "docs://guide": {adapterconfig.EraLegacy}, "docs://{page}": modern}
	items := slices.Concat(cfg.Imported.Prompts, cfg.Imported.Resources, cfg.Imported.ResourceTemplates)
	if len(items) != len(want) {
		t.Fatalf("served %d items, want %d", len(items), len(want))
	}
	for _, it := range items {
		if !slices.Equal(it.Remote.Eras, want[it.Key]) || !slices.Equal(it.Remote.RemoteEras, both) {
			t.Errorf("%s: eras %v of %v, want %v of both", it.Key, it.Remote.Eras, it.Remote.RemoteEras, want[it.Key])
		}
	}
	if confirm := cfg.Imported.Prompts[1].Remote; confirm.ListedTo(adapterconfig.EraLegacy) || !confirm.ListedTo(adapterconfig.EraModern) {
		t.Errorf("the prompt of 2026-07-28 only is listed to 2025-11-25 callers, or not to its own")
	}
}

// A tool its remote lists only to clients declaring capabilities is served where the
// import relays them, and left out and named where it does not.
func TestReexport_LeavesOutToolsNeedingCapabilitiesTheImportDoesNotRelay(t *testing.T) {
	imp := readyImportOf("everything", "echo", "trigger-elicitation-request", "get-roots-list")
	imp.Status.Tools[1].RequiresCapabilities = []string{"elicitation"}
	imp.Status.Tools[2].RequiresCapabilities = []string{"roots"}
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "everything", Relay: []cantusv1alpha1.RelayedRequest{cantusv1alpha1.RelayElicitation}}}
	out := reexport(ss, map[string]*cantusv1alpha1.RemoteToolImport{"everything": imp}, nil)
	var served []string
	for _, tool := range out.tools {
		served = append(served, tool.Name)
	}
	if !slices.Equal(served, []string{"echo", "trigger-elicitation-request"}) {
		t.Fatalf("served %v, want echo and trigger-elicitation-request", served)
	}
	if needs := out.tools[1].Remote.Needs; !slices.Equal(needs, []string{"elicitation"}) {
		t.Errorf("trigger-elicitation-request needs %v, want elicitation (listed only to callers the gateway can ask)", needs)
	}
	if want := []string{`"get-roots-list" from import everything (needs roots)`}; !slices.Equal(out.report.NotRelayed, want) {
		t.Errorf("not relayed %q, want %q", out.report.NotRelayed, want)
	}
}

// A tool whose 2026-07-28 definition waits for approval is served in 2025-11-25 only,
// with its approved definition there; approved, the 2026-07-28 one is served with the
// members its digest covers.
func TestReexport_WithholdsAPendingDefinitionInItsEraOnly(t *testing.T) {
	both := []string{adapterconfig.EraModern, adapterconfig.EraLegacy}
	imp := readyImportOf("dual", "versioned")
	imp.Status.Eras = both
	tool := &imp.Status.Tools[0]
	tool.Eras, tool.Approval = both, cantusv1alpha1.ItemApproved
	tool.EraDefinitions = []cantusv1alpha1.EraDefinition{{Era: adapterconfig.EraModern, Digest: "d", Approval: cantusv1alpha1.ItemPending,
		Definition: &runtime.RawExtension{Raw: []byte(`{"name":"versioned","description":"modern","inputSchema":{"type":"object"},"x-extra":1}`)}}}
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "dual"}}
	render := func() *adapterconfig.RemoteBackend {
		out := reexport(ss, map[string]*cantusv1alpha1.RemoteToolImport{"dual": imp}, nil)
		if len(out.tools) != 1 {
			t.Fatalf("served %d tools, want versioned", len(out.tools))
		}
		return out.tools[0].Remote
	}
	if b := render(); !slices.Equal(b.Eras, []string{adapterconfig.EraLegacy}) || len(b.ModernDefinition) != 0 || b.ListedTo(adapterconfig.EraModern) {
		t.Errorf("pending: eras %v, modern definition %s; want 2025-11-25 only", b.Eras, b.ModernDefinition)
	}
	tool.EraDefinitions[0].Approval = cantusv1alpha1.ItemApproved
	if b := render(); !slices.Equal(b.Eras, both) || string(b.ModernDefinition) != `{"description":"modern","inputSchema":{"type":"object"}}` {
		t.Errorf("approved: eras %v, modern definition %s; want both, without the member no digest covers", b.Eras, b.ModernDefinition)
	}
}

// A gateway passes an import's list changes on at once only when they are served as
// soon as the operator sees them (not held for approval), and only where it can listen
// with an account of its own, to a remote that sends them (not through a stdio bridge).
func TestRemoteBackend_PassesListChangesOnlyOfImportsServedAsTheyChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*cantusv1alpha1.RemoteToolImport)
		want   bool
	}{
		{"Automatic approval", func(*cantusv1alpha1.RemoteToolImport) {}, true},
		{"Manual approval", func(imp *cantusv1alpha1.RemoteToolImport) {
			imp.Spec.Approval = &cantusv1alpha1.ImportApproval{Mode: cantusv1alpha1.ApprovalManual}
		}, false},
		{"stdio bridge", func(imp *cantusv1alpha1.RemoteToolImport) {
			imp.Spec.Transport = cantusv1alpha1.ImportTransportStdio
		}, false},
		{"callers' credentials", func(imp *cantusv1alpha1.RemoteToolImport) {
			imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{PerCallerSecret: &cantusv1alpha1.PerCallerSecret{}}
		}, false},
	} {
		imp := &cantusv1alpha1.RemoteToolImport{ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: "team"}}
		imp.Spec.URL, imp.Spec.Transport = "http://up.team:8080/mcp", cantusv1alpha1.ImportTransportStreamableHTTP
		tc.change(imp)
		if b, _ := remoteBackend(imp); b.ListChanges != tc.want {
			t.Errorf("%s: ListChanges %v, want %v", tc.name, b.ListChanges, tc.want)
		}
	}
}
