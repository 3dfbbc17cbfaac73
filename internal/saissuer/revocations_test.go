package saissuer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// Deleting a service account and a pod on a real API server puts their UIDs among the
// revocations, and OnChange says so; a living one stays out.
func TestRevocationsSeeDeletedServiceAccountsAndPods(t *testing.T) {
	cfg := testenv.StartForTest(t)
	clientset := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx, watching := signalOnLog(ctx, "watching pod and service-account deletions")

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
	// before the informers' first list is never seen. Start logs that it watches once
	// the informers have synced.
	testkit.Receive(t, 20*time.Second, "the revocations to watch deletions", watching)
	if err := accounts.Delete(ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// No kubelet runs: a zero grace period removes the pod at once.
	if err := clientset.CoreV1().Pods("default").Delete(ctx, pod.Name, *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}

	revoked := func(uid types.UID) bool { return slices.Contains(r.remembered(), string(uid)) }
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("the deleted account %s and pod %s among the revocations", gone.UID, pod.UID), func() error {
		if !revoked(gone.UID) || !revoked(pod.UID) {
			return fmt.Errorf("revocations %v", r.remembered())
		}
		return nil
	})
	if revoked(living.UID) {
		t.Errorf("the living account %s is among the revocations", living.UID)
	}
	testkit.EventuallyTrue(t, 20*time.Second, "OnChange to be called", func() bool { return changes.Load() > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
}

// A deletion is forgotten once MaxTokenLifetime has passed: every token bound to it has
// expired by then, or was refused for living longer.
func TestRevocationsForgetAfterTheLongestTokenLifetime(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	r := &Revocations{MaxTokenLifetime: time.Hour, now: func() time.Time { return now }}
	r.remember(kindPod, "a", types.UID("old"))
	now = now.Add(40 * time.Minute)
	r.remember(kindServiceAccount, "a", types.UID("recent"))
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

// However fast pods are deleted, no more than MaxPodRevocations are remembered (they
// travel in every server's config); the oldest go first.
func TestRevocationsAreBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	r := &Revocations{MaxTokenLifetime: time.Hour, now: func() time.Time { return now }}
	for i := range MaxPodRevocations + 10 {
		now = now.Add(time.Millisecond)
		r.remember(kindPod, "a", types.UID(fmt.Sprintf("pod-%05d", i)))
	}
	uids := r.remembered()
	if len(uids) != MaxPodRevocations || uids[0] != "pod-00010" {
		t.Errorf("%d remembered starting at %s, want %d starting at pod-00010", len(uids), uids[0], MaxPodRevocations)
	}
	if _, dropped := r.takeChanged(); dropped != 10 {
		t.Errorf("dropped %d, want 10", dropped)
	}
}

// Pod churn, which any tenant can cause, never pushes a deleted service account out
// (issue 23, finding 6: with one shared bound of 5,000, 5,000 pod deletions evicted it
// and its stolen token worked again).
func TestPodChurnDoesNotEvictServiceAccountRevocations(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	r := &Revocations{MaxTokenLifetime: time.Hour, now: func() time.Time { return now }}
	r.remember(kindServiceAccount, "a", "stolen-account")
	for i := range 2 * MaxPodRevocations {
		now = now.Add(time.Millisecond)
		r.remember(kindPod, "a", types.UID(fmt.Sprintf("pod-%05d", i)))
	}
	got, err := r.Current(loaded(r))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.ServiceAccounts, []string{"stolen-account"}) {
		t.Errorf("service accounts after %d pod deletions = %v, want [stolen-account]", 2*MaxPodRevocations, got.ServiceAccounts)
	}
	if len(got.Pods) != MaxPodRevocations {
		t.Errorf("%d pods remembered, want %d", len(got.Pods), MaxPodRevocations)
	}
}

// Dropping a deletion fails closed: every token issued before the newest deletion
// dropped is refused from then on (the adapters get RefuseIssuedBefore), until no token
// that old can still be valid.
func TestDroppingRevocationsRefusesOlderTokens(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	now := start
	r := &Revocations{MaxTokenLifetime: time.Hour, now: func() time.Time { return now }}
	for i := range MaxServiceAccountRevocations + 3 {
		now = start.Add(time.Duration(i) * time.Second)
		r.remember(kindServiceAccount, "a", types.UID(fmt.Sprintf("account-%05d", i)))
	}
	got, err := r.Current(loaded(r))
	if err != nil {
		t.Fatal(err)
	}
	// account-00002, the newest of the three dropped, was deleted 2s after the start.
	if want := start.Add(2 * time.Second); !got.RefuseIssuedBefore["a"].Equal(want) {
		t.Errorf("RefuseIssuedBefore = %v, want %v in namespace a (when the newest dropped deletion was seen)", got.RefuseIssuedBefore, want)
	}
	now = start.Add(2*time.Second + time.Hour + time.Minute)
	r.forget()
	if got, _ := r.Current(loaded(r)); len(got.RefuseIssuedBefore) > 0 {
		t.Errorf("RefuseIssuedBefore = %v a lifetime later, want none: no token that old is valid", got.RefuseIssuedBefore)
	}
}

// loaded is a context for Current on a Revocations that recalls nothing (recalled once).
func loaded(r *Revocations) context.Context {
	select {
	case <-r.loadedChan():
	default:
		r.recall(context.Background())
	}
	return context.Background()
}

// A restarted operator remembers what it kept before, as no news, with the namespaces
// and times of the deletions; Current waits for that. What no operator kept (a time to
// come, or one older than any valid token) is not recalled.
func TestRevocationsRecallWhatWasKept(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	dropped := now.Add(-time.Minute)
	r := &Revocations{MaxTokenLifetime: time.Hour, Recall: func(context.Context) (State, error) {
		return State{
			ServiceAccounts:    []Deletion{{UID: "account-a", Namespace: "a", At: dropped.Unix()}},
			Pods:               []Deletion{{UID: "pod-b", Namespace: "b", At: dropped.Unix()}, {UID: "pod-expired", Namespace: "b", At: now.Add(-2 * time.Hour).Unix()}},
			RefuseIssuedBefore: map[string]time.Time{"a": dropped, "future": now.Add(time.Hour), "expired": now.Add(-2 * time.Hour)},
		}, nil
	}}
	early, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Current(early); err == nil {
		t.Fatal("Current answered before the earlier revocations were recalled")
	}
	r.recall(context.Background())
	got, err := r.Current(context.Background())
	if err != nil || !slices.Equal(got.ServiceAccounts, []string{"account-a"}) || !slices.Equal(got.Pods, []string{"pod-b"}) {
		t.Errorf("Current = %+v, %v; want account-a and pod-b", got, err)
	}
	if want := map[string]time.Time{"a": dropped}; !maps.EqualFunc(got.RefuseIssuedBefore, want, time.Time.Equal) {
		t.Errorf("RefuseIssuedBefore = %v, want %v", got.RefuseIssuedBefore, want)
	}
	if changed, _ := r.takeChanged(); changed {
		t.Error("what was kept was reported as a change")
	}
	if state := r.snapshot(); len(state.Pods) != 1 || state.Pods[0] != (Deletion{UID: "pod-b", Namespace: "b", At: dropped.Unix()}) {
		t.Errorf("kept again as %+v, want pod-b of namespace b deleted at %v", state.Pods, dropped)
	}
}

// Churn in one namespace, which any tenant can cause, drops only that namespace's
// deletions and refuses only that namespace's older tokens (issue 39, R12: the bound
// and the refusal were global, so one tenant made every server of the cluster refuse
// every token issued before its newest dropped deletion).
func TestChurnInOneNamespaceRefusesNoOtherNamespacesTokens(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	r := &Revocations{MaxTokenLifetime: time.Hour, now: func() time.Time { return now }}
	r.remember(kindPod, "victim", "victim-pod")
	r.remember(kindServiceAccount, "victim", "victim-account")
	for i := range 2 * MaxPodRevocations {
		now = now.Add(time.Millisecond)
		r.remember(kindPod, "churn", types.UID(fmt.Sprintf("pod-%05d", i)))
	}
	for i := range 2 * MaxServiceAccountRevocations {
		now = now.Add(time.Millisecond)
		r.remember(kindServiceAccount, "churn", types.UID(fmt.Sprintf("account-%05d", i)))
	}
	got, err := r.Current(loaded(r))
	if err != nil {
		t.Fatal(err)
	}
	if _, refused := got.RefuseIssuedBefore["victim"]; refused {
		t.Errorf("churn in namespace churn refuses the tokens of namespace victim issued before %v", got.RefuseIssuedBefore["victim"])
	}
	if _, refused := got.RefuseIssuedBefore["churn"]; !refused {
		t.Errorf("RefuseIssuedBefore = %v, want namespace churn refused: its deletions were dropped", got.RefuseIssuedBefore)
	}
	if !slices.Contains(got.Pods, "victim-pod") || !slices.Contains(got.ServiceAccounts, "victim-account") {
		t.Error("churn in another namespace pushed out namespace victim's deletions")
	}
	if len(got.Pods) != MaxPodRevocations || len(got.ServiceAccounts) != MaxServiceAccountRevocations {
		t.Errorf("%d pods and %d accounts remembered, want the bounds %d and %d", len(got.Pods), len(got.ServiceAccounts), MaxPodRevocations, MaxServiceAccountRevocations)
	}
}

// A recalled revocation that names a living service account was never a deletion (a UID
// is never reused): an edited ConfigMap planted it, and once the watches have listed the
// cluster it is dropped, while a recalled deletion stays.
func TestRecalledRevocationsOfLivingAccountsAreDropped(t *testing.T) {
	cfg := testenv.StartForTest(t)
	clientset := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	victim, err := clientset.CoreV1().ServiceAccounts("default").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "victim"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := &Revocations{Config: cfg, MaxTokenLifetime: time.Hour, Every: 50 * time.Millisecond,
		Recall: func(context.Context) (State, error) {
			at := time.Now().Unix()
			return State{ServiceAccounts: []Deletion{{UID: string(victim.UID), Namespace: "default", At: at}, {UID: "deleted-before-the-restart", Namespace: "default", At: at}}}, nil
		}}
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	// Dropped once the watches have synced.
	var got Revoked
	testkit.Eventually(t, 20*time.Second, "the living account "+string(victim.UID)+" dropped from the revocations", func() error {
		var err error
		if got, err = r.Current(ctx); err != nil {
			return err
		}
		if slices.Contains(got.ServiceAccounts, string(victim.UID)) {
			return fmt.Errorf("service accounts revoked = %v", got.ServiceAccounts)
		}
		return nil
	})
	if !slices.Contains(got.ServiceAccounts, "deleted-before-the-restart") {
		t.Errorf("service accounts revoked = %v, want the recalled deletion kept", got.ServiceAccounts)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
}

// signalOnLog returns ctx with a logger (for ctrl.LoggerFrom) that closes the returned
// channel when a message containing msg is logged.
func signalOnLog(ctx context.Context, msg string) (context.Context, <-chan struct{}) {
	logged := make(chan struct{})
	var once sync.Once
	logger := funcr.NewJSON(func(obj string) {
		if strings.Contains(obj, msg) {
			once.Do(func() { close(logged) })
		}
	}, funcr.Options{})
	return logr.NewContext(ctx, logger), logged
}
