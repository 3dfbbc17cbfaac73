package operatorpower

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// lockedBuffer collects the manager's log while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startManager runs the real manager binary (bin/manager, `make build`) as the operator's
// service account, kubernetes runtime, with extra flags; it stops with the test.
func startManager(t *testing.T, flags ...string) *lockedBuffer {
	t.Helper()
	bin := filepath.Join(root, "bin", "manager")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the manager binary is missing (make build): %v", err)
	}
	args := append([]string{
		"--runtime=kubernetes", "--adapter-image=" + adapterImage, "--verify-servers=false",
		"--leader-elect=false", "--catalog-bind-address=0", "--metrics-bind-address=0", "--health-probe-bind-address=0",
	}, flags...)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+opConfig, "POD_NAMESPACE=", "CANTUS_ADAPTER_IMAGE=")
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("manager log:\n%s", out.String())
		}
	})
	return out
}

// applyWorkloads applies, as the admin, what a tenant of namespace writes to get every
// kind of Deployment the operator renders: a SkillServer with a memory claim, a skill from
// a ConfigMap (projected content) and one from an image (image volume), and a stdio
// import (bridge with the adapter copied in). The ToolSourcePolicy allows the images.
func applyWorkloads(t *testing.T, namespace string) {
	t.Helper()
	manifest := fmt.Sprintf(`
apiVersion: cantus.dev/v1alpha1
kind: ToolSourcePolicy
metadata: {name: %[1]s}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[1]s}}
  images: ["example.test"]
  commands: ["server"]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: pdf-forms, namespace: %[1]s, labels: {cantus.dev/content: "true"}}
data:
  SKILL.md: |
    ---
    name: pdf-forms
    description: Fill in PDF forms.
    ---
    # Forms
---
apiVersion: cantus.dev/v1alpha1
kind: SkillServer
metadata: {name: everything, namespace: %[1]s}
spec:
  memory: {size: 1Gi}
  agentSkills:
  - {name: pdf-forms, configMap: {name: pdf-forms}}
  - {name: reports, image: {reference: "example.test/skills/reports:v1"}}
---
apiVersion: cantus.dev/v1alpha1
kind: RemoteToolImport
metadata: {name: tools, namespace: %[1]s}
spec:
  transport: stdio
  stdio: {image: "example.test/mcp/server:v1", command: ["server"]}
`, namespace)
	if _, err := kubectl([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// waitForDeployment waits until the operator has created namespace/name.
func waitForDeployment(t *testing.T, log *lockedBuffer, namespace, name string) *appsv1.Deployment {
	t.Helper()
	dep := &appsv1.Deployment{}
	testkit.Eventually(t, 90*time.Second, "the Deployment "+namespace+"/"+name, func() error {
		err := admin.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, dep)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err
	})
	return dep
}

// refusedWrites are the manager's log lines that say the API server refused it: RBAC
// (forbidden) or the admission policy.
func refusedWrites(log string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, "forbidden") || strings.Contains(line, "denied request") {
			out = append(out, line)
		}
	}
	return out
}

// checkEveryVolumeKind says which kinds of volume the operator's Deployment carries, so
// that the test knows the policy admitted each of them.
func checkEveryVolumeKind(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	var claim, image, projected bool
	for _, v := range dep.Spec.Template.Spec.Volumes {
		claim = claim || v.PersistentVolumeClaim != nil
		image = image || v.Image != nil
		projected = projected || v.Projected != nil
	}
	if !claim || !image || !projected {
		t.Errorf("the adapter Deployment lacks a kind of volume (claim %t, image %t, projected %t): %+v", claim, image, projected, dep.Spec.Template.Spec.Volumes)
	}
}

// The policy installed, the real manager (cluster-wide, its ClusterRole) writes every
// kind of Deployment it renders, each admitted as the operator's service account.
func TestPolicyAdmitsWhatTheOperatorRenders(t *testing.T) {
	grantClusterRole(t)
	createNamespace(t, "tenant-render")
	waitForPolicy(t, "tenant-render")
	log := startManager(t, "--admission-params="+operatorNamespace+"/cantus-operator-admission")
	applyWorkloads(t, "tenant-render")

	checkEveryVolumeKind(t, waitForDeployment(t, log, "tenant-render", "everything"))
	bridge := waitForDeployment(t, log, "tenant-render", "tools-bridge")
	if len(bridge.Spec.Template.Spec.InitContainers) != 1 {
		t.Errorf("the bridge has no install container: %+v", bridge.Spec.Template.Spec)
	}
	if refused := refusedWrites(log.String()); len(refused) > 0 {
		t.Errorf("the API server refused the operator's writes:\n%s", strings.Join(refused, "\n"))
	}
}

