//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// Item 2: `kubectl scale skillserver/x --replicas=3` gives three pods, and calls through
// the Service succeed. The pod that served before keeps serving: the replica count
// reaches the adapters' config (a stateless gateway asks its 2025-11-25 callers only
// with one), which they apply in place, and scaling rolls no pod.
func TestScaleToThreeReplicas(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: ns},
		Spec: cantusv1alpha1.SkillServerSpec{
			Skills: []cantusv1alpha1.Skill{templateSkill("echo", "echo: {{ .text }}")},
		},
	}
	ss.Spec.Skills[0].InputSchema = &cantusv1alpha1.ToolInputSchema{Type: "object",
		Raw: []byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}
	if err := k8s.Create(ctx, ss); err != nil {
		t.Fatalf("creating the SkillServer: %v", err)
	}
	key := client.ObjectKeyFromObject(ss)
	waitReady(t, ctx, key)
	var before corev1.PodList
	if err := k8s.List(ctx, &before, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": "scaled"}); err != nil || len(before.Items) != 1 {
		t.Fatalf("want one pod before scaling, got %d (%v)", len(before.Items), err)
	}

	// What `kubectl scale` does: a write to the scale subresource.
	scale := &autoscalingScale{Replicas: 3}
	if err := k8s.SubResource("scale").Patch(ctx, ss, client.RawPatch(types.MergePatchType, scale.patch())); err != nil {
		t.Fatalf("scaling to 3: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		var cur cantusv1alpha1.SkillServer
		if err := k8s.Get(ctx, key, &cur); err != nil {
			return false, nil
		}
		return cur.Status.ReadyReplicas == 3, nil
	})
	if err != nil {
		t.Fatalf("three ready adapter pods never reported: %v", err)
	}
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": "scaled"}); err != nil {
		t.Fatal(err)
	}
	if running := runningPods(pods.Items); running != 3 {
		t.Errorf("%d running pods, want 3", running)
	}
	if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.UID == before.Items[0].UID }) {
		t.Errorf("the pod that served before scaling (%s) is gone: scaling rolled the pods", before.Items[0].Name)
	}

	cur := waitReady(t, ctx, key)
	url := serviceURL(t, ctx, cur)
	for i := range 12 {
		// A new client each time, so the Service spreads the calls over the pods.
		c := mcpClient(t, ctx, url)
		want := fmt.Sprintf("echo: call %d", i)
		got, err := callTool(ctx, c, "echo", map[string]any{"text": fmt.Sprintf("call %d", i)})
		if err != nil || got != want {
			t.Errorf("call %d through the Service: %q, %v; want %q", i, got, err, want)
		}
		_ = c.Close()
	}
}

// Item 4: a file created through the memory tool survives `kubectl delete pod`, and the
// new pod serves it.
func TestMemorySurvivesPodDelete(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "notes", Namespace: ns},
		Spec:       cantusv1alpha1.SkillServerSpec{Memory: &cantusv1alpha1.MemorySpec{}},
	}
	if err := k8s.Create(ctx, ss); err != nil {
		t.Fatalf("creating the SkillServer: %v", err)
	}
	key := client.ObjectKeyFromObject(ss)
	url := serviceURL(t, ctx, waitReady(t, ctx, key))

	c := mcpClient(t, ctx, url)
	if _, err := callTool(ctx, c, "memory", map[string]any{
		"command": "create", "path": "/memories/kept.md", "file_text": "kept across pods\n",
	}); err != nil {
		t.Fatalf("creating the file (the pod writes as uid 65532 through the fsGroup): %v", err)
	}
	_ = c.Close()

	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": "notes"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("want one pod, got %d (%v)", len(pods.Items), err)
	}
	old := pods.Items[0]
	if err := k8s.Delete(ctx, &old); err != nil {
		t.Fatalf("deleting the pod: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		var now corev1.PodList
		if err := k8s.List(ctx, &now, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": "notes"}); err != nil {
			return false, nil
		}
		for _, p := range now.Items {
			if p.UID != old.UID && podReady(&p) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no new ready pod after the delete: %v", err)
	}
	// The old pod may still be draining; wait until the Service only has the new one.
	waitReady(t, ctx, key)
	got, err := callTool(ctx, mcpClient(t, ctx, url), "memory", map[string]any{"command": "view", "path": "/memories/kept.md"})
	if err != nil || !strings.Contains(got, "kept across pods") {
		t.Errorf("the new pod's view of the file: %q, %v", got, err)
	}
}

type autoscalingScale struct{ Replicas int32 }

func (s autoscalingScale) patch() []byte {
	return fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, s.Replicas)
}

func runningPods(pods []corev1.Pod) int {
	n := 0
	for i := range pods {
		if pods[i].DeletionTimestamp == nil && podReady(&pods[i]) {
			n++
		}
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
