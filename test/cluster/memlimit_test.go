//go:build cluster

package cluster

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// The manager's heap is held under its container's memory limit: it reads the cgroup's
// limit and sets Go's soft limit to 90% of it, instead of letting the heap grow to twice
// what is live and the kubelet kill the pod.
func TestManagerTakesItsSoftMemoryLimitFromTheContainer(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	var d appsv1.Deployment
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: deployedOperator}, &d); err != nil {
		t.Fatal(err)
	}
	limit, ok := d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("the manager's container has no memory limit")
	}
	want := fmt.Sprintf(`"goMemLimitBytes":%d`, int64(float64(limit.Value())*0.9))
	pods := deploymentPods(t, ctx, deployedOperator)
	if len(pods) == 0 {
		t.Fatal("no pod of the manager")
	}
	for _, pod := range pods {
		out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", kubeconfigPath(), "-n", operatorNamespace, "logs", pod.Name, "-c", pod.Spec.Containers[0].Name).CombinedOutput()
		if err != nil {
			t.Fatalf("logs of %s: %v\n%s", pod.Name, err, out)
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("%s did not log a soft memory limit of 90%% of %s (%s)", pod.Name, limit.String(), want)
		} else {
			t.Logf("%s: %s from a %s limit", pod.Name, want, limit.String())
		}
	}
}
