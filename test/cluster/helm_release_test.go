//go:build cluster

package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// The Helm release of TestHelmReleaseInstallUpgradeUninstall. It goes to cantus-system,
// beside make deploy's (stopped) operator, under a name of its own: every object it makes
// is named helm-cantus-operator..., so only the CRDs are shared with make deploy, and the
// manager's pods keep the namespace and the app.kubernetes.io/name the SkillServers'
// NetworkPolicies let in (nothing of the other tests' servers changes) and the leader
// election lease (cantus-system/cantus-operator.cantus.dev) of make deploy's managers, so
// the two could never reconcile at once. hack/cluster.sh audits helmManagerUser too.
const (
	helmRelease        = "helm"
	helmFullname       = "helm-cantus-operator"
	helmManagerUser    = "system:serviceaccount:cantus-system:" + helmFullname
	deployedOperator   = "cantus-operator" // make deploy's Deployment in cantus-system
	operatorLease      = "cantus-operator.cantus.dev"
	operatorNamespace  = "cantus-system"
	helmCatalogService = "helm-cantus-catalog" // make deploy's is cantus-catalog
)

// The SkillServers of config/samples (namespace default), and its refused import.
var sampleServers = []string{"library", "notebook", "handbook"}

const sampleImport = "unlisted-tools"

