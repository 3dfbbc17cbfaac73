package workload

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

const adapterImage = "ghcr.io/cantus-dev/cantus-operator:v0.1.0"

// testBridgeToken is a token as EnsureBridgeToken makes them.
const testBridgeToken = "Zk3v9Qm1xW7pL2sN8bT4yR6uE0aH5cJ1dF3gK9oP2iM"

// renderedDeployment renders the apply configuration and decodes it as a Deployment.
func renderedDeployment(t *testing.T, k *KubernetesBridges, imp *cantusv1alpha1.RemoteToolImport) *appsv1.Deployment {
	t.Helper()
	ac, err := k.deploymentFor(imp, testBridgeToken)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(ac)
	if err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{}
	if err := json.Unmarshal(data, dep); err != nil {
		t.Fatal(err)
	}
	return dep
}

func TestBridgeDeployment(t *testing.T) {
	k := NewKubernetes(nil, adapterImage, "cluster.local").Bridges()
	imp := stdioImport("github", []string{"npx", "-y", "@modelcontextprotocol/server-github"}, "--toolsets", "repos")
	dep := renderedDeployment(t, k, imp)

	if dep.Name != "github-bridge" || dep.Namespace != "team-a" {
		t.Errorf("Deployment %s/%s", dep.Namespace, dep.Name)
	}
	wantOwner := metav1.OwnerReference{
		APIVersion: "cantus.dev/v1alpha1", Kind: "RemoteToolImport", Name: "github", UID: "uid-github",
		Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
	}
	if len(dep.OwnerReferences) != 1 || !reflect.DeepEqual(dep.OwnerReferences[0], wantOwner) {
		t.Errorf("owner references %+v, want %+v", dep.OwnerReferences, wantOwner)
	}
	if *dep.Spec.Replicas != 1 || dep.Spec.Selector.MatchLabels[LabelInstance] != "github-bridge" {
		t.Errorf("replicas %d, selector %v", *dep.Spec.Replicas, dep.Spec.Selector.MatchLabels)
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("pod labels %v do not match the selector %v", dep.Spec.Template.Labels, dep.Spec.Selector.MatchLabels)
		}
	}
	if dep.Labels[LabelRemoteToolImport] != "github" {
		t.Errorf("labels %v", dep.Labels)
	}

	pod := dep.Spec.Template.Spec
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the service account token is mounted")
	}
	psc := pod.SecurityContext
	if psc == nil || !*psc.RunAsNonRoot || *psc.RunAsUser != 65532 || psc.SeccompProfile == nil ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", psc)
	}

	// The shared volume: written by the init container, read by the main one.
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	if vols[binVolume].EmptyDir == nil || vols[tmpVolume].EmptyDir == nil {
		t.Errorf("volumes %+v, want emptyDirs %s and %s", pod.Volumes, binVolume, tmpVolume)
	}

	if len(pod.InitContainers) != 1 {
		t.Fatalf("%d init containers", len(pod.InitContainers))
	}
	initC := pod.InitContainers[0]
	if initC.Image != adapterImage {
		t.Errorf("init container image %q, want the adapter image", initC.Image)
	}
	if want := []string{"/adapter", "bridge", "--install-to", "/cantus/adapter"}; !reflect.DeepEqual(initC.Command, want) {
		t.Errorf("init command %q, want %q", initC.Command, want)
	}
	if len(initC.VolumeMounts) != 1 || initC.VolumeMounts[0].Name != binVolume || initC.VolumeMounts[0].MountPath != "/cantus" || initC.VolumeMounts[0].ReadOnly {
		t.Errorf("init mounts %+v, want %s writable at /cantus", initC.VolumeMounts, binVolume)
	}

	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	main := pod.Containers[0]
	if main.Image != "ghcr.io/example/tools:1" {
		t.Errorf("main image %q, want the import's image", main.Image)
	}
	wantCmd := []string{"/cantus/adapter", "bridge", "--port", "8765", "--",
		"npx", "-y", "@modelcontextprotocol/server-github", "--toolsets", "repos"}
	if !reflect.DeepEqual(main.Command, wantCmd) || len(main.Args) != 0 {
		t.Errorf("main command %q args %q, want %q", main.Command, main.Args, wantCmd)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range main.VolumeMounts {
		mounts[m.Name] = m
	}
	if m := mounts[binVolume]; m.MountPath != "/cantus" || !m.ReadOnly {
		t.Errorf("main mounts %+v: want %s read-only at /cantus", main.VolumeMounts, binVolume)
	}
	if m := mounts[tmpVolume]; m.MountPath != "/tmp" || m.ReadOnly {
		t.Errorf("main mounts %+v: want a writable /tmp", main.VolumeMounts)
	}
	if len(main.Ports) != 1 || main.Ports[0].ContainerPort != 8765 || main.Ports[0].Name != "mcp" {
		t.Errorf("ports %+v", main.Ports)
	}
	if p := main.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.StrVal != "mcp" {
		t.Errorf("readiness probe %+v", p)
	}
	if p := main.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v", p)
	}
	for _, c := range []corev1.Container{initC, main} {
		sc := c.SecurityContext
		if sc == nil || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !*sc.RunAsNonRoot ||
			sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container %s security context %+v", c.Name, sc)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("container %s resources %+v", c.Name, c.Resources)
		}
	}
}

