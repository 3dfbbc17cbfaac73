//go:build cluster

package cluster

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// The checks in this file look back over everything the other tests did; Go runs a
// package's test files in name order, so this one comes last.

// Item 8: every pod we create is admitted under `restricted`: the namespaces enforce it,
// so a refused pod would leave its ReplicaSet short with a FailedCreate.
func TestZPodsAdmittedUnderRestricted(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	for _, ns := range append([]string{"cantus-system"}, usedNamespaces...) {
		var rss appsv1.ReplicaSetList
		if err := k8s.List(ctx, &rss, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, rs := range rss.Items {
			for _, c := range rs.Status.Conditions {
				if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
					t.Errorf("replicaset %s/%s could not create pods: %s", ns, rs.Name, c.Message)
				}
			}
		}
		var events corev1.EventList
		if err := k8s.List(ctx, &events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Reason == "FailedCreate" && strings.Contains(e.Message, "PodSecurity") {
				t.Errorf("%s/%s: %s", ns, e.InvolvedObject.Name, e.Message)
			}
		}
	}
}

// Item 7: the manager never received a Forbidden during the run. The API server's audit
// log (hack/cluster.sh records the manager's requests) has every answer it got.
func TestZManagerNeverForbidden(t *testing.T) {
	requests := managerRequests(t)
	for _, ev := range requests {
		if ev.forbiddenByRBAC() {
			t.Errorf("Forbidden: %s %s", ev.Verb, ev.RequestURI)
		}
	}
	if len(requests) == 0 {
		t.Errorf("no request of %s in the audit log: the check saw nothing", managerUser)
	}
	t.Logf("%d manager requests audited", len(requests))
}
