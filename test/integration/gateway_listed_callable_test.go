package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// The tools server-everything registers only for clients that declare a capability
// (it asks their callers for it), by the capability.
var everythingCapabilityTools = map[string]string{
	"trigger-elicitation-request": "elicitation",
	"trigger-sampling-request":    "sampling",
	"get-roots-list":              "roots",
}

// listedNames are the names of the tools the TypeScript SDK client, declaring the
// capabilities named in declare, is listed at url.
func listedNames(t *testing.T, ctx context.Context, url string, declare ...string) []string {
	t.Helper()
	var names []string
	for _, tool := range peers.TSClient(t, ctx, peers.TSClientOptions{URL: url, Declare: declare}).Tools {
		names = append(names, tool.Name)
	}
	return names
}

// Listed means callable: the import of server-everything records which of its tools
// it lists only to clients declaring elicitation, sampling or roots; a gateway whose
// import relays none of them lists none of those tools (it could not serve them: the
// remote would ask the caller for what the gateway does not pass on) and names them in
// ImportedToolsServable and an event, while a gateway relaying all three lists them to
// callers that declare the capabilities (as server-everything does) and serves a call
// of one.
func TestGatewayListsOnlyImportedToolsItCanServe(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	direct := peers.StartServerEverything(t, ctx, peers.TransportStreamableHTTP) + "/mcp"
	imp := kubekit.NewImport(ns, "everything", direct)
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(20 * time.Second)
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())

	plain := kubekit.NewSkillServer(ns, "plain")
	plain.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "everything", Prefix: "se_"}}
	relaying := kubekit.NewSkillServer(ns, "relaying")
	relaying.Spec.Stateless = ptr.To(false)
	relaying.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "everything", Prefix: "se_",
		Relay: []cantusv1alpha1.RelayedRequest{cantusv1alpha1.RelayElicitation, cantusv1alpha1.RelaySampling, cantusv1alpha1.RelayRoots}}}
	for _, ss := range []*cantusv1alpha1.SkillServer{plain, relaying} {
		g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
		g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, ss.Name), 60*time.Second).Should(
			kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled), func() string {
				got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, ss.Name)()
				return fmt.Sprintf("%s: %+v", ss.Name, got.Status.Conditions)
			})
	}

	got := &cantusv1alpha1.RemoteToolImport{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "everything"}, got)).To(Succeed())
	for _, tool := range got.Status.Tools {
		if capability, ok := everythingCapabilityTools[tool.Name]; ok {
			g.Expect(tool.RequiresCapabilities).To(Equal([]string{capability}), "the import records what %s needs", tool.Name)
		} else {
			g.Expect(tool.RequiresCapabilities).To(BeEmpty(), "%s needs nothing", tool.Name)
		}
	}

	served, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "plain")()
	listed := listedNames(t, ctx, served.Status.URL)
	g.Expect(listed).NotTo(BeEmpty())
	g.Expect(listed).To(ConsistOf(prefixed("se_", listedNames(t, ctx, direct))),
		"a gateway relaying nothing lists what server-everything lists to a client declaring nothing")
	g.Expect(served).To(kubekit.HaveCondition(cantusv1alpha1.ConditionImportedToolsServable, metav1.ConditionTrue, cantusv1alpha1.ReasonCapabilitiesNotRelayed))
	message := kubekit.ConditionMessage(served, cantusv1alpha1.ConditionImportedToolsServable)
	for name := range everythingCapabilityTools {
		g.Expect(listed).NotTo(ContainElement("se_"+name), "%s is not listed", name)
		g.Expect(message).To(ContainSubstring(`"se_`+name+`"`), "ImportedToolsServable names %s", name)
	}
	g.Eventually(func() []string { return eventNotes(ctx, ns, cantusv1alpha1.ReasonCapabilitiesNotRelayed) }).Should(
		ContainElement(ContainSubstring("se_trigger-sampling-request")))

	served, _ = kubekit.GetSkillServer(ctx, k8sClient, ns, "relaying")()
	listed = listedNames(t, ctx, served.Status.URL, mcpclient.RelayableCapabilities()...)
	for name := range everythingCapabilityTools {
		g.Expect(listed).To(ContainElement("se_"+name), "a gateway relaying %s lists %s to a caller declaring it", everythingCapabilityTools[name], name)
	}
	g.Expect(listedNames(t, ctx, served.Status.URL)).To(ConsistOf(prefixed("se_", listedNames(t, ctx, direct))),
		"to a caller declaring nothing, the relaying gateway lists what server-everything lists to it")
	g.Expect(served).To(kubekit.HaveCondition(cantusv1alpha1.ConditionImportedToolsServable, metav1.ConditionTrue, cantusv1alpha1.ReasonAllServable))
	call := peers.TSClient(t, ctx, peers.TSClientOptions{URL: served.Status.URL, Call: "se_trigger-elicitation-request",
		Elicit: map[string]any{"color": "red"}})
	g.Expect(call.Result).NotTo(BeNil())
	g.Expect(call.Result.IsError).To(BeFalse(), "a relaying gateway serves the tool it lists: %+v", call.Result)
}

