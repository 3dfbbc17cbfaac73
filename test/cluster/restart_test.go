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

	settled := settledNamespaces(t, ctx)
	if !settled[ns] {
		t.Fatalf("namespace %s is not settled before the restart", ns)
	}
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
		if !settled[ev.ObjectRef.Namespace] {
			continue // objects still being set up by a test running beside this one
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

// settledNamespaces are the namespaces whose SkillServers and RemoteToolImports are all
// Ready for their latest spec: nothing there is left for the operator to write.
func settledNamespaces(t *testing.T, ctx context.Context) map[string]bool {
	t.Helper()
	settled := map[string]bool{}
	unsettled := map[string]bool{}
	note := func(ns string, conds []metav1.Condition, generation int64) {
		c := apimeta.FindStatusCondition(conds, cantusv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != generation {
			unsettled[ns] = true
		}
		settled[ns] = true
	}
	var servers cantusv1alpha1.SkillServerList
	var imports cantusv1alpha1.RemoteToolImportList
	if err := k8s.List(ctx, &servers); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(ctx, &imports); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers.Items {
		note(s.Namespace, s.Status.Conditions, s.Generation)
	}
	for _, i := range imports.Items {
		note(i.Namespace, i.Status.Conditions, i.Generation)
	}
	for ns := range unsettled {
		delete(settled, ns)
	}
	t.Logf("%d settled namespaces, %d still changing", len(settled), len(unsettled))
	return settled
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
