package integration

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// everythingGateway imports server-everything (streamable HTTP) and serves it through
// a gateway SkillServer with transport, its tools prefixed "se_"; it returns the
// remote's endpoint and the gateway's.
func everythingGateway(t *testing.T, ctx context.Context, transport cantusv1alpha1.Transport) (direct, gateway string) {
	t.Helper()
	return everythingGatewayOver(t, ctx, cantusv1alpha1.ImportTransportStreamableHTTP, transport)
}

// everythingGatewayOver is everythingGateway importing server-everything over
// imported (streamable-http or sse).
func everythingGatewayOver(t *testing.T, ctx context.Context, imported cantusv1alpha1.ImportTransport, transport cantusv1alpha1.Transport) (direct, gateway string) {
	t.Helper()
	g := NewWithT(t)
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	direct = peers.StartServerEverything(t, ctx, string(imported)) + map[cantusv1alpha1.ImportTransport]string{
		cantusv1alpha1.ImportTransportStreamableHTTP: "/mcp", cantusv1alpha1.ImportTransportSSE: "/sse"}[imported]
	imp := kubekit.NewImport(ns, "everything", direct)
	imp.Spec.Transport = imported
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(20 * time.Second)
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	gw := kubekit.NewSkillServer(ns, "gateway")
	gw.Spec.Transport = transport
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "everything", Prefix: "se_"}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway"), 60*time.Second).Should(
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "gateway")()
	return direct, got.Status.URL
}

// withoutName is a tools/list entry as parsed JSON, its name left out.
func withoutName(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var entry map[string]any
	if err := json.Unmarshal(raw, &entry); err != nil {
		t.Fatalf("tool entry %s: %v", raw, err)
	}
	delete(entry, "name")
	return entry
}

// Every tool of server-everything, listed by the TypeScript SDK client through a
// gateway, equals as parsed JSON what the same client lists from server-everything
// directly (title, description, inputSchema, outputSchema, annotations, execution, …),
// except the name, which carries the import's prefix. Both gateway transports. The
// gateway relays nothing, so it lists what server-everything lists to a client that
// declares nothing (TestGatewayListsOnlyImportedToolsItCanServe).
func TestGatewayServesImportedDefinitionsAsTheRemoteDefinedThem(t *testing.T) {
	ctx := context.Background()
	for _, transport := range []cantusv1alpha1.Transport{cantusv1alpha1.TransportStreamableHTTP, cantusv1alpha1.TransportSSE} {
		t.Run(string(transport), func(t *testing.T) {
			g := NewWithT(t)
			direct, gateway := everythingGateway(t, ctx, transport)
			want := peers.TSClient(t, ctx, peers.TSClientOptions{URL: direct})
			got := peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Transport: string(transport)})

			listed := map[string]json.RawMessage{}
			for _, tool := range got.Tools {
				listed[tool.Name] = tool.Raw
			}
			g.Expect(got.Tools).To(HaveLen(len(want.Tools)))
			sawOutputSchema := false
			for _, tool := range want.Tools {
				raw, ok := listed["se_"+tool.Name]
				g.Expect(ok).To(BeTrue(), "se_%s is served", tool.Name)
				g.Expect(withoutName(t, raw)).To(Equal(withoutName(t, tool.Raw)), "definition of %s", tool.Name)
				sawOutputSchema = sawOutputSchema || len(tool.OutputSchema) > 0
			}
			g.Expect(sawOutputSchema).To(BeTrue(), "server-everything defines a tool with an outputSchema (get-structured-content)")
		})
	}
}

// The import's status records each tool's title, annotations and outputSchema as the
// remote sent them, and the members it has no field for (execution) in otherFields.
func TestImportRecordsTitleAnnotationsAndOutputSchema(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	direct := peers.StartServerEverything(t, ctx, peers.TransportStreamableHTTP) + "/mcp"
	imp := kubekit.NewImport(ns, "everything", direct)
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(20 * time.Second)
	got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), imp)
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))

	listed := peers.TSClient(t, ctx, peers.TSClientOptions{URL: direct, Declare: mcpclient.RelayableCapabilities()})
	byName := map[string]peers.Tool{}
	for _, tool := range listed.Tools {
		byName[tool.Name] = tool
	}
	for _, tool := range got.Status.Tools {
		want := byName[tool.Name]
		g.Expect(tool.Title).To(Equal(want.Title), "title of %s", tool.Name)
		g.Expect(tool.Clipped).To(BeEmpty())
		if len(want.Annotations) > 0 {
			g.Expect(tool.Annotations).NotTo(BeNil(), "annotations of %s", tool.Name)
			g.Expect(tool.Annotations.Raw).To(MatchJSON(want.Annotations), "annotations of %s", tool.Name)
		}
		if len(want.OutputSchema) > 0 {
			g.Expect(tool.OutputSchema).NotTo(BeNil(), "outputSchema of %s", tool.Name)
			g.Expect(tool.OutputSchema.Raw).To(MatchJSON(want.OutputSchema), "outputSchema of %s", tool.Name)
		} else {
			g.Expect(tool.OutputSchema).To(BeNil())
		}
		if strings.Contains(string(want.Raw), `"execution"`) {
			g.Expect(tool.OtherFields).NotTo(BeNil())
			g.Expect(string(tool.OtherFields.Raw)).To(ContainSubstring(`"execution"`))
		}
	}
	g.Expect(byName).To(HaveKey("get-structured-content"))
}

