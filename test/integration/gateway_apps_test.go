package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// appView is the view the MCP Apps example's get-time tool opens.
const appView = "ui://get-time/mcp-app.html"

// importApp imports a running MCP Apps example as name and waits for it to be Ready.
func importApp(t *testing.T, ctx context.Context, ns, name, endpoint string) {
	t.Helper()
	g := NewWithT(t)
	imp := kubekit.NewImport(ns, name, endpoint)
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(20 * time.Second)
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	g.Eventually(kubekit.GetImport(ctx, k8sClient, ns, name), 60*time.Second).Should(
		kubekit.HaveImportCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonHandshakeSucceeded))
}

// toolMeta is the _meta of the tool named name in a tools/list answer.
func toolMeta(t *testing.T, ctx context.Context, url, name string) map[string]any {
	t.Helper()
	tools, err := rawSession(t, ctx, url).ListTools(ctx, 100)
	if err != nil {
		t.Fatalf("tools/list at %s: %v", url, err)
	}
	for _, tool := range tools {
		if tool.Name != name {
			continue
		}
		var entry struct {
			Meta map[string]any `json:"_meta"`
		}
		if err := json.Unmarshal(tool.Raw, &entry); err != nil {
			t.Fatalf("tool %s: %v", name, err)
		}
		return entry.Meta
	}
	t.Fatalf("%s lists no tool %s", url, name)
	return nil
}

// An MCP App (the Apps extension's vanillajs example from npm) re-exported by a
// gateway keeps its view: the tool's _meta.ui.resourceUri still names the remote's
// ui:// resource, the gateway serves that resource as the remote does, and the tool is
// called through the gateway. Served under its own name the server says its views can
// call their tools; under a prefix it warns (condition and Warning event) that the
// view's calls, which use the remote's names, will fail, and serves the tool anyway.
func TestGatewayKeepsAnMCPAppsViewWorking(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	direct := peers.StartMCPAppServer(t, ctx)
	importApp(t, ctx, ns, "clock", direct)

	plain := readyGateway(t, ctx, ns, "apps", cantusv1alpha1.SkillImport{Name: "clock"})
	g.Expect(apimeta.FindStatusCondition(plain.Status.Conditions, cantusv1alpha1.ConditionAppViewsCallable)).To(HaveField("Status", metav1.ConditionTrue))

	wantMeta := toolMeta(t, ctx, direct, "get-time")
	g.Expect(wantMeta).To(HaveKeyWithValue("ui", HaveKeyWithValue("resourceUri", appView)), "the example's tool opens its view")
	g.Expect(toolMeta(t, ctx, plain.Status.URL, "get-time")).To(Equal(wantMeta))

	want, err := rawSession(t, ctx, direct).ReadResource(ctx, appView)
	g.Expect(err).NotTo(HaveOccurred())
	got, err := rawSession(t, ctx, plain.Status.URL).ReadResource(ctx, appView)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(MatchJSON(want), "the gateway serves the view as the remote does")
	g.Expect(string(got)).To(ContainSubstring("text/html;profile=mcp-app"))

	answer, err := rawSession(t, ctx, plain.Status.URL).CallTool(ctx, "get-time", json.RawMessage(`{}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(answer)).To(ContainSubstring(`"time"`))

	prefixed := readyGateway(t, ctx, ns, "prefixed-apps", cantusv1alpha1.SkillImport{Name: "clock", Prefix: "clock_"})
	warning := apimeta.FindStatusCondition(prefixed.Status.Conditions, cantusv1alpha1.ConditionAppViewsCallable)
	g.Expect(warning).NotTo(BeNil())
	g.Expect(warning.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(warning.Reason).To(Equal(cantusv1alpha1.ReasonAppToolsRenamed))
	g.Expect(warning.Message).To(And(ContainSubstring(`"clock_get-time"`), ContainSubstring(`remote "get-time"`), ContainSubstring(appView)))
	g.Expect(toolMeta(t, ctx, prefixed.Status.URL, "clock_get-time")).To(Equal(wantMeta), "the renamed tool still names the view")
	g.Eventually(func() []string { return eventNotes(ctx, ns, cantusv1alpha1.ReasonAppToolsRenamed) }, 30*time.Second).Should(
		ContainElement(ContainSubstring("clock_get-time")))
}

// Two imports that serve the same ui:// view through one gateway are not mixed up:
// the view is a URI collision, so the gateway serves neither import's view and the
// server names both imports in ImportedContentServed; the tools are served, each
// warned about under its prefix.
func TestGatewayRefusesAViewTwoImportsServe(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	importApp(t, ctx, ns, "clock-a", peers.StartMCPAppServer(t, ctx))
	importApp(t, ctx, ns, "clock-b", peers.StartMCPAppServer(t, ctx))

	gw := readyGateway(t, ctx, ns, "apps", cantusv1alpha1.SkillImport{Name: "clock-a", Prefix: "a_"}, cantusv1alpha1.SkillImport{Name: "clock-b", Prefix: "b_"})
	_, err := rawSession(t, ctx, gw.Status.URL).ReadResource(ctx, appView)
	g.Expect(err).To(MatchError(ContainSubstring("no resource is served at " + appView)))
	served := apimeta.FindStatusCondition(gw.Status.Conditions, cantusv1alpha1.ConditionImportedContentServed)
	g.Expect(served).NotTo(BeNil())
	g.Expect(served.Reason).To(Equal(cantusv1alpha1.ReasonNameCollision))
	g.Expect(served.Message).To(And(ContainSubstring(appView), ContainSubstring("clock-a"), ContainSubstring("clock-b")))
	views := apimeta.FindStatusCondition(gw.Status.Conditions, cantusv1alpha1.ConditionAppViewsCallable)
	g.Expect(views.Message).To(And(ContainSubstring(`"a_get-time"`), ContainSubstring(`"b_get-time"`)))
}
