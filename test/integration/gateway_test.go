package integration

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/controller"
	"github.com/cantus-dev/cantus-operator/internal/testkit"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapter"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/mcpkit"
	"github.com/cantus-dev/cantus-operator/internal/workload/local"
)

// startGatewayManager runs both controllers, SkillServers on the local runtime, and
// returns the folder the local adapters' files go under.
func startGatewayManager(t *testing.T) string {
	t.Helper()
	mgr := newTestManager(t)
	adapters := local.New(mgr.GetAPIReader())
	adapters.MemoryDir = t.TempDir()
	if err := mgr.Add(adapters); err != nil {
		t.Fatal(err)
	}
	if err := (&controller.SkillServerReconciler{Client: mgr.GetClient(), Runtime: adapters, Recorder: mgr.GetEventRecorder("cantus-operator")}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&controller.RemoteToolImportReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("cantus-operator")}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	kubekit.RunManager(t, mgr)
	return adapters.MemoryDir
}

// readyGateway serves the given imports of ns through a gateway SkillServer named name
// and returns it once Ready.
func readyGateway(t *testing.T, ctx context.Context, ns, name string, imports ...cantusv1alpha1.SkillImport) *cantusv1alpha1.SkillServer {
	t.Helper()
	g := NewWithT(t)
	gw := kubekit.NewSkillServer(ns, name)
	gw.Spec.Imports = imports
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, name), 60*time.Second).Should(
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, name)()
	return got
}

// remoteLibrary is a real adapter with a working tool and one whose backend fails.
func remoteLibrary(t *testing.T) *httptest.Server {
	t.Helper()
	srv, err := adapter.NewServer(kubekit.RemoteLibraryConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	remote := httptest.NewServer(srv.Handler())
	testkit.CloseAtEnd(t, remote)
	return remote
}

func TestGatewayReexportsImportedTools(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	remote := remoteLibrary(t)

	imp := kubekit.NewImport(ns, "library", remote.URL+"/mcp")
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	gw := kubekit.NewSkillServer(ns, "gateway", kubekit.TemplateSkill("search_book", "local found: {{ .title }}"))
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "library", Prefix: "lib_", Renames: []cantusv1alpha1.ToolRename{{From: "checkout", To: "borrow"}}}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())

	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway"), 30*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway")()
	g.Expect(got.Status.Tools).To(ConsistOf(
		cantusv1alpha1.ServedTool{Name: "search_book", Source: "skill"},
		cantusv1alpha1.ServedTool{Name: "lib_search_book", Source: "import:library", RemoteName: "search_book"},
		cantusv1alpha1.ServedTool{Name: "borrow", Source: "import:library", RemoteName: "checkout"},
	))
	g.Expect(got).To(kubekit.HaveCondition(cantusv1alpha1.ConditionImportsResolved, metav1.ConditionTrue, cantusv1alpha1.ReasonAllResolved))

	res, err := callTool(ctx, got.Status.URL, "streamable-http", "lib_search_book", map[string]any{"title": "Dune"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mcpkit.ResultText(res)).To(Equal("remote found: Dune"))
	res, err = callTool(ctx, got.Status.URL, "streamable-http", "search_book", map[string]any{"title": "Dune"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mcpkit.ResultText(res)).To(Equal("local found: Dune"), "the local skill is not shadowed")
	res, err = callTool(ctx, got.Status.URL, "streamable-http", "borrow", map[string]any{"title": "Dune"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.IsError).To(BeTrue())
	g.Expect(mcpkit.ResultText(res)).To(HavePrefix("mcp_remote_error: "))
	g.Expect(mcpkit.ResultText(res)).To(ContainSubstring("http_call_failed: 500"))

	// The remote goes away: the import is no longer Ready and the gateway drops its tools.
	// (Its open streams first: the gateway's and the operator's watches hold one each.)
	remote.CloseClientConnections()
	remote.Close()
	// Any spec change re-runs the handshake at once.
	g.Expect(kubekit.Update(ctx, k8sClient, imp, func(imp *cantusv1alpha1.RemoteToolImport) {
		imp.Spec.RefreshInterval = cantusv1alpha1.DurationFrom(cantusv1alpha1.MinRefreshInterval)
	})).To(Succeed())
	g.Eventually(func() string {
		got, _ = kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway")()
		if c := kubekit.FindCondition(got, cantusv1alpha1.ConditionImportsResolved); c != nil {
			return c.Message
		}
		return ""
	}, 30*time.Second).Should(ContainSubstring("library (not Ready: ConnectionRefused)"))
	g.Expect(got.Status.Tools).To(Equal([]cantusv1alpha1.ServedTool{{Name: "search_book", Source: "skill"}}))
	g.Expect(kubekit.FindCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
}

func TestGatewayReportsNameCollisions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	remote := remoteLibrary(t)
	for _, name := range []string{"library-a", "library-b"} {
		g.Expect(k8sClient.Create(ctx, kubekit.NewImport(ns, name, remote.URL+"/mcp"))).To(Succeed())
	}
	gw := kubekit.NewSkillServer(ns, "gateway", kubekit.TemplateSkill("search_book", "local"))
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "library-a"}, {Name: "library-b", Include: []string{"checkout"}}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())

	// Both imports become Ready in either order; wait until both collisions are seen.
	var got *cantusv1alpha1.SkillServer
	g.Eventually(func() string {
		got, _ = kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway")()
		if c := kubekit.FindCondition(got, cantusv1alpha1.ConditionToolNamesUnique); c != nil && c.Status == metav1.ConditionFalse {
			return c.Message
		}
		return ""
	}, 30*time.Second).Should(And(ContainSubstring(`"search_book"`), ContainSubstring(`"checkout"`)))
	msg := kubekit.FindCondition(got, cantusv1alpha1.ConditionToolNamesUnique).Message
	g.Expect(msg).To(ContainSubstring(`"search_book" from a skill of this server and import library-a (remote tool search_book)`))
	g.Expect(msg).To(ContainSubstring(`"checkout" from import library-a (remote tool checkout) and import library-b (remote tool checkout)`))
	names := []string{}
	for _, tool := range got.Status.Tools {
		names = append(names, tool.Name+"<-"+tool.Source)
	}
	g.Expect(strings.Join(names, ",")).To(Equal("search_book<-skill"), "nothing is silently shadowed: the colliding imported tools are left out")
	g.Expect(kubekit.FindCondition(got, cantusv1alpha1.ConditionReady).Reason).To(Equal(cantusv1alpha1.ReasonNameCollision))
}

