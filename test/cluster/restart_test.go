//go:build cluster

package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/catalog"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// Issue 26 item 3: the operator runs two replicas with leader election. The leader's
// manager is killed with SIGKILL (no graceful release of the lease) while clients call a
// SkillServer through its Service and ask the catalog; the other replica becomes leader
// within the lease duration, a spec change made in the gap is applied after it, no call
// fails, the catalog keeps answering, and no settled object is rewritten (the audit log
// counts the operator's writes).
func TestLeaderFailoverRewritesNothingAndDropsNoCall(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	steady := newFailoverServer(t, ctx, ns, "steady")
	changed := newFailoverServer(t, ctx, ns, "changed")
	before := waitReady(t, ctx, client.ObjectKeyFromObject(steady))
	readyBefore := apimeta.FindStatusCondition(before.Status.Conditions, cantusv1alpha1.ConditionReady)
	changedBefore := waitReady(t, ctx, client.ObjectKeyFromObject(changed))
	calls := startCalling(t, ctx, serviceURL(t, ctx, before))
	catalogAsks := startAskingTheCatalog(t, ctx, ns)

	settled := settledNamespaces(t, ctx)
	if !settled[ns] {
		t.Fatalf("namespace %s is not settled before the failover", ns)
	}
	leader, holder := leaderPod(t, ctx)
	standby := operatorPod(t, ctx, leader.Name)
	// Calls and catalog requests before the kill too.
	testkit.EventuallyTrue(t, readyTimeout, "tool calls and catalog requests before the kill", func() bool {
		return calls.made.Load() >= 10 && catalogAsks.made.Load() >= 5
	})
	killedAt := time.Now()
	killManagerContainer(t, leader)

	// In the gap: a spec change the new leader must apply.
	changedBefore.Spec.Skills = append(changedBefore.Spec.Skills, templateSkill("added_in_gap", "added"))
	if err := k8s.Update(ctx, changedBefore); err != nil {
		t.Fatalf("changing %s in the gap: %v", changed.Name, err)
	}
	newHolder := waitNewLeader(t, ctx, holder)
	tookOver := time.Since(killedAt)
	after := waitReady(t, ctx, client.ObjectKeyFromObject(changed))
	if !slices.ContainsFunc(after.Status.Tools, func(tool cantusv1alpha1.ServedTool) bool { return tool.Name == "added_in_gap" }) {
		t.Errorf("the change made in the gap was not applied: tools %+v", after.Status.Tools)
	}
	// The new leader's caches sync and every object is reconciled once.
	newLeader, _ := leaderPod(t, ctx)
	t.Logf("the new leader: %s", waitReconciledEverything(t, ctx, newLeader, "cantus-operator-metrics-reader"))
	made, failed := calls.stop()
	asked, unanswered := catalogAsks.stop()
	t.Logf("failover: %s (pod %s) killed, %s leads after %s (standby was %s); %d tool calls through the Service, %d failed; %d catalog requests, %d unanswered",
		holder, leader.Name, newHolder, tookOver.Round(100*time.Millisecond), standby.Name, made, failed, asked, unanswered)
	if failed > 0 {
		t.Errorf("%d of %d tool calls failed during the failover, want 0", failed, made)
	}
	if unanswered > 0 {
		t.Errorf("%d of %d catalog requests were not answered during the failover, want 0", unanswered, asked)
	}
	if made == 0 || asked == 0 {
		t.Errorf("the clients made %d calls and %d catalog requests, want some of each", made, asked)
	}

	if writes := writesToSettledObjects(managerRequests(t), killedAt, settled, changed); len(writes) > 0 {
		t.Errorf("after the failover the operator wrote %d times to settled objects, want 0: %v", len(writes), writes)
	}
	var steadyAfter cantusv1alpha1.SkillServer
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(steady), &steadyAfter); err != nil {
		t.Fatal(err)
	}
	readyAfter := apimeta.FindStatusCondition(steadyAfter.Status.Conditions, cantusv1alpha1.ConditionReady)
	if readyAfter == nil || readyAfter.Status != metav1.ConditionTrue || !readyAfter.LastTransitionTime.Equal(&readyBefore.LastTransitionTime) {
		t.Errorf("Ready after the failover = %+v, want it True since %s", readyAfter, readyBefore.LastTransitionTime)
	}
	if steadyAfter.ResourceVersion != before.ResourceVersion {
		t.Errorf("the settled SkillServer was written during the failover (resourceVersion %s -> %s)", before.ResourceVersion, steadyAfter.ResourceVersion)
	}
}