func TestBridgeService(t *testing.T) {
	imp := stdioImport("github", []string{"server"})
	svc := bridgeServiceFor(imp)
	data, _ := json.Marshal(svc)
	got := &corev1.Service{}
	if err := json.Unmarshal(data, got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "github-bridge" || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].Kind != "RemoteToolImport" {
		t.Errorf("service %s owners %+v", got.Name, got.OwnerReferences)
	}
	if len(got.Spec.Ports) != 1 || got.Spec.Ports[0].Port != 8765 || got.Spec.Ports[0].TargetPort.StrVal != "mcp" {
		t.Errorf("ports %+v", got.Spec.Ports)
	}
	if !reflect.DeepEqual(got.Spec.Selector, bridgeSelectorLabels(imp)) {
		t.Errorf("selector %v", got.Spec.Selector)
	}
	k := NewKubernetes(nil, adapterImage, "cluster.example").Bridges()
	if u := k.URL(imp); u != "http://github-bridge.team-a.svc.cluster.example:8765/mcp" {
		t.Errorf("URL %s", u)
	}
}

func TestBridgeName(t *testing.T) {
	for _, name := range []string{
		"github", "a", strings.Repeat("x", 56), strings.Repeat("x", 57), strings.Repeat("long-name.", 25) + "end",
		"0day", "dotted.name",
	} {
		got := BridgeName(&cantusv1alpha1.RemoteToolImport{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if errs := validation.IsDNS1035Label(got); len(errs) > 0 {
			t.Errorf("BridgeName(%q) = %q is no valid Service name: %v", name, got, errs)
		}
		if !strings.HasSuffix(got, "-bridge") {
			t.Errorf("BridgeName(%q) = %q", name, got)
		}
		if len(name) <= 56 && name[0] >= 'a' && !strings.Contains(name, ".") && got != name+"-bridge" {
			t.Errorf("BridgeName(%q) = %q, want %q", name, got, name+"-bridge")
		}
	}
	a := BridgeName(&cantusv1alpha1.RemoteToolImport{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("x", 60) + "a"}})
	b := BridgeName(&cantusv1alpha1.RemoteToolImport{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("x", 60) + "b"}})
	if a == b {
		t.Errorf("two long names map to the same bridge %q", a)
	}
}