// Issue 27: the chart, installed with Helm on the real node, runs an operator that makes
// the samples Ready; `helm upgrade` to a changed value (the log level) rolls the manager
// to new pods, and the new leader, once it has reconciled every object, has rewritten
// none (the API server's audit log has every write of the release's service account); a
// `helm uninstall` keeps the CRDs and every SkillServer. make deploy's operator is
// stopped for the while and started again at the end.
func TestHelmReleaseInstallUpgradeUninstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	t.Cleanup(cancel)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm := helmCommand(t, root)
	values := helmValues(t)
	chart := filepath.Join(root, "charts", "cantus-operator")

	crds := []string{"skillservers.cantus.dev", "remotetoolimports.cantus.dev", "toolsourcepolicies.cantus.dev"}
	crdMeta := map[string]*metav1.PartialObjectMetadata{}
	for _, name := range crds {
		crdMeta[name] = crdMetadata(t, ctx, name)
	}

	// Cleanups run last first: the release goes, the CRDs get back the labels and
	// annotations make deploy gave them, make deploy's operator runs again, and then the
	// samples are deleted (by it, as their owner references and finalizers say).
	t.Cleanup(func() {
		kubectl(t, "delete", "--ignore-not-found", "--wait=false", "-k", filepath.Join(root, "config", "samples"))
	})
	restartDeployedOperator := stopDeployedOperator(t, ctx)
	t.Cleanup(restartDeployedOperator)
	t.Cleanup(func() {
		for _, name := range crds {
			restoreCRDMetadata(t, name, crdMeta[name])
		}
	})
	t.Cleanup(func() { _ = helm("uninstall", helmRelease, "--ignore-not-found", "--wait", "--timeout", "3m") })

	// Install. The CRDs exist (make deploy applied them): --take-ownership adopts them,
	// as an install that replaces a kustomize one must.
	installed := time.Now()
	helm("install", helmRelease, chart, "-f", values, "--take-ownership", "--wait", "--timeout", "5m")
	helmPods := deploymentPods(t, ctx, helmFullname)
	leader := waitLeaseHeldByOneOf(t, ctx, helmPods)
	t.Logf("helm install: %d manager pods ready after %s, %s leads", len(helmPods), time.Since(installed).Round(time.Second), leader.Name)

	kubectl(t, "apply", "-k", filepath.Join(root, "config", "samples"))
	for _, name := range sampleServers {
		waitReady(t, ctx, types.NamespacedName{Namespace: "default", Name: name})
	}
	waitImportRefused(t, ctx, types.NamespacedName{Namespace: "default", Name: sampleImport})
	t.Logf("the samples are Ready %s after the install", time.Since(installed).Round(time.Second))
	library := waitReady(t, ctx, types.NamespacedName{Namespace: "default", Name: "library"})
	if got, err := callTool(ctx, mcpClient(t, ctx, serviceURL(t, ctx, library)), "search_book", map[string]any{"title": "Dune"}); err != nil || got != "found: Dune" {
		t.Errorf("search_book through the library sample's Service = %q, %v; want %q", got, err, "found: Dune")
	}

	// Upgrade to a changed log level.
	// The samples' namespace is settled too: its servers are Ready and its import refused,
	// each for its latest spec (settledNamespaces wants every import Ready).
	settled := settledNamespaces(t, ctx)
	settled["default"] = true
	serversBefore := skillServerVersions(t, ctx, settled)
	childrenBefore := operatorChildren(t, ctx, "default")
	var before appsv1.Deployment
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: helmFullname}, &before); err != nil {
		t.Fatal(err)
	}
	upgraded := time.Now()
	helm("upgrade", helmRelease, chart, "-f", values, "--set", "logLevel=debug", "--wait", "--timeout", "5m")
	after := waitRolledOut(t, ctx, helmFullname, before.Generation)
	if !slices.Contains(after.Spec.Template.Spec.Containers[0].Args, "--zap-log-level=debug") {
		t.Errorf("the upgraded manager's args %v lack --zap-log-level=debug", after.Spec.Template.Spec.Containers[0].Args)
	}
	newPods := waitOnlyPodsOf(t, ctx, helmFullname)
	for _, p := range newPods {
		if slices.ContainsFunc(helmPods, func(old corev1.Pod) bool { return old.UID == p.UID }) {
			t.Errorf("pod %s of the release survived the upgrade: the manager did not roll", p.Name)
		}
	}
	newLeader := waitLeaseHeldByOneOf(t, ctx, newPods)
	reconciled := waitReconciledEverything(t, ctx, newLeader, helmFullname+"-metrics-reader")
	t.Logf("helm upgrade: deployment generation %d -> %d, %d new manager pods, %s leads and has reconciled %s, %s after the upgrade",
		before.Generation, after.Generation, len(newPods), newLeader.Name, reconciled, time.Since(upgraded).Round(time.Second))

	helmRequests := requestsOf(t, helmManagerUser)
	if !slices.ContainsFunc(helmRequests, func(ev auditEvent) bool {
		// A server-side apply that creates: a patch answered 201 Created.
		return ev.ResponseStatus.Code == http.StatusCreated && ev.ObjectRef.Resource == "deployments" && ev.ObjectRef.Namespace == "default" && ev.ObjectRef.Name == "library"
	}) {
		t.Errorf("the audit log has no creation of the library sample's Deployment by %s: another manager made the samples Ready", helmManagerUser)
	}
	if writes := writesToSettledObjects(helmRequests, upgraded, settled, nil); len(writes) > 0 {
		t.Errorf("after the upgrade the operator wrote %d times to settled objects, want 0: %v", len(writes), writes)
	}
	if changed := changedVersions(serversBefore, skillServerVersions(t, ctx, settled)); len(changed) > 0 {
		t.Errorf("SkillServers rewritten by the upgrade: %v", changed)
	}
	if changed := changedVersions(childrenBefore, operatorChildren(t, ctx, "default")); len(changed) > 0 {
		t.Errorf("objects of the samples rewritten by the upgrade: %v", changed)
	}
	for _, ev := range helmRequests {
		if ev.forbiddenByRBAC() {
			t.Errorf("the chart's RBAC refused the manager: %s %s", ev.Verb, ev.RequestURI)
		}
	}
	t.Logf("%d requests of %s audited; %d SkillServers and %d objects of the samples unchanged", len(helmRequests), helmManagerUser, len(serversBefore), len(childrenBefore))

	// Uninstall: the release's objects go, the CRDs and every SkillServer stay.
	helm("uninstall", helmRelease, "--wait", "--timeout", "3m")
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: helmFullname}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: helmFullname}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: helmCatalogService}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: helmFullname}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: helmFullname}},
	} {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after helm uninstall: %v, want not found", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	for _, name := range crds {
		if crd := crdMetadata(t, ctx, name); crd.DeletionTimestamp != nil {
			t.Errorf("helm uninstall deleted the CRD %s", name)
		}
	}
	var servers cantusv1alpha1.SkillServerList
	if err := k8s.List(ctx, &servers); err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, s := range servers.Items {
		if s.DeletionTimestamp == nil {
			left[s.Namespace+"/"+s.Name] = true
		}
	}
	for key := range serversBefore {
		if !left[key] {
			t.Errorf("SkillServer %s is gone after helm uninstall", key)
		}
	}
	t.Logf("helm uninstall: the CRDs and all %d SkillServers stay", len(left))
}