func newFailoverServer(t *testing.T, ctx context.Context, ns, name string) *cantusv1alpha1.SkillServer {
	t.Helper()
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: cantusv1alpha1.SkillServerSpec{
			Skills: []cantusv1alpha1.Skill{templateSkill("search_book", "found: {{ .title }}")},
		},
	}
	if err := k8s.Create(ctx, ss); err != nil {
		t.Fatalf("creating the SkillServer %s: %v", name, err)
	}
	return ss
}

// writesToSettledObjects lists the writes among an operator's requests since a time to
// objects in settled namespaces, leaving out leader election, events, and the object the
// test changed (nil: none).
func writesToSettledObjects(requests []auditEvent, since time.Time, settled map[string]bool, changed *cantusv1alpha1.SkillServer) []string {
	var writes []string
	for _, ev := range requests {
		if ev.StageTimestamp.Before(since) || !slices.Contains([]string{"create", "update", "patch", "delete"}, ev.Verb) {
			continue
		}
		if ev.ObjectRef.Resource == "leases" || ev.ObjectRef.Resource == "events" {
			continue
		}
		if !settled[ev.ObjectRef.Namespace] {
			continue // objects still being set up by a test running beside this one
		}
		if changed != nil && ev.ObjectRef.Namespace == changed.Namespace && strings.HasPrefix(ev.ObjectRef.Name, changed.Name) {
			continue // the SkillServer changed in the gap and its children
		}
		writes = append(writes, ev.StageTimestamp.Format(time.RFC3339)+" "+ev.Verb+" "+ev.RequestURI)
	}
	return writes
}

// counter counts what a background client did until stop is called.
type counter struct {
	made, failed atomic.Int64
	cancel       context.CancelFunc
	done         chan struct{}
}

func (c *counter) stop() (made, failed int64) {
	c.cancel()
	<-c.done
	return c.made.Load(), c.failed.Load()
}

func runCounting(ctx context.Context, every time.Duration, once func(context.Context) error, logf func(string, ...any)) *counter {
	ctx, cancel := context.WithCancel(ctx)
	c := &counter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		pace := time.NewTicker(every)
		defer pace.Stop()
		for ctx.Err() == nil {
			err := once(ctx)
			if ctx.Err() != nil {
				return // stopped mid-request: not a failure of the server
			}
			c.made.Add(1)
			if err != nil {
				c.failed.Add(1)
				logf("%s: %v", time.Now().Format(time.RFC3339Nano), err)
			}
			select { // a steady load, not a wait
			case <-ctx.Done():
			case <-pace.C:
			}
		}
	}()
	return c
}

// startCalling calls a tool of the server at url every 50 ms on one MCP session.
func startCalling(t *testing.T, ctx context.Context, url string) *counter {
	c := mcpClient(t, ctx, url)
	return runCounting(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		_, err := callTool(ctx, c, "search_book", map[string]any{"title": "Dune"})
		return err
	}, t.Logf)
}

// startAskingTheCatalog lists the catalog's servers through its Service every 100 ms, as
// the namespace's default service account with a token for the catalog's audience. A
// request refused at connect reached the replica whose container had just died, before
// the Service dropped it; kube-proxy picks a replica at random for each connection, so
// the client retries a refused GET every 100 ms for up to 5 s, as a client of a Service
// with a dead replica must. A request still refused after that, or failing any other way,
// is unanswered.
func startAskingTheCatalog(t *testing.T, ctx context.Context, ns string) *counter {
	t.Helper()
	var svc corev1.Service
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: "cantus-system", Name: "cantus-catalog"}, &svc); err != nil {
		t.Fatalf("the catalog's Service: %v", err)
	}
	url := "https://" + svc.Spec.ClusterIP + "/v1/servers"
	token := serviceAccountToken(t, ctx, ns, "default", catalog.DefaultAudience)
	// The catalog serves a self-signed certificate unless --catalog-cert-dir names one.
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	ask := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("catalog answered %s", resp.Status)
		}
		return nil
	}
	var retried atomic.Int64
	t.Cleanup(func() { t.Logf("%d catalog requests were refused at connect and retried", retried.Load()) })
	return runCounting(ctx, 100*time.Millisecond, func(ctx context.Context) error {
		// A connection refused while the Service's endpoints move is retried, every
		// 100 ms for up to 5 s: the client's patience, not a wait for something.
		giveUp := time.Now().Add(5 * time.Second)
		retry := time.NewTicker(100 * time.Millisecond)
		defer retry.Stop()
		for {
			err := ask(ctx)
			if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(giveUp) {
				return err
			}
			retried.Add(1)
			select {
			case <-ctx.Done():
				return err
			case <-retry.C:
			}
		}
	}, t.Logf)
}