// With --watch-namespaces and only the namespaced Roles of config/rbac/namespaced (and its
// cluster-scoped ClusterRole), the manager serves a SkillServer in a watched namespace,
// leaves one elsewhere alone, and is never refused.
func TestWatchNamespacesManagerRunsOnNamespacedRoles(t *testing.T) {
	ctx := context.Background()
	dropClusterRole(t)
	createNamespace(t, "watched-a")
	createNamespace(t, "unwatched-b")
	if _, err := kubectl(nil, "apply", "--server-side", "-n", "watched-a", "-k", filepath.Join(root, "config", "rbac", "namespaced")); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl(nil, "apply", "--server-side", "-k", filepath.Join(root, "config", "rbac", "namespaced", "cluster")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = kubectl(nil, "delete", "-k", filepath.Join(root, "config", "rbac", "namespaced", "cluster"))
	})
	waitUntilSecretsReadable(t, "watched-a", true)
	waitUntilSecretsReadable(t, "unwatched-b", false)
	waitForPolicy(t, "watched-a")

	log := startManager(t, "--watch-namespaces=watched-a")
	// The other namespace's workloads first: a manager that saw them would have queued
	// them before the watched ones, so by the time the watched SkillServer has its
	// status, theirs would have been reconciled too.
	applyWorkloads(t, "unwatched-b")
	applyWorkloads(t, "watched-a")

	checkEveryVolumeKind(t, waitForDeployment(t, log, "watched-a", "everything"))
	waitForDeployment(t, log, "watched-a", "tools-bridge")
	waitForStatus(t, "watched-a", "everything")
	for _, name := range []string{"everything", "tools-bridge"} {
		err := admin.Get(ctx, client.ObjectKey{Namespace: "unwatched-b", Name: name}, &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("Deployment unwatched-b/%s: %v, want not found", name, err)
		}
	}
	ss := &cantusv1alpha1.SkillServer{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "unwatched-b", Name: "everything"}, ss); err != nil {
		t.Fatal(err)
	}
	if len(ss.Status.Conditions) > 0 {
		t.Errorf("the SkillServer of an unwatched namespace got a status: %+v", ss.Status.Conditions)
	}
	if refused := refusedWrites(log.String()); len(refused) > 0 {
		t.Errorf("the API server refused the operator:\n%s", strings.Join(refused, "\n"))
	}
}

// dropClusterRole removes the binding of the cluster-wide ClusterRole for the test, and
// puts it back after.
func dropClusterRole(t *testing.T) {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cantus-operator"}}
	if err := admin.Delete(context.Background(), binding); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { grantClusterRole(t) })
}

// waitUntilSecretsReadable waits until the operator's service account may (or may not)
// list Secrets in namespace: RBAC changes reach the authorizer through an informer.
func waitUntilSecretsReadable(t *testing.T, namespace string, want bool) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("listing Secrets in %s as the operator to be allowed=%t", namespace, want), func() error {
		err := operator.List(context.Background(), &corev1.SecretList{}, client.InNamespace(namespace))
		if err == nil && want || apierrors.IsForbidden(err) && !want {
			return nil
		}
		if err != nil && !apierrors.IsForbidden(err) {
			t.Fatal(err)
		}
		return fmt.Errorf("the list gave %w", err)
	})
}

// waitForStatus waits until the manager has written the SkillServer's status.
func waitForStatus(t *testing.T, namespace, name string) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, "the status of SkillServer "+namespace+"/"+name, func() error {
		ss := &cantusv1alpha1.SkillServer{}
		if err := admin.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, ss); err != nil {
			t.Fatal(err)
		}
		if len(ss.Status.Conditions) == 0 {
			return fmt.Errorf("no conditions")
		}
		return nil
	})
}

// A SkillServer whose spec.pod.image the policy's parameters do not list gets no
// Deployment, and its status says why and where to allow the image.
func TestUnlistedPodImageShowsThePolicyInStatus(t *testing.T) {
	ctx := context.Background()
	grantClusterRole(t)
	createNamespace(t, "tenant-image")
	waitForPolicy(t, "tenant-image")
	startManager(t)
	// The ToolSourcePolicy allows the image (a pod override needs it), so what refuses the
	// Deployment is the admission policy, which does not list it.
	manifest := `
apiVersion: cantus.dev/v1alpha1
kind: ToolSourcePolicy
metadata: {name: tenant-image-pods}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: tenant-image}}
  images: ["example.test/custom-adapter:1"]
---
apiVersion: cantus.dev/v1alpha1
kind: SkillServer
metadata: {name: custom, namespace: tenant-image}
spec:
  pod: {image: "example.test/custom-adapter:1"}
  skills:
  - name: echo
    description: Echo.
    template: {text: "{{ .x }}"}
`
	if _, err := kubectl([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	var ready *metav1.Condition
	testkit.Eventually(t, 60*time.Second, "Ready=False ApplyFailed on tenant-image/custom", func() error {
		ss := &cantusv1alpha1.SkillServer{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "tenant-image", Name: "custom"}, ss); err != nil {
			t.Fatal(err)
		}
		ready = apimeta.FindStatusCondition(ss.Status.Conditions, cantusv1alpha1.ConditionReady)
		if ready == nil || ready.Reason != cantusv1alpha1.ReasonApplyFailed {
			return fmt.Errorf("conditions %+v", ss.Status.Conditions)
		}
		return nil
	})
	t.Logf("Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
	for _, want := range []string{"cantus-operator-restricted-workloads", "adapterImages", "example.test/custom-adapter:1"} {
		if !strings.Contains(ready.Message, want) {
			t.Errorf("Ready message %q does not say %q", ready.Message, want)
		}
	}
	err := admin.Get(ctx, client.ObjectKey{Namespace: "tenant-image", Name: "custom"}, &appsv1.Deployment{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Deployment of the unlisted image: %v, want not found", err)
	}
}