// helmCommand returns a runner of bin/helm on the node's kubeconfig in cantus-system,
// with Helm's own config, cache and data in a temporary folder; it fails the test on an
// error and returns the output.
func helmCommand(t *testing.T, root string) func(args ...string) string {
	home := t.TempDir()
	return func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "bin", "helm"), append(args, "--kubeconfig", kubeconfigPath(), "-n", operatorNamespace)...)
		cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s (make bin/helm builds helm): %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// helmValues writes the release's values: the image the node has (never pulled), as the
// adapter image too, with the impostor image hack/cluster.sh allows make deploy's
// operator in the admission policy's parameters, and a catalog Service name of its own.
func helmValues(t *testing.T) string {
	t.Helper()
	image := os.Getenv("IMG")
	if image == "" {
		image = "cantus.local/cantus-operator:dev"
	}
	repository, tag := image, ""
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repository, tag = image[:i], image[i+1:]
	}
	values := fmt.Sprintf(`image:
  repository: %q
  tag: %q
  pullPolicy: Never
adapterImage: %q
admissionPolicy:
  extraAdapterImages: ["cantus.local/impostor:1"]
catalog:
  service:
    name: %s
`, repository, tag, image, helmCatalogService)
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var crdKind = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

func crdMetadata(t *testing.T, ctx context.Context, name string) *metav1.PartialObjectMetadata {
	t.Helper()
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(crdKind)
	if err := k8s.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		t.Fatalf("the CRD %s: %v", name, err)
	}
	return crd
}

// restoreCRDMetadata gives a CRD back the labels and annotations it had before the
// release adopted it.
func restoreCRDMetadata(t *testing.T, name string, was *metav1.PartialObjectMetadata) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crd := crdMetadata(t, ctx, name)
	patched := crd.DeepCopy()
	patched.Labels, patched.Annotations = was.Labels, was.Annotations
	if err := k8s.Patch(ctx, patched, client.MergeFrom(crd)); err != nil {
		t.Errorf("restoring the labels and annotations of the CRD %s: %v", name, err)
	}
}

// stopDeployedOperator scales make deploy's operator to zero and waits for its pods to
// be gone; the function it returns scales it back and waits until one of its new pods
// leads.
func stopDeployedOperator(t *testing.T, ctx context.Context) func() {
	t.Helper()
	var d appsv1.Deployment
	key := types.NamespacedName{Namespace: operatorNamespace, Name: deployedOperator}
	if err := k8s.Get(ctx, key, &d); err != nil {
		t.Fatalf("make deploy's operator: %v", err)
	}
	replicas := *d.Spec.Replicas
	scale := func(ctx context.Context, n int32) error {
		patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
		return k8s.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, client.RawPatch(types.MergePatchType, patch))
	}
	if err := scale(ctx, 0); err != nil {
		t.Fatalf("scaling make deploy's operator to 0: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		return len(deploymentPods(t, ctx, deployedOperator)) == 0, nil
	})
	if err != nil {
		t.Fatalf("make deploy's operator pods still run after scaling to 0: %v", err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		if err := scale(ctx, replicas); err != nil {
			t.Errorf("scaling make deploy's operator back to %d: %v", replicas, err)
			return
		}
		waitRolledOut(t, ctx, deployedOperator, 0)
		holder := waitLeaseHeldByOneOf(t, ctx, waitOnlyPodsOf(t, ctx, deployedOperator))
		t.Logf("make deploy's operator runs again (%d replicas), %s leads", replicas, holder.Name)
	}
}

