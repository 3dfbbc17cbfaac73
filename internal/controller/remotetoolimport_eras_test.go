package controller

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/test/testenv/dualera"
)

// A successful handshake records the eras the probe found in status.eras (the ERAS
// column), newest first and only those the client speaks.
func TestHandshakeSucceeded_RecordsTheErasOfTheProbe(t *testing.T) {
	imp := &cantusv1alpha1.RemoteToolImport{}
	res := &mcpclient.Result{Eras: []string{mcpclient.EraLegacy, "1999-01-01", mcpclient.EraModern}}
	setHandshakeSucceeded(imp, res, nil, time.Now())
	if !slices.Equal(imp.Status.Eras, []string{mcpclient.EraModern, mcpclient.EraLegacy}) {
		t.Errorf("status.eras %v, want 2026-07-28 and 2025-11-25", imp.Status.Eras)
	}
	setHandshakeSucceeded(imp, &mcpclient.Result{Eras: []string{mcpclient.EraLegacy}}, nil, time.Now())
	if !slices.Equal(imp.Status.Eras, []string{mcpclient.EraLegacy}) {
		t.Errorf("status.eras %v after a 2025-11-25-only probe, want that era", imp.Status.Eras)
	}
}

// statusToolsByName maps the import's status tools by name.
func statusToolsByName(imp *cantusv1alpha1.RemoteToolImport) map[string]cantusv1alpha1.DiscoveredTool {
	out := map[string]cantusv1alpha1.DiscoveredTool{}
	for _, tool := range imp.Status.Tools {
		out[tool.Name] = tool
	}
	return out
}

// eraDescription is the description of a tool's definition in era, as status records it.
func eraDescription(t *testing.T, tool cantusv1alpha1.DiscoveredTool, era string) string {
	t.Helper()
	for _, def := range tool.EraDefinitions {
		if def.Era == era && def.Definition != nil {
			var entry struct{ Description string }
			if err := json.Unmarshal(def.Definition.Raw, &entry); err != nil {
				t.Fatalf("definition of %s in %s: %v", tool.Name, era, err)
			}
			return entry.Description
		}
	}
	return ""
}

// importDualEraRemote imports a fixture serving both eras as name, and returns the
// import once its handshake succeeded.
func importDualEraRemote(t *testing.T, g Gomega, name string) *cantusv1alpha1.RemoteToolImport {
	t.Helper()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	remote := dualera.Start(t, dualera.Both)
	imp := kubekit.NewImport(ns, name, remote.URL)
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(10 * time.Second)
	got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), imp)
	g.Expect(got).To(kubekit.HaveImportCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonHandshakeSucceeded))
	return got
}

// An import of a dual-era remote lists the union of both eras' tools, each with the eras
// the remote lists it in: the tool listed only to 2026-07-28 clients is imported too,
// and a tool described otherwise in 2026-07-28 carries that definition, digested on
// its own.
func TestImportOfDualEraRemote_ListsTheUnionOfBothErasTools(t *testing.T) {
	g := NewWithT(t)
	got := importDualEraRemote(t, g, "dual")
	g.Expect(got.Status.Eras).To(Equal([]string{mcpclient.EraModern, mcpclient.EraLegacy}))
	tools := statusToolsByName(got)
	g.Expect(tools).To(HaveKey(dualera.ToolModernOnly), "the tool listed only in 2026-07-28 is imported")
	g.Expect(tools[dualera.ToolModernOnly].Eras).To(Equal([]string{mcpclient.EraModern}))
	g.Expect(tools[dualera.ToolEcho].Eras).To(Equal([]string{mcpclient.EraModern, mcpclient.EraLegacy}))
	g.Expect(tools[dualera.ToolEcho].EraDefinitions).To(BeEmpty(), "echo is defined alike in both eras")
	g.Expect(got.Status.ToolCount).To(BeEquivalentTo(len(got.Status.Tools)))

	versioned := tools[dualera.ToolVersioned]
	g.Expect(versioned.Description).To(Equal(dualera.LegacyDescription))
	g.Expect(eraDescription(t, versioned, mcpclient.EraModern)).To(Equal(dualera.ModernDescription))
	g.Expect(versioned.EraDefinitions[0].Digest).To(HaveLen(64))
	g.Expect(versioned.EraDefinitions[0].Digest).NotTo(Equal(versioned.Digest))
}

