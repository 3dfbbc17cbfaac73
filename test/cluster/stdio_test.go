//go:build cluster

package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// The image hack/test-images.sh builds and imports: Node and server-everything, uid 65532.
const (
	everythingImage = "cantus.local/everything:1"
	everythingEntry = "/opt/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)

// Item 5: a stdio import under the kubernetes runtime. server-everything runs over stdio
// in a locally built image behind the bridge (whose init container copies /adapter in
// from the operator image); the import becomes Ready with the server's tools, a gateway
// SkillServer importing it becomes Ready and Verified, and `echo` called through the
// gateway's Service answers from server-everything. Both pods are admitted under the
// restricted PodSecurity profile the namespace enforces.
func TestStdioImportServerEverything(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	allowEverythingIn(t, ctx, ns)

	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Name: "everything", Namespace: ns},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStdio,
			Stdio: &cantusv1alpha1.StdioSource{
				Image:   everythingImage,
				Command: []string{"node", everythingEntry},
				Args:    []string{"stdio"},
			},
		},
	}
	if err := k8s.Create(ctx, imp); err != nil {
		t.Fatalf("creating the RemoteToolImport: %v", err)
	}
	imp = waitImportReady(t, ctx, client.ObjectKeyFromObject(imp))
	tools := discoveredToolNames(imp)
	for _, want := range []string{"echo", "get-sum"} {
		if !slices.Contains(tools, want) {
			t.Errorf("server-everything's tool %q is not among the discovered tools %v", want, tools)
		}
	}
	if imp.Status.ServerInfo == nil || !strings.Contains(imp.Status.ServerInfo.Name, "everything") {
		t.Errorf("serverInfo %+v does not name server-everything", imp.Status.ServerInfo)
	}
	t.Logf("import Ready with %d tools from %+v through %s", len(tools), imp.Status.ServerInfo, imp.Status.BridgeURL)
	requireBridgePodCopiedTheAdapter(t, ctx, imp)
	// The bridge URL names the Service's cluster IP, which kube-proxy routes from this host;
	// the bridge serves only callers with its token.
	bridge, err := bridgeClient(ctx, imp.Status.BridgeURL, bridgeToken(t, ctx, imp))
	if err != nil {
		t.Fatalf("a client of the bridge: %v", err)
	}
	t.Cleanup(func() { _ = bridge.Close() })
	direct, err := callTool(ctx, bridge, "echo", map[string]any{"message": "to the bridge"})
	if err != nil || direct != "Echo: to the bridge" {
		t.Errorf("echo through the bridge's Service %s: %q, %v", imp.Status.BridgeURL, direct, err)
	}

	gw := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "gateway", Namespace: ns},
		Spec: cantusv1alpha1.SkillServerSpec{
			Imports: []cantusv1alpha1.SkillImport{{Name: imp.Name}},
		},
	}
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatalf("creating the gateway SkillServer: %v", err)
	}
	gw = waitReady(t, ctx, client.ObjectKeyFromObject(gw))
	if c := apimeta.FindStatusCondition(gw.Status.Conditions, cantusv1alpha1.ConditionVerified); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the gateway is Ready but not Verified: %+v", c)
	}

	c := mcpClient(t, ctx, serviceURL(t, ctx, gw))
	got, err := callTool(ctx, c, "echo", map[string]any{"message": "through a real pod"})
	if err != nil || got != "Echo: through a real pod" {
		t.Errorf("echo through the gateway's Service: %q, %v; want %q", got, err, "Echo: through a real pod")
	}
	sum, err := callTool(ctx, c, "get-sum", map[string]any{"a": 2, "b": 3})
	if err != nil || !strings.Contains(sum, "5") {
		t.Errorf("get-sum through the gateway's Service: %q, %v; want the sum 5", sum, err)
	}

	requireAdmittedUnderRestricted(t, ctx, ns)
}

// allowEverythingIn creates a ToolSourcePolicy that allows exactly the test image and the
// node command, for this namespace only.
func allowEverythingIn(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	p := &cantusv1alpha1.ToolSourcePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-everything"},
		Spec: cantusv1alpha1.ToolSourcePolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Images:            []string{everythingImage},
			Commands:          []string{"node"},
		},
	}
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatalf("creating the ToolSourcePolicy: %v", err)
	}
}

func waitImportReady(t *testing.T, ctx context.Context, key types.NamespacedName) *cantusv1alpha1.RemoteToolImport {
	t.Helper()
	var imp cantusv1alpha1.RemoteToolImport
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, key, &imp); err != nil {
			return false, nil
		}
		c := apimeta.FindStatusCondition(imp.Status.Conditions, cantusv1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == imp.Generation, nil
	})
	if err != nil {
		t.Fatalf("remotetoolimport %s not Ready: conditions %+v", key, imp.Status.Conditions)
	}
	return &imp
}

func discoveredToolNames(imp *cantusv1alpha1.RemoteToolImport) []string {
	names := make([]string, 0, len(imp.Status.Tools))
	for _, tool := range imp.Status.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// requireBridgePodCopiedTheAdapter checks the bridge pod ran the way the kubernetes
// runtime means it to: the init container (operator image) finished, and the main
// container runs the import's image with the copied adapter in front of its command.
func requireBridgePodCopiedTheAdapter(t *testing.T, ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(imp.Namespace),
		client.MatchingLabels{workload.LabelInstance: workload.BridgeName(imp)}); err != nil {
		t.Fatal(err)
	}
	ready := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil || !podReady(pod) {
			continue
		}
		ready++
		if len(pod.Status.InitContainerStatuses) != 1 {
			t.Errorf("bridge pod %s: init containers %+v, want the adapter install", pod.Name, pod.Status.InitContainerStatuses)
			continue
		}
		if term := pod.Status.InitContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 0 {
			t.Errorf("bridge pod %s: the adapter install did not finish cleanly: %+v", pod.Name, pod.Status.InitContainerStatuses[0].State)
		}
		main := pod.Spec.Containers[0]
		if main.Image != everythingImage || len(main.Command) == 0 || main.Command[0] != "/cantus/adapter" {
			t.Errorf("bridge pod %s runs %s with %v, want %s behind /cantus/adapter", pod.Name, main.Image, main.Command, everythingImage)
		}
	}
	if ready != 1 {
		t.Errorf("%d ready bridge pods, want 1", ready)
	}
}

// requireAdmittedUnderRestricted: the namespace enforces the restricted profile, so the
// bridge and gateway pods that answered above were admitted under it (the whole-run check
// in zz_whole_run_test.go also looks for refused creations here).
func requireAdmittedUnderRestricted(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	var namespace corev1.Namespace
	if err := k8s.Get(ctx, types.NamespacedName{Name: ns}, &namespace); err != nil {
		t.Fatal(err)
	}
	if level := namespace.Labels["pod-security.kubernetes.io/enforce"]; level != "restricted" {
		t.Errorf("namespace %s enforces %q, want restricted", ns, level)
	}
}