// deploymentPods lists the pods of a Deployment in cantus-system (through its
// ReplicaSets' owner references: the selectors of make deploy's and the release's
// Deployments overlap).
func deploymentPods(t *testing.T, ctx context.Context, name string) []corev1.Pod {
	t.Helper()
	var rss appsv1.ReplicaSetList
	var pods corev1.PodList
	if err := k8s.List(ctx, &rss, client.InNamespace(operatorNamespace)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(ctx, &pods, client.InNamespace(operatorNamespace)); err != nil {
		t.Fatal(err)
	}
	ours := map[types.UID]bool{}
	for _, rs := range rss.Items {
		if owner := metav1.GetControllerOf(&rs); owner != nil && owner.Kind == "Deployment" && owner.Name == name {
			ours[rs.UID] = true
		}
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if owner := metav1.GetControllerOf(&p); owner != nil && ours[owner.UID] {
			out = append(out, p)
		}
	}
	return out
}

// waitRolledOut waits until the Deployment's controller has seen a generation newer than
// after and every replica runs the new template, and returns the Deployment.
func waitRolledOut(t *testing.T, ctx context.Context, name string, after int64) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: name}, &d); err != nil {
			return false, nil
		}
		want := *d.Spec.Replicas
		return d.Generation > after && d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.ReadyReplicas == want && d.Status.AvailableReplicas == want && d.Status.Replicas == want, nil
	})
	if err != nil {
		t.Fatalf("deployment %s not rolled out: status %+v", name, d.Status)
	}
	return &d
}

// waitOnlyPodsOf waits until the Deployment's pods are its replicas, ready, and none is
// terminating (the old pods of a rollout have exited), and returns them.
func waitOnlyPodsOf(t *testing.T, ctx context.Context, name string) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	var d appsv1.Deployment
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: name}, &d); err != nil {
			return false, nil
		}
		pods = deploymentPods(t, ctx, name)
		return len(pods) == int(*d.Spec.Replicas) && runningPods(pods) == len(pods), nil
	})
	if err != nil {
		t.Fatalf("deployment %s: want %d ready pods and no other, have %d", name, *d.Spec.Replicas, len(pods))
	}
	return pods
}

// waitLeaseHeldByOneOf waits until the manager in one of the pods holds the leader
// election lease, and returns that pod.
func waitLeaseHeldByOneOf(t *testing.T, ctx context.Context, pods []corev1.Pod) *corev1.Pod {
	t.Helper()
	var lease coordinationv1.Lease
	var holder *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: operatorLease}, &lease); err != nil || lease.Spec.HolderIdentity == nil {
			return false, nil
		}
		podName, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
		for i := range pods {
			if pods[i].Name == podName {
				holder = &pods[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		names := make([]string, 0, len(pods))
		for _, p := range pods {
			names = append(names, p.Name)
		}
		t.Fatalf("the lease is not held by any of %v: holder %v", names, ptrString(lease.Spec.HolderIdentity))
	}
	return holder
}

func ptrString(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// waitImportRefused waits until the import reports SourceAllowed=False for its latest
// spec: config/samples' import is one no policy allows.
func waitImportRefused(t *testing.T, ctx context.Context, key types.NamespacedName) {
	t.Helper()
	var imp cantusv1alpha1.RemoteToolImport
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, key, &imp); err != nil {
			return false, nil
		}
		c := apimeta.FindStatusCondition(imp.Status.Conditions, cantusv1alpha1.ConditionSourceAllowed)
		return c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == imp.Generation, nil
	})
	if err != nil {
		t.Fatalf("remotetoolimport %s does not report SourceAllowed=False: conditions %+v", key, imp.Status.Conditions)
	}
}

// skillServerVersions maps every SkillServer of the settled namespaces to its
// resourceVersion.
func skillServerVersions(t *testing.T, ctx context.Context, settled map[string]bool) map[string]string {
	t.Helper()
	var servers cantusv1alpha1.SkillServerList
	if err := k8s.List(ctx, &servers); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range servers.Items {
		if settled[s.Namespace] {
			out[s.Namespace+"/"+s.Name] = s.ResourceVersion
		}
	}
	return out
}

