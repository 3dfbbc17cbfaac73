package controller

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

func TestMemoryServerOwnsAClaimAndMountsIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	size := cantusv1alpha1.Quantity("2Gi")
	ss := kubekit.NewSkillServer(ns, "notes")
	ss.Spec.Memory = &cantusv1alpha1.MemorySpec{Size: &size, StorageClassName: ptr.To("fast")}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	r := &SkillServerReconciler{Client: k8sClient, Runtime: workload.NewKubernetes(k8sClient, "img", "cluster.local")}
	_, err := r.Reconcile(ctx, kubekit.ReconcileRequest(ss))
	g.Expect(err).NotTo(HaveOccurred())

	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "notes-memory"}, pvc)).To(Succeed())
	g.Expect(metav1.IsControlledBy(pvc, ss)).To(BeTrue())
	g.Expect(pvc.Spec.AccessModes).To(Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}))
	g.Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("2Gi"))
	g.Expect(pvc.Spec.StorageClassName).To(Equal(ptr.To("fast")))

	dep := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "notes"}, dep)).To(Succeed())
	g.Expect(*dep.Spec.Replicas).To(Equal(int32(1)))
	g.Expect(dep.Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType), "a ReadWriteOnce claim cannot be mounted by the new pod while the old one runs")
	pod := dep.Spec.Template.Spec
	g.Expect(pod.SecurityContext.FSGroup).To(Equal(ptr.To(int64(65532))), "the non-root adapter can write the volume")
	g.Expect(pod.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "notes-memory")))
	g.Expect(pod.Containers[0].VolumeMounts).To(ContainElement(And(
		HaveField("Name", "memory"), HaveField("MountPath", render.MemoryMountPath), HaveField("ReadOnly", false))))
	g.Expect(pod.Containers[0].SecurityContext.ReadOnlyRootFilesystem).To(Equal(ptr.To(true)))

	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "notes")()
	g.Expect(got.Status.Tools).To(ContainElement(cantusv1alpha1.ServedTool{Name: "memory", Source: "memory"}))
}

func TestAPIServerRefusesMemoryContradictions(t *testing.T) {
	ns := kubekit.NewNamespace(t, k8sClient)
	cases := []struct {
		name, spec, want string
	}{
		{"two replicas on a ReadWriteOnce claim", "replicas: 2\n  memory: {}", "set replicas: 1, or memory.accessMode: ReadWriteMany"},
		{"memory tool named like a skill", "memory: {toolName: notes}\n  skills: [{name: notes, template: {text: x}}]", "memory.toolName collides with a skill"},
		{"unknown memory command", "memory: {allowedCommands: [view, format]}", `Unsupported value: "format"`},
		{"zero quota", "memory: {maxFileBytes: 0}", "spec.memory.maxFileBytes in body should be greater than or equal to 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			manifest := "apiVersion: cantus.dev/v1alpha1\nkind: SkillServer\nmetadata:\n  name: bad\n  namespace: " + ns + "\nspec:\n  " + tc.spec + "\n"
			if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
				t.Fatalf("manifest: %v", err)
			}
			err := k8sClient.Create(context.Background(), obj)
			if err == nil {
				_ = k8sClient.Delete(context.Background(), obj)
				t.Fatalf("accepted:\n%s", manifest)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused without saying %q: %v", tc.want, err)
			}
		})
	}
	t.Run("several replicas on a ReadWriteMany claim are fine", func(t *testing.T) {
		ss := kubekit.NewSkillServer(ns, "shared-notes")
		ss.Spec.Replicas = ptr.To(int32(3))
		ss.Spec.Memory = &cantusv1alpha1.MemorySpec{AccessMode: corev1.ReadWriteMany}
		if err := k8sClient.Create(context.Background(), ss); err != nil {
			t.Fatalf("refused: %v", err)
		}
	})
}
