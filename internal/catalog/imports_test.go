package catalog

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// An imported tool shows in the catalog with the title, annotations and outputSchema
// its import's status recorded, and with what that status had to clip.
func TestCatalogShowsImportedToolsTitleAnnotationsAndOutputSchema(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "imports")
	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather"},
		Spec:       cantusv1alpha1.RemoteToolImportSpec{URL: "https://weather.example.com/mcp"},
	}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	imp.Status.Tools = []cantusv1alpha1.DiscoveredTool{{
		Name: "forecast", Title: "Forecast Tool", Description: "Tomorrow's weather.",
		InputSchema:  &runtime.RawExtension{Raw: []byte(`{"type":"object"}`)},
		OutputSchema: &runtime.RawExtension{Raw: []byte(`{"type":"object","properties":{"celsius":{"type":"number"}}}`)},
		Annotations:  &runtime.RawExtension{Raw: []byte(`{"readOnlyHint":true}`)},
		Clipped:      []string{"otherFields"},
	}}
	g.Expect(k8sClient.Status().Update(ctx, imp)).To(Succeed())
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gateway"},
		Spec:       cantusv1alpha1.SkillServerSpec{Imports: []cantusv1alpha1.SkillImport{{Name: "weather", Prefix: "w_"}}},
	}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	ss.Status.Tools = []cantusv1alpha1.ServedTool{{Name: "w_forecast", Source: "import:weather", RemoteName: "forecast"}}
	g.Expect(k8sClient.Status().Update(ctx, ss)).To(Succeed())

	servers, err := (&Catalog{Reader: k8sClient}).Servers(ctx, &viewer{namespaces: map[string]bool{ns: true}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(servers).To(HaveLen(1))
	tool := servers[0].Tools[0]
	g.Expect(tool.Name).To(Equal("w_forecast"))
	g.Expect(tool.Title).To(Equal("Forecast Tool"))
	g.Expect(tool.OutputSchema).To(MatchJSON(`{"type":"object","properties":{"celsius":{"type":"number"}}}`))
	g.Expect(tool.Annotations).To(MatchJSON(`{"readOnlyHint":true}`))
	g.Expect(tool.Clipped).To(Equal([]string{"otherFields"}))
}

// An imported tool whose import sends each caller's own credential says so, and how.
func TestCallerCredentials_CatalogSaysWhichImportedToolsActAsTheCaller(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "callers")
	for name, cc := range map[string]*cantusv1alpha1.CallerCredentials{
		"notes": {PerCallerSecret: &cantusv1alpha1.PerCallerSecret{}},
		"plain": nil,
	} {
		imp := &cantusv1alpha1.RemoteToolImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       cantusv1alpha1.RemoteToolImportSpec{URL: "https://" + name + ".example.com/mcp", CallerCredentials: cc},
		}
		g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	}
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gateway"},
		Spec:       cantusv1alpha1.SkillServerSpec{Imports: []cantusv1alpha1.SkillImport{{Name: "notes"}, {Name: "plain"}}},
	}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	ss.Status.Tools = []cantusv1alpha1.ServedTool{{Name: "write", Source: "import:notes"}, {Name: "read", Source: "import:plain"}}
	g.Expect(k8sClient.Status().Update(ctx, ss)).To(Succeed())

	servers, err := (&Catalog{Reader: k8sClient}).Servers(ctx, &viewer{namespaces: map[string]bool{ns: true}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(servers).To(HaveLen(1))
	modes := map[string]string{}
	for _, tool := range servers[0].Tools {
		modes[tool.Name] = tool.CallerCredentials
	}
	g.Expect(modes).To(Equal(map[string]string{"write": cantusv1alpha1.CallerCredentialsModePerCallerSecret, "read": ""}))
}

// The catalog shows the eras an imported tool of a dual-era remote is listed in, and
// the registry API the eras each re-exported import's remote serves.
func TestCatalogAndRegistryShowTheErasOfADualEraImport(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "eras")
	both := []string{"2026-07-28", "2025-11-25"}
	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planner"},
		Spec:       cantusv1alpha1.RemoteToolImportSpec{URL: "https://planner.example.com/mcp"},
	}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	imp.Status.Eras, imp.Status.CatalogDigest = both, strings.Repeat("a", 64)
	imp.Status.Tools = []cantusv1alpha1.DiscoveredTool{
		{Name: "forecast", InputSchema: &runtime.RawExtension{Raw: []byte(`{"type":"object"}`)}, Eras: both},
		{Name: "plan", InputSchema: &runtime.RawExtension{Raw: []byte(`{"type":"object"}`)}, Eras: []string{"2026-07-28"}},
	}
	g.Expect(k8sClient.Status().Update(ctx, imp)).To(Succeed())
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gateway"},
		Spec:       cantusv1alpha1.SkillServerSpec{Imports: []cantusv1alpha1.SkillImport{{Name: "planner"}}},
	}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	ss.Status.URL = "http://gateway." + ns + ".svc:8765/mcp"
	ss.Status.Tools = []cantusv1alpha1.ServedTool{{Name: "forecast", Source: "import:planner"}, {Name: "plan", Source: "import:planner"}}
	g.Expect(k8sClient.Status().Update(ctx, ss)).To(Succeed())

	who := &viewer{namespaces: map[string]bool{ns: true}}
	c := &Catalog{Reader: k8sClient}
	servers, err := c.Servers(ctx, who)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(servers).To(HaveLen(1))
	eras := map[string][]string{}
	for _, tool := range servers[0].Tools {
		eras[tool.Name] = tool.Eras
	}
	g.Expect(eras).To(Equal(map[string][]string{"forecast": both, "plan": {"2026-07-28"}}))

	entries, err := c.RegistryEntries(ctx, who)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1))
	g.Expect(entries[0].Meta.Cluster.ImportEras).To(Equal(map[string][]string{"planner": both}))
}