// hostileRemote publishes tools the adapter cannot serve beside one it can, under a
// 40 KB server name and descriptions far past any sensible size.
func hostileRemote(t *testing.T) *httptest.Server {
	t.Helper()
	s := server.NewMCPServer(strings.Repeat("n", 40<<10), strings.Repeat("9", 10<<10))
	answer := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("good answer"), nil
	}
	s.AddTool(mcp.NewToolWithRawSchema("good", strings.Repeat("d", 64<<10), json.RawMessage(`{"type":"object"}`)), answer)
	s.AddTool(mcp.NewToolWithRawSchema("bad name!", "", json.RawMessage(`{"type":"object"}`)), answer)
	s.AddTool(mcp.NewToolWithRawSchema("not_an_object", "", json.RawMessage(`{"type":"string"}`)), answer)
	s.AddTool(mcp.NewToolWithRawSchema("costly", "", json.RawMessage(`{"type":"object","properties":{"a":{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}}}`)), answer)
	remote := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStateLess(true)))
	testkit.CloseAtEnd(t, remote)
	return remote
}

// A remote that publishes tools the adapter cannot serve does not stall the gateway: the
// others (its own skills, the remote's good tool) are served, and the bad ones are named.
func TestGatewaySkipsImportedToolsItCannotServe(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	remote := hostileRemote(t)

	g.Expect(k8sClient.Create(ctx, kubekit.NewImport(ns, "hostile", remote.URL+"/mcp"))).To(Succeed())
	gw := kubekit.NewSkillServer(ns, "gateway", kubekit.TemplateSkill("search_book", "local found: {{ .title }}"))
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "hostile", Prefix: "h_"}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())

	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway"), 30*time.Second).Should(
		kubekit.HaveCondition(cantusv1alpha1.ConditionImportedToolsServable, metav1.ConditionFalse, cantusv1alpha1.ReasonToolsSkipped))
	// The import stores what the remote sent, clipped to fit a status.
	imp := &cantusv1alpha1.RemoteToolImport{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "hostile"}, imp)).To(Succeed())
	g.Expect(imp.Status.ServerInfo.Name).To(And(HaveLen(256), HaveSuffix("…")))
	g.Expect(imp.Status.ServerInfo.Version).To(HaveLen(64))
	g.Expect(imp.Status.Tools).To(ContainElement(And(HaveField("Name", "good"), HaveField("Description", HaveLen(4<<10)))))
	g.Expect(imp.Status.ToolCount).To(Equal(int32(4)))
	// The gateway will connect only where the policy check connected.
	g.Expect(imp.Status.Addresses).To(Equal([]string{"127.0.0.1"}))

	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway")()
	skipped := kubekit.FindCondition(got, cantusv1alpha1.ConditionImportedToolsServable).Message
	g.Expect(skipped).To(HavePrefix("3 imported tools left out"))
	g.Expect(skipped).To(And(ContainSubstring(`"h_bad name!"`), ContainSubstring(`"h_not_an_object"`), ContainSubstring(`"h_costly"`)))
	// Not Reconciling for ever (issue 23, finding 13): Stalled, which kstatus reads as
	// Failed, with what to do; the rest is served.
	g.Expect(kubekit.FindCondition(got, cantusv1alpha1.ConditionStalled)).To(And(HaveField("Reason", cantusv1alpha1.ReasonToolsSkipped),
		HaveField("Message", ContainSubstring("spec.imports[].exclude"))))
	g.Expect(kubekit.FindCondition(got, cantusv1alpha1.ConditionReconciling)).To(BeNil())
	g.Expect(kubekit.KstatusOf(ctx, g, k8sClient, got)).To(Equal(status.FailedStatus))
	g.Expect(kubekit.FindCondition(got, cantusv1alpha1.ConditionReady)).To(HaveField("Reason", cantusv1alpha1.ReasonToolsSkipped))
	g.Expect(got.Status.Tools).To(ConsistOf(
		cantusv1alpha1.ServedTool{Name: "search_book", Source: "skill"},
		cantusv1alpha1.ServedTool{Name: "h_good", Source: "import:hostile", RemoteName: "good"},
	))

	res, err := callTool(ctx, got.Status.URL, "streamable-http", "search_book", map[string]any{"title": "Dune"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mcpkit.ResultText(res)).To(Equal("local found: Dune"))
	res, err = callTool(ctx, got.Status.URL, "streamable-http", "h_good", map[string]any{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mcpkit.ResultText(res)).To(Equal("good answer"))

	g.Eventually(func() []string {
		list := &eventsv1.EventList{}
		_ = k8sClient.List(ctx, list, crclient.InNamespace(ns))
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Name == "gateway" {
				reasons = append(reasons, e.Reason)
			}
		}
		return reasons
	}, 10*time.Second).Should(ContainElement(cantusv1alpha1.ReasonToolsSkipped))
}