// operatorChildren maps the objects the operator made in the namespace (labelled
// app.kubernetes.io/managed-by=cantus-operator) to their resourceVersions.
func operatorChildren(t *testing.T, ctx context.Context, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	lists := map[string]client.ObjectList{
		"deployment":            &appsv1.DeploymentList{},
		"service":               &corev1.ServiceList{},
		"configmap":             &corev1.ConfigMapList{},
		"networkpolicy":         &networkingv1.NetworkPolicyList{},
		"persistentvolumeclaim": &corev1.PersistentVolumeClaimList{},
		"serviceaccount":        &corev1.ServiceAccountList{},
	}
	for kind, list := range lists {
		if err := k8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/managed-by": "cantus-operator"}); err != nil {
			t.Fatal(err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			obj := item.(client.Object)
			out[kind+" "+obj.GetName()] = obj.GetResourceVersion()
		}
	}
	if len(out) == 0 {
		t.Fatalf("no object of the operator's in %s", ns)
	}
	return out
}

// changedVersions lists the keys whose resourceVersion changed or that are gone.
func changedVersions(before, after map[string]string) []string {
	var changed []string
	for _, key := range slices.Sorted(maps.Keys(before)) {
		if now, ok := after[key]; !ok {
			changed = append(changed, key+" (gone)")
		} else if now != before[key] {
			changed = append(changed, fmt.Sprintf("%s (resourceVersion %s -> %s)", key, before[key], now))
		}
	}
	return changed
}

// waitReconciledEverything waits until the leader's manager has reconciled every
// SkillServer and RemoteToolImport in the cluster since it started (its
// controller_runtime_reconcile_total counts at least that many reconciles) and has
// nothing left to do (its work queues are empty and no worker is busy). It reads the
// metrics endpoint of the pod over HTTPS, as a service account bound to the deployment's
// metrics-reader ClusterRole (metricsReaderRole), and returns what it counted.
func waitReconciledEverything(t *testing.T, ctx context.Context, leader *corev1.Pod, metricsReaderRole string) string {
	t.Helper()
	ns := restrictedNamespace(t, ctx)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "cluster-test-metrics-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "default"}},
	}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding) })
	token := serviceAccountToken(t, ctx, ns, "default", "https://kubernetes.default.svc.cluster.local")
	url := "https://" + leader.Status.PodIP + ":8443/metrics"
	// The metrics endpoint serves a self-signed certificate.
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

	servers, imports := listServersAndImports(t, ctx)
	want := map[string]float64{"skillserver": float64(len(servers.Items)), "remotetoolimport": float64(len(imports.Items))}
	var last map[string]controllerMetrics
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		last, lastErr = scrapeControllers(ctx, httpc, url, token)
		if lastErr != nil {
			return false, nil
		}
		for controller, n := range want {
			m := last[controller]
			if m.reconciles < n || m.depth > 0 || m.active > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the leader %s has not reconciled every object (want reconciles per controller %v): %+v, last error %v", leader.Name, want, last, lastErr)
	}
	return fmt.Sprintf("%v skillserver and %v remotetoolimport reconciles for %d SkillServers and %d RemoteToolImports",
		last["skillserver"].reconciles, last["remotetoolimport"].reconciles, len(servers.Items), len(imports.Items))
}

type controllerMetrics struct{ reconciles, depth, active float64 }

// scrapeControllers reads, per controller, controller_runtime_reconcile_total (all
// results), workqueue_depth and controller_runtime_active_workers from the Prometheus
// text at url.
func scrapeControllers(ctx context.Context, httpc *http.Client, url, token string) (map[string]controllerMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("metrics answered %s: %s", resp.Status, body)
	}
	out := map[string]controllerMetrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		_, controller, ok := strings.Cut(labels, `controller="`)
		if !ok {
			continue
		}
		controller, _, _ = strings.Cut(controller, `"`)
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			continue
		}
		m := out[controller]
		switch name {
		case "controller_runtime_reconcile_total":
			m.reconciles += v
		case "workqueue_depth":
			m.depth += v
		case "controller_runtime_active_workers":
			m.active += v
		default:
			continue
		}
		out[controller] = m
	}
	return out, sc.Err()
}