// A stateless gateway (the default) of one replica asks its 2025-11-25 callers what
// server-everything asks, on their calls' streams: it lists the tools that need it to
// a caller declaring the capabilities, and serves a call of one. Scaled to two
// replicas, the answer could reach another pod: the operator says so in
// ImportedToolsServable, and the adapter, told in place, lists those tools no more.
func TestStatelessGatewayAsksOlderCallersOnlyWithOneReplica(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	imp := kubekit.NewImport(ns, "everything", peers.StartServerEverything(t, ctx, peers.TransportStreamableHTTP)+"/mcp")
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(20 * time.Second)
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	gw := kubekit.NewSkillServer(ns, "asking")
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "everything", Prefix: "se_",
		Relay: []cantusv1alpha1.RelayedRequest{cantusv1alpha1.RelayElicitation, cantusv1alpha1.RelaySampling, cantusv1alpha1.RelayRoots}}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, gw.Name), 60*time.Second).Should(
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
	served, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, gw.Name)()
	g.Expect(served.Spec.StatelessOrDefault()).To(BeTrue())

	g.Expect(listedNames(t, ctx, served.Status.URL, mcpclient.RelayableCapabilities()...)).To(ContainElement("se_trigger-elicitation-request"))
	call := peers.TSClient(t, ctx, peers.TSClientOptions{URL: served.Status.URL, Call: "se_trigger-elicitation-request",
		Elicit: map[string]any{"color": "red"}})
	g.Expect(call.Result).NotTo(BeNil())
	g.Expect(call.Result.IsError).To(BeFalse(), "a stateless gateway of one replica serves the tool: %+v", call.Result)
	g.Expect(call.Asked).To(HaveLen(1), "the caller is asked once, on its call's stream")

	g.Expect(kubekit.Update(ctx, k8sClient, served, func(ss *cantusv1alpha1.SkillServer) { ss.Spec.Replicas = ptr.To(int32(2)) })).To(Succeed())
	g.Eventually(func() string {
		got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, gw.Name)()
		return kubekit.ConditionMessage(got, cantusv1alpha1.ConditionImportedToolsServable)
	}, 30*time.Second).Should(ContainSubstring("stateless with 2 replicas"))
	g.Eventually(func() []string {
		return listedNames(t, ctx, served.Status.URL, mcpclient.RelayableCapabilities()...)
	}, 30*time.Second).ShouldNot(ContainElement("se_trigger-elicitation-request"), "a 2025-11-25 caller is listed what the gateway can no longer ask it for")
}

// prefixed are names with prefix.
func prefixed(prefix string, names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, prefix+n)
	}
	return slices.Clip(out)
}
