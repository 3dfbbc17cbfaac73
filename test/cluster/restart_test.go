//go:build cluster

package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// Item 6: the operator pod is deleted and comes back; it rewrites no child object (the
// audit log counts its writes) and the statuses stay Ready.
func TestOperatorRestartRewritesNothing(t *testing.T) {
	ctx := testContext(t)
	ns := restrictedNamespace(t, ctx)
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "steady", Namespace: ns},
		Spec: cantusv1alpha1.SkillServerSpec{
			Skills: []cantusv1alpha1.Skill{templateSkill("search_book", "found: {{ .title }}")},
			Memory: &cantusv1alpha1.MemorySpec{},
		},
	}
	if err := k8s.Create(ctx, ss); err != nil {
		t.Fatalf("creating the SkillServer: %v", err)
	}
	key := client.ObjectKeyFromObject(ss)
	before := waitReady(t, ctx, key)
	readyBefore := apimeta.FindStatusCondition(before.Status.Conditions, cantusv1alpha1.ConditionReady)

	old := operatorPod(t, ctx, "")
	restartedAt := time.Now()
	if err := k8s.Delete(ctx, old); err != nil {
		t.Fatalf("deleting the operator pod: %v", err)
	}
	leader := operatorPod(t, ctx, old.Name)
	waitLeader(t, ctx, leader.Name)
	// The new leader's caches sync and every object is reconciled once; give it time.
	time.Sleep(20 * time.Second)

	var writes []string
	for _, ev := range managerRequests(t) {
		if ev.StageTimestamp.Before(restartedAt) || !slices.Contains([]string{"create", "update", "patch", "delete"}, ev.Verb) {
			continue
		}
		if ev.ObjectRef.Resource == "leases" || ev.ObjectRef.Resource == "events" {
			continue // leader election and the restart's own events
		}
		writes = append(writes, ev.StageTimestamp.Format(time.RFC3339)+" "+ev.Verb+" "+ev.RequestURI)
	}
	if len(writes) > 0 {
		t.Errorf("after the restart the operator wrote %d times, want 0: %v", len(writes), writes)
	}

	var after cantusv1alpha1.SkillServer
	if err := k8s.Get(ctx, key, &after); err != nil {
		t.Fatal(err)
	}
	readyAfter := apimeta.FindStatusCondition(after.Status.Conditions, cantusv1alpha1.ConditionReady)
	if readyAfter == nil || readyAfter.Status != metav1.ConditionTrue || !readyAfter.LastTransitionTime.Equal(&readyBefore.LastTransitionTime) {
		t.Errorf("Ready after the restart = %+v, want it True since %s", readyAfter, readyBefore.LastTransitionTime)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the SkillServer was written during the restart (resourceVersion %s -> %s)", before.ResourceVersion, after.ResourceVersion)
	}
}

// operatorPod waits for a ready operator pod other than notName.
func operatorPod(t *testing.T, ctx context.Context, notName string) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace("cantus-system"), client.MatchingLabels{"app.kubernetes.io/name": "cantus-operator"}); err != nil {
			return false, nil
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Name != notName && p.DeletionTimestamp == nil && podReady(p) {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no ready operator pod (other than %q): %v", notName, err)
	}
	return found
}

// waitLeader waits until the pod holds the operator's leader election lease.
func waitLeader(t *testing.T, ctx context.Context, pod string) {
	t.Helper()
	var lease coordinationv1.Lease
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: "cantus-system", Name: "cantus-operator.cantus.dev"}, &lease); err != nil {
			return false, nil
		}
		h := lease.Spec.HolderIdentity
		return h != nil && len(*h) >= len(pod) && (*h)[:len(pod)] == pod, nil
	})
	if err != nil {
		t.Fatalf("%s never became the leader: %v", pod, err)
	}
}
