package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// everythingGateway imports server-everything (streamable HTTP) and serves it through
// a gateway SkillServer with transport, its tools prefixed "se_"; it returns the
// remote's endpoint and the gateway's.
func everythingGateway(t *testing.T, ctx context.Context, transport cantusv1alpha1.Transport) (direct, gateway string) {
	t.Helper()
	g := NewWithT(t)
	ns := newNamespace(t)
	allowLoopback(t, ns)
	startGatewayManager(t)
	direct = peers.StartServerEverything(t, ctx, peers.TransportStreamableHTTP) + "/mcp"
	imp := newImport(ns, "everything", direct)
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(20 * time.Second)
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	gw := newSkillServer(ns, "gateway")
	gw.Spec.Transport = transport
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "everything", Prefix: "se_"}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	g.Eventually(getSkillServer(ctx, ns, "gateway"), 60*time.Second).Should(
		haveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
	got, _ := getSkillServer(ctx, ns, "gateway")()
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
// except the name, which carries the import's prefix. Both gateway transports.
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
	ns := newNamespace(t)
	allowLoopback(t, ns)
	direct := peers.StartServerEverything(t, ctx, peers.TransportStreamableHTTP) + "/mcp"
	imp := newImport(ns, "everything", direct)
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(20 * time.Second)
	got := reconcileImport(t, importReconciler(), imp)
	g.Expect(importCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))

	listed := peers.TSClient(t, ctx, peers.TSClientOptions{URL: direct})
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
		g.Expect(got.Raw).To(MatchJSON(want.Raw), "result of %s", call.tool)
		switch call.tool {
		case "get-structured-content":
			g.Expect(got.StructuredContent).NotTo(BeEmpty())
		case "get-tiny-image":
			g.Expect(got.Content).To(ContainElement(HaveField("Type", "image")))
		}
	}
}