// TestKubernetesEnsure applies through a fake client: not ready until the Deployment is
// available with its latest spec and the Service has its cluster IP, which the URL names.
func TestKubernetesEnsure(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cantusv1alpha1.AddToScheme(scheme)
	// The fake client cannot apply NetworkPolicies (its schema lacks their status), so
	// they are recorded here, in the order of the writes; envtest applies them for real.
	// A child that does not exist yet is created, not applied (R17).
	var applied []string
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&appsv1.Deployment{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			switch o := obj.(type) {
			case *networkingv1.NetworkPolicy:
				applied = append(applied, "NetworkPolicy/"+o.Name)
			case *appsv1.Deployment:
				applied = append(applied, "Deployment")
			case *corev1.Service:
				applied = append(applied, "Service")
			}
			return c.Create(ctx, obj, opts...)
		}, Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if np, ok := obj.(*networkingv1ac.NetworkPolicyApplyConfiguration); ok {
				applied = append(applied, "NetworkPolicy/"+*np.Name)
				return nil
			}
			if ac, ok := obj.(interface{ GetKind() *string }); ok {
				applied = append(applied, *ac.GetKind())
			}
			return c.Apply(ctx, obj, opts...)
		}}).Build()
	k := NewKubernetes(c, adapterImage, "cluster.local").Bridges()
	imp := stdioImport("github", []string{"server"}, "--x")
	ctx := context.Background()
	if _, _, err := k.Ensure(ctx, imp, BridgeAccess{}); err == nil || len(applied) > 0 {
		t.Fatalf("Ensure without a token: %v, applied %v; want an error and nothing applied", err, applied)
	}

	url, ready, err := k.Ensure(ctx, imp, BridgeAccess{Token: testBridgeToken})
	if err != nil || ready || url != "http://github-bridge.team-a.svc.cluster.local:8765/mcp" {
		t.Fatalf("Ensure = %q, %v, %v", url, ready, err)
	}
	if len(applied) != 3 || applied[0] != "NetworkPolicy/github-bridge" {
		t.Errorf("applied %v, want the NetworkPolicy first, then the Deployment and Service", applied)
	}
	key := types.NamespacedName{Namespace: "team-a", Name: "github-bridge"}
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, key, dep); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &corev1.Service{}); err != nil {
		t.Fatalf("the Service was not applied: %v", err)
	}
	dep.Status = appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}},
	}
	if err := c.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	// The fake client allocates no cluster IP: without one the bridge is not reachable yet.
	if url, ready, err := k.Ensure(ctx, imp, BridgeAccess{Token: testBridgeToken}); err != nil || ready || url != "http://github-bridge.team-a.svc.cluster.local:8765/mcp" {
		t.Errorf("Ensure of an available bridge whose Service has no IP = %q, %v, %v", url, ready, err)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, key, svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.ClusterIP = "10.96.7.8"
	if err := c.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	// Reached by its cluster IP, so neither the operator nor a gateway needs cluster DNS.
	if url, ready, err := k.Ensure(ctx, imp, BridgeAccess{Token: testBridgeToken}); err != nil || !ready || url != "http://10.96.7.8:8765/mcp" {
		t.Errorf("Ensure of an available bridge = %q, %v, %v; want ready at http://10.96.7.8:8765/mcp", url, ready, err)
	}
	if err := k.Forget(ctx, key); err != nil {
		t.Errorf("Forget = %v", err)
	}
}

func TestDeploymentAvailable(t *testing.T) {
	available := []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		name string
		dep  appsv1.Deployment
		want bool
	}{
		{"available", appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 1, ReadyReplicas: 1, Conditions: available}}, true},
		{"old generation", appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 1, ReadyReplicas: 1, Conditions: available}}, false},
		{"not updated", appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 0, ReadyReplicas: 1, Conditions: available}}, false},
		{"not ready", appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 1, ReadyReplicas: 0, Conditions: available}}, false},
		{"no condition", appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 1, ReadyReplicas: 1}}, false},
		{"scaled to zero", appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptrTo(int32(0))},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Conditions: available}}, false},
	} {
		if got, _, _ := DeploymentAvailability(&tc.dep); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// bridges is the controller's Bridges interface (internal/controller), restated here to
// keep this package free of the controller's imports.
type bridges interface {
	Ensure(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, access BridgeAccess) (url string, ready bool, err error)
	Forget(ctx context.Context, key types.NamespacedName) error
}

var (
	_ bridges          = (*LocalBridges)(nil)
	_ bridges          = (*KubernetesBridges)(nil)
	_ manager.Runnable = (*LocalBridges)(nil)
	_ Runtime          = (*Kubernetes)(nil)
)

// A Deployment applied a moment ago may not be in the cache yet: the server is
// Progressing, not failed, so that a thousand new servers are not each retried through
// the rate limiter (scalebench counted 391 such retries for 1,000 servers).
func TestObserveADeploymentNotCachedYet(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cantusv1alpha1.AddToScheme(scheme)
	k := NewKubernetes(fake.NewClientBuilder().WithScheme(scheme).Build(), adapterImage, "cluster.local")
	for _, tt := range []struct {
		replicas   *int32
		wantReason string
	}{
		{nil, cantusv1alpha1.ReasonProgressing},
		{ptrTo[int32](0), cantusv1alpha1.ReasonScaledToZero},
	} {
		ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "books", Namespace: "ns"}}
		ss.Spec.Replicas = tt.replicas
		obs, err := k.observe(context.Background(), ss)
		if err != nil {
			t.Fatalf("observe: %v", err)
		}
		if obs.Available || obs.Reason != tt.wantReason {
			t.Errorf("replicas %v: available %v, reason %q (%s), want %q", tt.replicas, obs.Available, obs.Reason, obs.Message, tt.wantReason)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
