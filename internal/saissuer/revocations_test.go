package saissuer

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/cantus-dev/cantus-operator/internal/testenv"
)

// Deleting a service account and a pod on a real API server puts their UIDs among the
// revocations, and OnChange says so; a living one stays out.
func TestRevocationsSeeDeletedServiceAccountsAndPods(t *testing.T) {
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	clientset := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var changes atomic.Int32
	r := &Revocations{Config: cfg, MaxTokenLifetime: time.Hour, Every: 50 * time.Millisecond, OnChange: func() { changes.Add(1) }}
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()

	accounts := clientset.CoreV1().ServiceAccounts("default")
	gone, err := accounts.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	living, err := accounts.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "living"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := clientset.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Deleted only once the watches run, as in a manager that has started: a deletion
	// before the informers' first list is never seen.
	waitWatching(t, ctx, r, accounts)
	if err := accounts.Delete(ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// No kubelet runs: a zero grace period removes the pod at once.
	if err := clientset.CoreV1().Pods("default").Delete(ctx, pod.Name, *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(20 * time.Second)
	revoked := func(uid types.UID) bool { return slices.Contains(r.remembered(), string(uid)) }
	for !revoked(gone.UID) || !revoked(pod.UID) {
		if time.Now().After(deadline) {
			t.Fatalf("revocations %v, want the deleted account %s and pod %s", r.remembered(), gone.UID, pod.UID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if revoked(living.UID) {
		t.Errorf("the living account %s is among the revocations", living.UID)
	}
	for changes.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("OnChange was not called")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
}

// waitWatching returns once r sees deletions: it deletes canary accounts until one of
// them is remembered.
func waitWatching(t *testing.T, ctx context.Context, r *Revocations, accounts typedcorev1.ServiceAccountInterface) {
	t.Helper()
	for i := range 40 {
		canary, err := accounts.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("canary-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := accounts.Delete(ctx, canary.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			if slices.Contains(r.remembered(), string(canary.UID)) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Fatal("the revocations never saw a deletion")
}

// A deletion is forgotten once MaxTokenLifetime has passed: every token bound to it has
// expired by then, or was refused for living longer.
func TestRevocationsForgetAfterTheLongestTokenLifetime(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	r := &Revocations{MaxTokenLifetime: time.Hour, now: func() time.Time { return now }}
	r.remember(types.UID("old"))
	now = now.Add(40 * time.Minute)
	r.remember(types.UID("recent"))
	now = now.Add(30 * time.Minute)
	r.forget()
	if got := r.remembered(); !slices.Equal(got, []string{"recent"}) {
		t.Errorf("UIDs after 70 minutes = %v, want [recent]", got)
	}
	if changed, _ := r.takeChanged(); !changed {
		t.Error("the change was not reported")
	}
	if changed, _ := r.takeChanged(); changed {
		t.Error("a change is reported once")
	}
}

// However fast pods are deleted, no more than MaxRevocations are remembered (they travel
// in every server's config); the oldest go first.
func TestRevocationsAreBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	r := &Revocations{MaxTokenLifetime: time.Hour, now: func() time.Time { return now }}
	for i := range MaxRevocations + 10 {
		now = now.Add(time.Millisecond)
		r.remember(types.UID(fmt.Sprintf("pod-%05d", i)))
	}
	uids := r.remembered()
	if len(uids) != MaxRevocations || uids[0] != "pod-00010" {
		t.Errorf("%d remembered starting at %s, want %d starting at pod-00010", len(uids), uids[0], MaxRevocations)
	}
	if _, dropped := r.takeChanged(); dropped != 10 {
		t.Errorf("dropped %d, want 10", dropped)
	}
}

// A restarted operator remembers what the configs it rendered before already hold, as
// no news, and UIDs waits for that.
func TestRevocationsRecallWhatWasHandedOver(t *testing.T) {
	r := &Revocations{MaxTokenLifetime: time.Hour, Recall: func(context.Context) ([]string, error) {
		return []string{"pod-b", "account-a"}, nil
	}}
	early, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.UIDs(early); err == nil {
		t.Fatal("UIDs answered before the earlier revocations were recalled")
	}
	r.recall(context.Background())
	got, err := r.UIDs(context.Background())
	if err != nil || !slices.Equal(got, []string{"account-a", "pod-b"}) {
		t.Errorf("UIDs = %v, %v; want [account-a pod-b]", got, err)
	}
	if changed, _ := r.takeChanged(); changed {
		t.Error("what the configs already hold was reported as a change")
	}
}