// The results of server-everything's tools reach the TypeScript SDK client through a
// gateway equal as parsed JSON to what the same client gets directly: structured
// content, an image, resource links, an embedded resource, annotated content.
func TestGatewayPassesResultsThroughAsTheRemoteSentThem(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	direct, gateway := everythingGateway(t, ctx, cantusv1alpha1.TransportStreamableHTTP)
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"get-structured-content", map[string]any{"location": "New York"}},
		{"get-tiny-image", nil},
		{"get-resource-links", map[string]any{"count": 2}},
		{"get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 1}},
		{"get-annotated-message", map[string]any{"messageType": "success", "includeImage": true}},
	} {
		want := peers.TSClient(t, ctx, peers.TSClientOptions{URL: direct, Call: call.tool, Args: call.args}).Result
		got := peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Call: "se_" + call.tool, Args: call.args}).Result
		g.Expect(want.IsError).To(BeFalse(), "%s directly: %s", call.tool, want.Raw)
		// A dynamic resource says when it was made: the two calls may fall in
		// different seconds.
		g.Expect(withoutClock(got.Raw)).To(MatchJSON(withoutClock(want.Raw)), "result of %s", call.tool)
		switch call.tool {
		case "get-structured-content":
			g.Expect(got.StructuredContent).NotTo(BeEmpty())
		case "get-tiny-image":
			g.Expect(got.Content).To(ContainElement(HaveField("Type", "image")))
		}
	}
}

// Through a gateway, the TypeScript SDK client gets as many progress notifications
// from server-everything's trigger-long-running-operation as it gets directly, under
// its own progress token, and then the result.
// Whether the remote is reached over streamable HTTP or SSE (where progress is routed
// by its token).
func TestGatewayForwardsProgressUnderTheClientsToken(t *testing.T) {
	for _, imported := range []cantusv1alpha1.ImportTransport{cantusv1alpha1.ImportTransportStreamableHTTP, cantusv1alpha1.ImportTransportSSE} {
		t.Run(string(imported), func(t *testing.T) { testProgressThroughGateway(t, imported) })
	}
}

func testProgressThroughGateway(t *testing.T, imported cantusv1alpha1.ImportTransport) {
	g := NewWithT(t)
	ctx := context.Background()
	direct, gateway := everythingGatewayOver(t, ctx, imported, cantusv1alpha1.TransportStreamableHTTP)
	args := map[string]any{"duration": 1, "steps": 4}
	want := peers.TSClient(t, ctx, peers.TSClientOptions{URL: direct, Transport: string(imported), Call: "trigger-long-running-operation", Args: args, Progress: true})
	got := peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Call: "se_trigger-long-running-operation", Args: args, Progress: true})
	g.Expect(want.Progress).NotTo(BeEmpty(), "server-everything reports its steps")
	// The SDK client reading server-everything's SSE stream directly sometimes
	// misses the last step (it arrives beside the result); the gateway passes on
	// every step it reads.
	g.Expect(len(got.Progress)).To(BeNumerically(">=", len(want.Progress)))
	for i := range want.Progress {
		g.Expect(got.Progress[i]).To(MatchJSON(want.Progress[i]), "progress %d", i)
	}
	g.Expect(got.Result).NotTo(BeNil())
	g.Expect(got.Result.Raw).To(MatchJSON(want.Result.Raw))
}

// notifyingRemote is a test peer (mcp-go, streamable HTTP): its tool work logs a
// message and reports progress, then works until cancelled, which it records.
func notifyingRemote(t *testing.T) (url string, cancelled <-chan string) {
	t.Helper()
	seen := make(chan string, 4)
	testEnded := testkit.Context(t, 5*time.Minute).Done()
	s := server.NewMCPServer("notifying", "1.0.0", server.WithLogging())
	s.AddTool(mcp.NewTool("work"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		srv := server.ServerFromContext(ctx)
		_ = srv.SendNotificationToClient(ctx, "notifications/message", map[string]any{"level": "info", "logger": "work", "data": "started working"})
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			_ = srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
				"progressToken": req.Params.Meta.ProgressToken, "progress": 1, "total": 10, "message": "one of ten"})
		}
		select {
		case <-ctx.Done():
			seen <- "cancelled: " + context.Cause(ctx).Error()
			return nil, ctx.Err()
		case <-testEnded: // never cancelled: the test fails on the call's answer
			return mcp.NewToolResultText("finished"), nil
		}
	})
	remote := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStateLess(true)))
	testkit.CloseAtEnd(t, remote)
	return remote.URL + "/mcp", seen
}

// A log message the remote sends during a call reaches the client through the gateway,
// and so does its progress; when the client cancels the call (notifications/cancelled),
// the remote is told and stops working.
func TestGatewayForwardsLogMessagesAndCancellation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	remoteURL, cancelled := notifyingRemote(t)
	g.Expect(k8sClient.Create(ctx, kubekit.NewImport(ns, "notifying", remoteURL))).To(Succeed())
	served := readyGateway(t, ctx, ns, "gateway", cantusv1alpha1.SkillImport{Name: "notifying", Prefix: "n_"})

	out := peers.TSClient(t, ctx, peers.TSClientOptions{URL: served.Status.URL, Call: "n_work", Progress: true, CancelAfterProgress: 1})
	g.Expect(out.Cancelled).To(BeTrue())
	g.Expect(out.Progress).To(HaveLen(1))
	g.Expect(out.Progress[0]).To(MatchJSON(`{"progress":1,"total":10,"message":"one of ten"}`))
	g.Expect(out.Logs).To(ContainElement(MatchJSON(`{"level":"info","logger":"work","data":"started working"}`)))
	g.Eventually(cancelled, 10*time.Second).Should(Receive(HavePrefix("cancelled")), "the remote was told the call is cancelled")
}

// clockTime is a time of day as server-everything writes it in dynamic resources.
var clockTime = regexp.MustCompile(`\b\d{1,2}:\d{2}:\d{2}( [AP]M)?`)

func withoutClock(raw json.RawMessage) string { return clockTime.ReplaceAllString(string(raw), "TIME") }