// serviceAccountToken asks the API server for a token of the service account, bound to
// the audience, as a projected token would be.
func serviceAccountToken(t *testing.T, ctx context.Context, ns, account, audience string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: account}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](3600)}}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return k8s.SubResource("token").Create(ctx, sa, tr) == nil, nil // the account appears with its namespace
	})
	if err != nil {
		t.Fatalf("a token of %s/%s: %v", ns, account, err)
	}
	return tr.Status.Token
}

// leaderPod is the operator pod that holds the leader election lease, and the lease's
// holder identity (the pod's name and a per-process id).
func leaderPod(t *testing.T, ctx context.Context) (*corev1.Pod, string) {
	t.Helper()
	var lease coordinationv1.Lease
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: "cantus-system", Name: "cantus-operator.cantus.dev"}, &lease); err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("the operator's lease: %v", err)
	}
	holder := *lease.Spec.HolderIdentity
	podName, _, _ := strings.Cut(holder, "_")
	var pod corev1.Pod
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: "cantus-system", Name: podName}, &pod); err != nil {
		t.Fatalf("the leader pod %s: %v", podName, err)
	}
	return &pod, holder
}

// waitNewLeader waits until another manager process holds the lease.
func waitNewLeader(t *testing.T, ctx context.Context, old string) string {
	t.Helper()
	var lease coordinationv1.Lease
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: "cantus-system", Name: "cantus-operator.cantus.dev"}, &lease); err != nil {
			return false, nil
		}
		return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != old, nil
	})
	if err != nil {
		t.Fatalf("no new leader after %s: %v", old, err)
	}
	return *lease.Spec.HolderIdentity
}

// killManagerContainer sends SIGKILL to the pod's manager process. The node runs on this
// machine, so the process is found by the pod's UID in its cgroup path, as the kubelet
// names it.
func killManagerContainer(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	uid := string(pod.UID)
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "manager" {
			continue
		}
		cgroup, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil || !podCgroup(string(cgroup), uid) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("SIGKILL to the manager (pid %d) of %s: %v", pid, pod.Name, err)
		}
		t.Logf("SIGKILL sent to the manager of %s (pid %d)", pod.Name, pid)
		return
	}
	t.Fatalf("no manager process of pod %s (uid %s) on this node", pod.Name, uid)
}

// settledNamespaces are the namespaces whose SkillServers and RemoteToolImports are all
// Ready for their latest spec, and none of whose servers accept service-account tokens:
// nothing there is left for the operator to write.
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
	servers, imports := listServersAndImports(t, ctx)
	for _, s := range servers.Items {
		note(s.Namespace, s.Status.Conditions, s.Generation)
		if s.Spec.Auth != nil && s.Spec.Auth.ServiceAccountTokens != nil {
			// Its config carries the cluster's revoked pods and service accounts: any pod
			// deleted anywhere (a rollout's old pod included) is a write the operator must
			// make, failover or not.
			unsettled[s.Namespace] = true
		}
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

// podCgroup says whether a process's cgroup file names the pod: the kubelet writes its UID
// with dashes (cgroupfs driver) or underscores (systemd driver).
func podCgroup(cgroup, uid string) bool {
	return strings.Contains(cgroup, uid) || strings.Contains(cgroup, strings.ReplaceAll(uid, "-", "_"))
}
