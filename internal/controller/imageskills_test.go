package controller

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// skillImageFolder is the content of the test skill image hack/test-images.sh builds.
var skillImageFolder = filepath.Join("..", "..", "test", "cluster", "testdata", "skill-image")

// TestImageSkillStatusComesFromThePods: the operator cannot read an image, so a skill
// from one enters status.agentSkills (and the SKILLS count) from what the pods list,
// once the real adapter, in a pod emulated with the image volume's folder, serves it;
// its digest is that of the image's files. A skill of the image that breaks a rule is
// left out by the adapter, and Verified=False (ImageSkillsLeftOut) names it, so the
// server is not Ready, while the good skill stays in the status.
func TestImageSkillStatusComesFromThePods(t *testing.T) {
	requireRoot(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	image := "registry.example.com/skills/" + ns + ":1"
	emulatedImages[image] = skillImageFolder
	t.Cleanup(func() { delete(emulatedImages, image) })
	policy := &cantusv1alpha1.ToolSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: "images-" + ns}, Spec: cantusv1alpha1.ToolSourcePolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Images:            []string{"registry.example.com/skills/" + ns},
	}}
	g.Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), policy) })
	routes := newServiceRoutes()
	startManagerVerifying(t, workload.NewKubernetes(nil, "example.com/cantus:test", "cluster.local"), &MCPVerifier{Dial: routes.Dial, Timeout: 2 * time.Second})

	imageSkill := func(name string) cantusv1alpha1.AgentSkill {
		return cantusv1alpha1.AgentSkill{Name: name, Path: "library", Image: &cantusv1alpha1.SkillImageSource{Reference: image, Path: "skills/" + name}}
	}
	ss := kubekit.NewSkillServer(ns, "catalogue", kubekit.TemplateSkill("search_book", "found: {{ .title }}"))
	ss.Spec.AgentSkills = []cantusv1alpha1.AgentSkill{imageSkill("cataloguing")}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	dep := runEmulatedPods(t, g, ctx, routes, ns, "catalogue", "")

	files := folderFiles(t, filepath.Join(skillImageFolder, "skills", "cataloguing"))
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "catalogue"), 20*time.Second).Should(
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "catalogue")()
	g.Expect(got.Status.AgentSkills).To(HaveLen(1))
	g.Expect(got.Status.AgentSkills[0]).To(And(
		HaveField("URI", "skill://library/cataloguing/SKILL.md"), HaveField("Name", "cataloguing"),
		HaveField("Digest", expectedManifestDigestAt("library/cataloguing", files)),
		HaveField("Description", HavePrefix("Catalogue a new book"))))
	g.Expect(got.Status.AgentSkillCount).To(Equal(int32(1)))
	g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, cantusv1alpha1.ConditionVerified).Message).To(ContainSubstring("1 of them from images"))

	// A reconcile that does not list the pods again (nothing changed) keeps the entry
	// learned from them.
	resync := &SkillServerReconciler{Client: k8sClient, Runtime: workload.NewKubernetes(k8sClient, "example.com/cantus:test", "cluster.local")}
	_, err := resync.Reconcile(ctx, kubekit.ReconcileRequest(got))
	g.Expect(err).NotTo(HaveOccurred())
	got, _ = kubekit.GetSkillServer(ctx, k8sClient, ns, "catalogue")()
	g.Expect(got.Status.AgentSkills).To(ConsistOf(HaveField("URI", "skill://library/cataloguing/SKILL.md")))
	g.Expect(got.Status.AgentSkillCount).To(Equal(int32(1)))

	// The broken skill of the same image is added: new pods, which leave it out.
	g.Expect(kubekit.Update(ctx, k8sClient, got, func(got *cantusv1alpha1.SkillServer) {
		got.Spec.AgentSkills = append(got.Spec.AgentSkills, imageSkill("broken"))
	})).To(Succeed())
	runEmulatedPods(t, g, ctx, routes, ns, "catalogue", dep.Spec.Template.Annotations[workload.AnnotationConfigHash])
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "catalogue"), 20*time.Second).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionVerified, metav1.ConditionFalse, cantusv1alpha1.ReasonImageSkillsLeftOut),
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonImageSkillsLeftOut)))
	got, _ = kubekit.GetSkillServer(ctx, k8sClient, ns, "catalogue")()
	g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, cantusv1alpha1.ConditionVerified).Message).To(And(
		ContainSubstring("skill://library/broken/SKILL.md"), ContainSubstring("cantus_adapter_image_skills_left_out")))
	g.Expect(got.Status.AgentSkills).To(ConsistOf(HaveField("URI", "skill://library/cataloguing/SKILL.md")))
}

// runEmulatedPods waits for the Deployment's template to leave the config hash
// oldHash, starts its pod (emulated), routes the Service to it and marks the
// Deployment available.
func runEmulatedPods(t *testing.T, g Gomega, ctx context.Context, routes *serviceRoutes, ns, name, oldHash string) *appsv1.Deployment {
	t.Helper()
	dep, svc := &appsv1.Deployment{}, &corev1.Service{}
	g.Eventually(func() (string, error) {
		err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: name}, dep)
		return dep.Spec.Template.Annotations[workload.AnnotationConfigHash], err
	}, 20*time.Second).ShouldNot(Or(BeEmpty(), Equal(oldHash)))
	g.Eventually(func() error { return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: name}, svc) }).Should(Succeed())
	routes.route(t, svc, startAsPodBehindService(t, ctx, dep).BaseURL)
	markDeploymentAvailable(g, ctx, dep)
	return dep
}

// expectedManifestDigestAt is the status digest of a skill at skillPath with files.
func expectedManifestDigestAt(skillPath string, files map[string][]byte) string {
	fm, err := adapterconfig.SkillFrontmatter(files[adapterconfig.SkillManifestFile])
	if err != nil {
		panic(err)
	}
	var list []adapterconfig.SkillFile
	for p, data := range files {
		list = append(list, adapterconfig.SkillFile{Path: p, Digest: "sha256:" + testkit.HexSHA256(data), Size: int64(len(data))})
	}
	return render.SkillManifestDigest(skillPath, fm, list)
}