// In Manual mode one definitions digest approves the tools of both eras, the
// definition a tool has in 2026-07-28 among them; a change of that definition alone
// is withheld (in that era) until approved again, and status.approval.changes names
// its era.
func TestImportOfDualEraRemote_OneDigestApprovesBothErasAndAModernChangeIsWithheld(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	remote := dualera.Start(t, dualera.Both)
	r := importReconciler()
	imp := kubekit.NewImport(ns, "dual", remote.URL)
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(10 * time.Second)
	imp.Spec.Approval = &cantusv1alpha1.ImportApproval{Mode: cantusv1alpha1.ApprovalManual}
	pending := kubekit.ReconcileImport(t, k8sClient, r, imp)
	g.Expect(pending).To(kubekit.HaveImportCondition(cantusv1alpha1.ConditionDefinitionsApproved, metav1.ConditionFalse, cantusv1alpha1.ReasonChangePending))
	digest := pending.Status.Approval.PendingDigest
	g.Expect(digest).NotTo(BeEmpty())

	pending.Spec.Approval.Digest = digest
	g.Expect(k8sClient.Update(ctx, pending)).To(Succeed())
	approved := kubekit.ReconcileImport(t, k8sClient, r, pending)
	g.Expect(approved).To(kubekit.HaveImportCondition(cantusv1alpha1.ConditionDefinitionsApproved, metav1.ConditionTrue, cantusv1alpha1.ReasonAllApproved))
	for _, tool := range approved.Status.Tools {
		g.Expect(tool.Approval).To(Equal(cantusv1alpha1.ItemApproved), "tool %s", tool.Name)
		for _, def := range tool.EraDefinitions {
			g.Expect(def.Approval).To(Equal(cantusv1alpha1.ItemApproved), "tool %s in %s", tool.Name, def.Era)
		}
	}
	g.Expect(approved.Status.Approval.Approved).To(ContainElement(And(
		HaveField("Name", dualera.ToolVersioned), HaveField("Era", mcpclient.EraModern))), "the 2026-07-28 definition is among the approved items")

	remote.DescribeModern("described anew for 2026-07-28")
	changed := kubekit.ReconcileImport(t, k8sClient, r, approved)
	g.Expect(changed).To(kubekit.HaveImportCondition(cantusv1alpha1.ConditionDefinitionsApproved, metav1.ConditionFalse, cantusv1alpha1.ReasonChangePending))
	tools := statusToolsByName(changed)
	versioned := tools[dualera.ToolVersioned]
	g.Expect(versioned.EraDefinitions[0].Approval).To(Equal(cantusv1alpha1.ItemPending), "its 2026-07-28 definition is withheld")
	g.Expect(versioned.Approval).To(Equal(cantusv1alpha1.ItemApproved), "its 2025-11-25 definition did not change")
	g.Expect(versioned.Description).To(Equal(dualera.LegacyDescription))
	g.Expect(tools[dualera.ToolEcho].Approval).To(Equal(cantusv1alpha1.ItemApproved))
	g.Expect(changed.Status.Approval.Changes).To(ConsistOf(And(HaveField("Name", dualera.ToolVersioned), HaveField("Era", mcpclient.EraModern),
		HaveField("Change", cantusv1alpha1.DefinitionChanged))))
	g.Expect(changed.Status.Approval.PendingDigest).NotTo(Equal(digest))
	g.Expect(changed.Status.CatalogDigest).NotTo(Equal(approved.Status.CatalogDigest), "the catalog digest covers the 2026-07-28 definitions")
}

// The verifier, which declares no client capability, does not expect to be listed the
// imported tools a gateway lists only to callers it can ask for one.
func TestVerify_DoesNotExpectCapabilityBoundTools(t *testing.T) {
	cfg := &adapterconfig.Config{Tools: []adapterconfig.Tool{
		{Name: "se_echo", Remote: &adapterconfig.RemoteBackend{}},
		{Name: "se_trigger-elicitation-request", Remote: &adapterconfig.RemoteBackend{Relay: []string{"elicitation"}, Needs: []string{"elicitation"}}},
		{Name: "local", Template: &adapterconfig.TemplateBackend{Text: "x"}},
	}}
	if got := capabilityBoundTools(cfg); !slices.Equal(got, []string{"se_trigger-elicitation-request"}) {
		t.Errorf("capability-bound tools %v, want se_trigger-elicitation-request", got)
	}
	if got := capabilityBoundTools(nil); got != nil {
		t.Errorf("without a config: %v, want none", got)
	}
}

// A successful handshake records the extensions the remote announced in either era,
// sorted and once each: those of server/discover (the Tasks extension) with those of
// initialize.
func TestHandshakeSucceeded_RecordsTheExtensionsOfBothEras(t *testing.T) {
	imp := &cantusv1alpha1.RemoteToolImport{}
	res := &mcpclient.Result{Eras: mcpclient.Eras(), Extensions: []string{"io.modelcontextprotocol/skills"},
		ModernExtensions: []string{"io.modelcontextprotocol/tasks", "io.modelcontextprotocol/skills"}}
	setHandshakeSucceeded(imp, res, nil, time.Now())
	want := []string{"io.modelcontextprotocol/skills", "io.modelcontextprotocol/tasks"}
	if got := imp.Status.ServerInfo.Extensions; !slices.Equal(got, want) {
		t.Errorf("serverInfo.extensions %v, want %v", got, want)
	}
}

// An import of a dual-era remote lists the union of both eras' content too, each entry
// with the eras the remote lists it in: the prompt it lists only to 2026-07-28 clients
// (one that asks for input) is imported, marked of that era.
func TestImportOfDualEraRemote_ListsTheUnionOfBothErasContent(t *testing.T) {
	g := NewWithT(t)
	got := importDualEraRemote(t, g, "dual-content")
	eras := map[string][]string{}
	for _, p := range got.Status.Prompts {
		eras[p.Name] = p.Eras
	}
	g.Expect(eras).To(Equal(map[string][]string{
		dualera.PromptName:    {mcpclient.EraModern, mcpclient.EraLegacy},
		dualera.PromptConfirm: {mcpclient.EraModern},
	}))
	g.Expect(got.Status.PromptCount).To(BeEquivalentTo(2))
	g.Expect(got.Status.Resources).To(HaveLen(1))
	g.Expect(got.Status.Resources[0].Eras).To(Equal([]string{mcpclient.EraModern, mcpclient.EraLegacy}))
}
