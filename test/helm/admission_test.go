package helm

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// The chart's copy of config/admission, renamed for a release of another name in another
// namespace, binds that release's service account: its hostNetwork Deployment and its
// write to the release's parameters are refused, and its adapter Deployment is admitted.
func TestChartAdmissionPolicyBindsTheReleasesServiceAccount(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns, user = "ops", "system:serviceaccount:ops:acme-cantus-operator"
	_, err := command(t, nil, "kubectl", "create", "namespace", ns)
	g.Expect(err).NotTo(HaveOccurred())
	manifests, err := command(t, nil, helmBin, "template", "acme", chart, "-n", ns, "--show-only", "templates/admission.yaml",
		"--set", "adapterImage=example.com/adapter:1")
	g.Expect(err).NotTo(HaveOccurred(), manifests)
	out, err := command(t, []byte(manifests), "kubectl", "apply", "--server-side", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	t.Cleanup(func() { _, _ = command(t, []byte(manifests), "kubectl", "delete", "-f", "-") })

	// Authorization is not the point: the release's account may do anything, and only
	// admission stands in its way.
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "acme-everything"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	g.Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, binding) })
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	operator, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	own := map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}
	labels := map[string]string{"app": "adapter"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adapter", Labels: own,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "cantus.dev/v1alpha1", Kind: "SkillServer", Name: "adapter", UID: "u", Controller: ptr.To(true)}}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "adapter", "app.kubernetes.io/managed-by": "cantus-operator"}},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false),
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{Name: "adapter", Image: "example.com/adapter:1", Command: []string{"/adapter"},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
			},
		}},
	}
	// The policy and its parameters reach the API server's admission through informers.
	g.Eventually(func() string {
		forbidden := dep.DeepCopy()
		forbidden.Spec.Template.Spec.HostNetwork = true
		err := operator.Create(ctx, forbidden, client.DryRunAll)
		if err == nil {
			return "admitted"
		}
		return err.Error()
	}, 30*time.Second, 200*time.Millisecond).Should(ContainSubstring("ValidatingAdmissionPolicy 'acme-cantus-operator-restricted-workloads'"))
	g.Expect(operator.Create(ctx, dep, client.DryRunAll)).To(Succeed())

	params := &corev1.ConfigMap{}
	g.Expect(operator.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-cantus-operator-admission"}, params)).To(Succeed())
	g.Expect(params.Data["adapterImages"]).To(Equal("example.com/adapter:1"))
	g.Expect(params.Data["serviceAccounts"]).To(Equal("*/default"))
	g.Expect(params.Data).To(HaveKeyWithValue("bridgeImages", ""))
	before := params.DeepCopy()
	params.Data["adapterImages"] = "example.com/miner:1"
	err = operator.Patch(ctx, params, client.MergeFrom(before), client.DryRunAll)
	g.Expect(err).To(HaveOccurred())
	// Two of the release's policies refuse it (the params are not the operator's own
	// object either); the API server names the first.
	g.Expect(strings.Contains(err.Error(), "acme-cantus-operator-admission-params") ||
		strings.Contains(err.Error(), "acme-cantus-operator-own-objects")).To(BeTrue(), err.Error())

	// The release keeps its revocations in its own namespace, and nowhere else.
	state := func(namespace string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cantus-operator-revocations", Labels: own}}
	}
	g.Expect(operator.Create(ctx, state(ns), client.DryRunAll)).To(Succeed())
	g.Expect(operator.Create(ctx, state("default"), client.DryRunAll)).To(MatchError(ContainSubstring("acme-cantus-operator-own-objects")))
}
