//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// impostorImage passes the adapter's probes and answers MCP with a tool nobody asked for
// (test/cluster/impostor; hack/cluster.sh builds and imports it).
const impostorImage = "cantus.local/impostor:1"

// Item 1: a SkillServer is Ready only once its pods answer MCP with its tools, as the
// operator itself checks through the Service. Running, probe-passing pods that serve
// other tools are not Ready, and the condition says what they serve.
func TestReadyOnlyWhenThePodsServeTheTools(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	// A pod image needs the policy (issue 23, finding 3).
	policy := &cantusv1alpha1.ToolSourcePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-impostor"},
		Spec: cantusv1alpha1.ToolSourcePolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Images:            []string{impostorImage},
		},
	}
	if err := k8s.Create(ctx, policy); err != nil {
		t.Fatalf("creating the ToolSourcePolicy: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), policy) })
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "impostor", Namespace: ns},
		Spec: cantusv1alpha1.SkillServerSpec{
			Skills: []cantusv1alpha1.Skill{templateSkill("search_book", "found: {{ .title }}")},
			Pod:    &cantusv1alpha1.PodOverrides{Image: impostorImage},
		},
	}
	if err := k8s.Create(ctx, ss); err != nil {
		t.Fatalf("creating the SkillServer: %v", err)
	}
	key := client.ObjectKeyFromObject(ss)

	cur := waitCondition(t, ctx, key, cantusv1alpha1.ConditionVerified, metav1.ConditionFalse, cantusv1alpha1.ReasonToolsMismatch)
	if c := apimeta.FindStatusCondition(cur.Status.Conditions, cantusv1alpha1.ConditionAvailable); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the impostor's pods should be available (they pass the probes): %+v", c)
	}
	ready := apimeta.FindStatusCondition(cur.Status.Conditions, cantusv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != cantusv1alpha1.ReasonToolsMismatch {
		t.Errorf("Ready = %+v, want False/ToolsMismatch", ready)
	}
	verified := apimeta.FindStatusCondition(cur.Status.Conditions, cantusv1alpha1.ConditionVerified)
	for _, want := range []string{"missing: search_book", "not expected: not_what_you_asked_for"} {
		if !strings.Contains(verified.Message, want) {
			t.Errorf("Verified message %q does not say %q", verified.Message, want)
		}
	}

	// The real adapter: verified and Ready.
	patch := []byte(`{"spec":{"pod":null}}`)
	if err := k8s.Patch(ctx, cur, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("dropping the image override: %v", err)
	}
	cur = waitReady(t, ctx, key)
	if c := apimeta.FindStatusCondition(cur.Status.Conditions, cantusv1alpha1.ConditionVerified); c == nil || c.Reason != cantusv1alpha1.ReasonToolsServed {
		t.Errorf("Verified = %+v, want True/ToolsServed", c)
	}
}

// Item 3: changing a skill rolls the pods with no failed call from 8 clients calling all
// along (the new pods become ready first; the old ones drain, then exit), and the served
// tools change.
func TestRolloutLosesNoCall(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	echo := templateSkill("echo", "v1 {{ .text }}")
	echo.InputSchema = &cantusv1alpha1.ToolInputSchema{Type: "object",
		Raw: []byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "rolling", Namespace: ns},
		Spec:       cantusv1alpha1.SkillServerSpec{Replicas: ptrTo(int32(2)), Skills: []cantusv1alpha1.Skill{echo}},
	}
	if err := k8s.Create(ctx, ss); err != nil {
		t.Fatalf("creating the SkillServer: %v", err)
	}
	key := client.ObjectKeyFromObject(ss)
	url := serviceURL(t, ctx, waitReady(t, ctx, key))

	const clients = 8
	var calls, failed, sawV2 atomic.Int64
	var firstErrors sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := newMCPClient(ctx, url)
			if err != nil {
				failed.Add(1)
				firstErrors.LoadOrStore(i, err.Error())
				return
			}
			defer c.Close()
			pace := time.NewTicker(20 * time.Millisecond) // a steady load, not a wait
			defer pace.Stop()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-pace.C:
				}
				got, err := callTool(ctx, c, "echo", map[string]any{"text": fmt.Sprintf("client %d call %d", i, n)})
				calls.Add(1)
				switch {
				case err != nil:
					failed.Add(1)
					firstErrors.LoadOrStore(i, err.Error())
				case strings.HasPrefix(got, "v2 "):
					sawV2.Add(1)
				}
			}
		}()
	}

	// Every client calls before the change, too.
	testkit.EventuallyTrue(t, readyTimeout, "the clients' first calls", func() bool { return calls.Load() >= clients*5 })
	var cur cantusv1alpha1.SkillServer
	if err := k8s.Get(ctx, key, &cur); err != nil {
		t.Fatal(err)
	}
	shout := templateSkill("shout", "{{ .text }}!")
	cur.Spec.Skills = []cantusv1alpha1.Skill{templateSkill("echo", "v2 {{ .text }}"), shout}
	cur.Spec.Skills[0].InputSchema = echo.InputSchema
	if err := k8s.Update(ctx, &cur); err != nil {
		t.Fatalf("changing the skills: %v", err)
	}
	after := waitReady(t, ctx, key)
	// Keep calling until only new pods are left behind the Service.
	waitOnlyNewPods(t, ctx, ns, "rolling", after)
	// And some calls more, which only the new pods can answer.
	afterRollout := calls.Load()
	testkit.EventuallyTrue(t, readyTimeout, "the clients' calls after the rollout", func() bool { return calls.Load() >= afterRollout+clients*5 })
	close(stop)
	wg.Wait()

	firstErrors.Range(func(k, v any) bool {
		t.Errorf("client %v: %v", k, v)
		return true
	})
	t.Logf("%d calls from %d clients during the rollout, %d failed, %d answered by the new config", calls.Load(), clients, failed.Load(), sawV2.Load())
	if failed.Load() != 0 {
		t.Errorf("%d of %d calls failed during the rollout, want 0", failed.Load(), calls.Load())
	}
	if sawV2.Load() == 0 {
		t.Error("no call was answered by the new config")
	}
	names := toolNames(t, ctx, url)
	if strings.Join(names, ",") != "echo,shout" {
		t.Errorf("tools after the rollout: %v, want echo and shout", names)
	}
}

// waitCondition waits until the SkillServer's condition has the status and reason.
func waitCondition(t *testing.T, ctx context.Context, key types.NamespacedName, condType string, status metav1.ConditionStatus, reason string) *cantusv1alpha1.SkillServer {
	t.Helper()
	var ss cantusv1alpha1.SkillServer
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, key, &ss); err != nil {
			return false, nil
		}
		c := apimeta.FindStatusCondition(ss.Status.Conditions, condType)
		return c != nil && c.Status == status && c.Reason == reason, nil
	})
	if err != nil {
		t.Fatalf("%s never had %s=%s/%s: conditions %+v", key, condType, status, reason, ss.Status.Conditions)
	}
	return &ss
}

// toolNames lists the tools the Service serves, sorted as the server lists them.
func toolNames(t *testing.T, ctx context.Context, url string) []string {
	t.Helper()
	res, err := mcpClient(t, ctx, url).ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list through %s: %v", url, err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

func ptrTo[T any](v T) *T { return &v }
