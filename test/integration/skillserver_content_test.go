package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/controller"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload/local"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// TestImageSkills: an image skill is refused on the local runtime and without a policy
// (Stalled: only the spec or the admin's policy can fix it); allowed by a policy, the
// kubernetes runtime mounts it as an image volume.
func TestImageSkills(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	ss := kubekit.NewSkillServer(ns, "imaged")
	ss.Spec.AgentSkills = []cantusv1alpha1.AgentSkill{{Name: "pdf-forms", Image: &cantusv1alpha1.SkillImageSource{Reference: "registry.example.com/skills/" + ns + ":1", PullPolicy: corev1.PullIfNotPresent}}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	onHost := &controller.SkillServerReconciler{Client: k8sClient, Runtime: local.New(k8sClient)}
	_, err := onHost.Reconcile(ctx, kubekit.ReconcileRequest(ss))
	g.Expect(err).To(kubekit.BeTerminal())
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "imaged")()
	g.Expect(got).To(kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonInvalidSpec))
	g.Expect(kubekit.StalledMessage(got)).To(ContainSubstring("only the kubernetes runtime mounts"))

	r := kubernetesReconciler()
	_, err = r.Reconcile(ctx, kubekit.ReconcileRequest(ss))
	g.Expect(err).To(kubekit.BeTerminal(), "stalled again, for another reason")
	got, _ = kubekit.GetSkillServer(ctx, k8sClient, ns, "imaged")()
	g.Expect(kubekit.StalledMessage(got)).To(ContainSubstring("registry.example.com/skills/" + ns))

	policy := &cantusv1alpha1.ToolSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: "skills-" + ns}, Spec: cantusv1alpha1.ToolSourcePolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Images:            []string{"registry.example.com/skills/" + ns},
	}}
	g.Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), policy) })
	_, err = r.Reconcile(ctx, kubekit.ReconcileRequest(ss))
	g.Expect(err).NotTo(HaveOccurred())
	got, _ = kubekit.GetSkillServer(ctx, k8sClient, ns, "imaged")()
	g.Expect(kubekit.StalledMessage(got)).To(BeEmpty())
	dep := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "imaged"}, dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.Volumes).To(ContainElement(And(HaveField("Name", "skill-image-0"),
		HaveField("VolumeSource.Image.Reference", "registry.example.com/skills/"+ns+":1"), HaveField("VolumeSource.Image.PullPolicy", corev1.PullIfNotPresent))))
}

// TestLocalRuntimeWritesContentByDigest: under the local runtime the skill's files are
// written to a folder of the host, each named by the sha256 of its bytes, and an edit
// writes the new file and removes the one no longer named.
func TestLocalRuntimeWritesContentByDigest(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	adapters := local.New(nil)
	adapters.MemoryDir = t.TempDir()
	startManagerVerifying(t, adapters, nil)
	forms := "# Forms"
	cm := kubekit.SkillConfigMap(ns, "pdf", map[string]string{"SKILL.md": kubekit.FormsSkillMD, "references.FORMS.md": forms}, true)
	g.Expect(k8sClient.Create(ctx, cm)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.ContentSkillServer(ns, "docs"))).To(Succeed())
	dir := filepath.Join(adapters.MemoryDir, ".content", ns, "docs")
	read := func(data string) func() (string, error) {
		return func() (string, error) {
			b, err := os.ReadFile(filepath.Join(dir, testkit.HexSHA256([]byte(data))))
			return string(b), err
		}
	}
	// The files are written one after the other: each is waited for.
	g.Eventually(read(kubekit.FormsSkillMD)).Should(Equal(kubekit.FormsSkillMD))
	g.Eventually(read(forms)).Should(Equal(forms))

	cm.Data["references.FORMS.md"] = "# Forms, edited"
	g.Expect(k8sClient.Update(ctx, cm)).To(Succeed())
	g.Eventually(read("# Forms, edited")).Should(Equal("# Forms, edited"))
	g.Eventually(func() bool { _, err := read(forms)(); return os.IsNotExist(err) }).Should(BeTrue(), "the old file is removed")
}

// TestRealAdapterServesVerifiedContent: with the real adapter (local runtime), a skill
// from a ConfigMap, a prompt and a resource are served, and Verified compares the pods'
// skills/list digests and prompts/list names with what was rendered; after an edit of
// SKILL.md the digest changes and the pods are verified again.
func TestRealAdapterServesVerifiedContent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	adapters := local.New(nil)
	adapters.MemoryDir = t.TempDir()
	startManager(t, adapters)
	cm := kubekit.SkillConfigMap(ns, "pdf", map[string]string{"SKILL.md": kubekit.FormsSkillMD, "references.FORMS.md": "# Forms"}, true)
	g.Expect(k8sClient.Create(ctx, cm)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.ContentSkillServer(ns, "docs"))).To(Succeed())
	verified := And(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled),
		WithTransform(func(ss *cantusv1alpha1.SkillServer) string {
			return kubekit.ConditionMessage(ss, cantusv1alpha1.ConditionVerified)
		}, ContainSubstring("skills/list and prompts/list with the 1 skills (by manifest digest) and 1 prompts rendered")))
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")).Should(verified)
	before, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")()

	cm.Data["SKILL.md"] = kubekit.FormsSkillMD + "edited\n"
	g.Expect(k8sClient.Update(ctx, cm)).To(Succeed())
	g.Eventually(func() string {
		s, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")()
		return s.Status.AgentSkills[0].Digest
	}).ShouldNot(Equal(before.Status.AgentSkills[0].Digest))
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")).Should(verified)
}
