package controller

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

func kubernetesReconciler() *SkillServerReconciler {
	return &SkillServerReconciler{Client: k8sClient, Runtime: workload.NewKubernetes(k8sClient, "img", "cluster.local")}
}

// expectedManifestDigest is the manifest digest of the skill acme/pdf-forms with the
// frontmatter of kubekit.FormsSkillMD and these files.
func expectedManifestDigest(files map[string][]byte) string {
	var list []adapterconfig.SkillFile
	for p, data := range files {
		list = append(list, adapterconfig.SkillFile{Path: p, Digest: "sha256:" + testkit.HexSHA256(data), Size: int64(len(data))})
	}
	return render.SkillManifestDigest("acme/pdf-forms", json.RawMessage(`{"name":"pdf-forms","description":"Fill PDF forms.","enabled":"yes"}`), list)
}

// TestSkillFromConfigMapIsDeliveredByDigest: the skill's files reach an owned content
// ConfigMap under the sha256 of their bytes, mounted into the pods at the config's
// ContentDir; the status lists the skill with its manifest digest, the prompt and the
// resource. Editing the ConfigMap changes the digest and the shard in place without a
// new rollout hash on the pod template.
func TestSkillFromConfigMapIsDeliveredByDigest(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	forms := "# Forms\nfield: value\n"
	cm := kubekit.SkillConfigMap(ns, "pdf", map[string]string{"SKILL.md": kubekit.FormsSkillMD, "references.FORMS.md": forms}, true)
	g.Expect(k8sClient.Create(ctx, cm)).To(Succeed())
	ss := kubekit.ContentSkillServer(ns, "docs")
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	r := kubernetesReconciler()
	_, err := r.Reconcile(ctx, kubekit.ReconcileRequest(ss))
	g.Expect(err).NotTo(HaveOccurred())

	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")()
	g.Expect(got.Status.AgentSkills).To(HaveLen(1))
	served := got.Status.AgentSkills[0]
	g.Expect(served).To(And(
		HaveField("URI", "skill://acme/pdf-forms/SKILL.md"), HaveField("Name", "pdf-forms"),
		HaveField("Digest", expectedManifestDigest(map[string][]byte{"SKILL.md": []byte(kubekit.FormsSkillMD), "references/FORMS.md": []byte(forms)})),
		HaveField("Description", "Fill PDF forms."), HaveField("FrontmatterClipped", false),
	))
	g.Expect(served.Frontmatter).NotTo(BeNil())
	g.Expect(served.Frontmatter.Raw).To(MatchJSON(`{"name":"pdf-forms","description":"Fill PDF forms.","enabled":"yes"}`))
	g.Expect(got.Status.Prompts).To(Equal([]string{"greet"}))
	g.Expect(got.Status.Resources).To(Equal([]string{"docs://guide"}))
	g.Expect([]int32{got.Status.AgentSkillCount, got.Status.PromptCount, got.Status.ResourceCount}).To(Equal([]int32{1, 1, 1}))
	g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", cantusv1alpha1.ConditionContentValid), HaveField("Status", metav1.ConditionTrue))))

	shard := &corev1.ConfigMap{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "docs-content-0"}, shard)).To(Succeed())
	g.Expect(metav1.IsControlledBy(shard, got)).To(BeTrue())
	g.Expect(shard.BinaryData).To(Equal(map[string][]byte{testkit.HexSHA256([]byte(kubekit.FormsSkillMD)): []byte(kubekit.FormsSkillMD), testkit.HexSHA256([]byte(forms)): []byte(forms)}))

	config := &corev1.ConfigMap{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: workload.ConfigMapName(got)}, config)).To(Succeed())
	g.Expect(config.Data[adapterconfig.ConfigFileName]).To(ContainSubstring(`"contentDir": "` + render.ContentMountPath + `"`))
	g.Expect(config.Data[adapterconfig.ConfigFileName]).To(ContainSubstring(`"enabled": "yes"`), "YAML 1.2: yes stays a string")

	dep := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "docs"}, dep)).To(Succeed())
	pod := dep.Spec.Template.Spec
	g.Expect(pod.Volumes).To(ContainElement(And(HaveField("Name", "content"),
		HaveField("VolumeSource.Projected.Sources", ConsistOf(HaveField("ConfigMap.Name", "docs-content-0"))))))
	g.Expect(pod.Containers[0].VolumeMounts).To(ContainElement(And(
		HaveField("Name", "content"), HaveField("MountPath", render.ContentMountPath), HaveField("ReadOnly", true))))
	rolloutHash := dep.Spec.Template.Annotations[workload.AnnotationConfigHash]

	edited := kubekit.FormsSkillMD + "More.\n"
	cm.Data["SKILL.md"] = edited
	g.Expect(k8sClient.Update(ctx, cm)).To(Succeed())
	_, err = r.Reconcile(ctx, kubekit.ReconcileRequest(ss))
	g.Expect(err).NotTo(HaveOccurred())
	after, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")()
	g.Expect(after.Status.AgentSkills[0].Digest).To(Equal(expectedManifestDigest(map[string][]byte{"SKILL.md": []byte(edited), "references/FORMS.md": []byte(forms)})))
	g.Expect(after.Status.ConfigHash).NotTo(Equal(got.Status.ConfigHash), "the adapter reloads the new config")
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "docs-content-0"}, shard)).To(Succeed())
	g.Expect(shard.BinaryData).To(HaveKeyWithValue(testkit.HexSHA256([]byte(edited)), []byte(edited)))
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "docs"}, dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Annotations[workload.AnnotationConfigHash]).To(Equal(rolloutHash), "a content edit must not roll the pods")
}

// TestContentProblemsKeepTheLastGoodContent: a missing ConfigMap, one without the label,
// and content that breaks a rule make the server not Ready with a message naming the
// ConfigMap, the file and the rule; the owned content keeps the last good files.
func TestContentProblemsKeepTheLastGoodContent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	ss := kubekit.ContentSkillServer(ns, "docs")
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	r := kubernetesReconciler()
	reconcileAndRead := func() *cantusv1alpha1.SkillServer {
		_, err := r.Reconcile(ctx, kubekit.ReconcileRequest(ss))
		g.Expect(err).NotTo(HaveOccurred())
		got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")()
		return got
	}
	contentValid := func(got *cantusv1alpha1.SkillServer) *metav1.Condition {
		return kubekit.FindCondition(got, cantusv1alpha1.ConditionContentValid)
	}

	got := reconcileAndRead()
	g.Expect(contentValid(got)).To(And(HaveField("Reason", cantusv1alpha1.ReasonContentMissing), HaveField("Message", ContainSubstring("ConfigMap pdf not found"))))
	g.Expect(got).To(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonContentMissing))
	g.Expect(got).NotTo(kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonInvalidSpec), "a ConfigMap can fix it: not Stalled")

	cm := kubekit.SkillConfigMap(ns, "pdf", map[string]string{"SKILL.md": kubekit.FormsSkillMD, "references.FORMS.md": "# Forms"}, false)
	g.Expect(k8sClient.Create(ctx, cm)).To(Succeed())
	g.Expect(contentValid(reconcileAndRead())).To(HaveField("Message", ContainSubstring("ConfigMap pdf exists but does not carry the label cantus.dev/content=true")))

	cm.Labels = map[string]string{cantusv1alpha1.ContentLabel: "true"}
	g.Expect(k8sClient.Update(ctx, cm)).To(Succeed())
	g.Expect(contentValid(reconcileAndRead())).To(HaveField("Status", metav1.ConditionTrue))
	goodShard := &corev1.ConfigMap{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "docs-content-0"}, goodShard)).To(Succeed())

	cm.Data["SKILL.md"] = "---\nname: pdf\ndescription: Fill PDF forms.\n---\n"
	g.Expect(k8sClient.Update(ctx, cm)).To(Succeed())
	got = reconcileAndRead()
	g.Expect(contentValid(got)).To(And(HaveField("Reason", cantusv1alpha1.ReasonInvalidContent),
		HaveField("Message", And(ContainSubstring("ConfigMap pdf"), ContainSubstring(`name "pdf" must equal the skill directory's name "pdf-forms"`)))))
	g.Expect(got).To(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonInvalidContent))
	shard := &corev1.ConfigMap{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "docs-content-0"}, shard)).To(Succeed())
	g.Expect(shard.BinaryData).To(Equal(goodShard.BinaryData), "invalid content is never written where pods read it")
}

// TestContentConfigMapEditReconciles: the manager watches labelled ConfigMaps and
// re-renders the servers that read them.
func TestContentConfigMapEditReconciles(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	startManager(t, workload.NewKubernetes(nil, "img", "cluster.local"))
	cm := kubekit.SkillConfigMap(ns, "pdf", map[string]string{"SKILL.md": kubekit.FormsSkillMD, "references.FORMS.md": "# Forms"}, true)
	g.Expect(k8sClient.Create(ctx, cm)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.ContentSkillServer(ns, "docs"))).To(Succeed())
	digest := func(ss *cantusv1alpha1.SkillServer) string {
		if len(ss.Status.AgentSkills) == 0 {
			return ""
		}
		return ss.Status.AgentSkills[0].Digest
	}
	first := expectedManifestDigest(map[string][]byte{"SKILL.md": []byte(kubekit.FormsSkillMD), "references/FORMS.md": []byte("# Forms")})
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")).Should(WithTransform(digest, Equal(first)))
	cm.Data["references.FORMS.md"] = "# Forms, edited"
	g.Expect(k8sClient.Update(ctx, cm)).To(Succeed())
	second := expectedManifestDigest(map[string][]byte{"SKILL.md": []byte(kubekit.FormsSkillMD), "references/FORMS.md": []byte("# Forms, edited")})
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")).Should(WithTransform(digest, Equal(second)))
}

// TestPrinterColumns: kubectl get shows the skills served by default and prompts and
// resources with -o wide.
func TestPrinterColumns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	g.Expect(k8sClient.Create(ctx, kubekit.SkillConfigMap(ns, "pdf", map[string]string{"SKILL.md": kubekit.FormsSkillMD, "references.FORMS.md": "# Forms"}, true))).To(Succeed())
	ss := kubekit.ContentSkillServer(ns, "docs")
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	_, err := kubernetesReconciler().Reconcile(ctx, kubekit.ReconcileRequest(ss))
	g.Expect(err).NotTo(HaveOccurred())

	get := func(args ...string) []string {
		out, err := kubectl(t, append([]string{"get", "skillservers", "-n", ns}, args...)...)
		g.Expect(err).NotTo(HaveOccurred(), out)
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	lines := get()
	g.Expect(strings.Fields(lines[0])).To(Equal([]string{"NAME", "READY", "URL", "TOOLS", "SKILLS", "REPLICAS", "AGE"}))
	g.Expect(tableRow(lines[0], lines[1])).To(HaveKeyWithValue("SKILLS", "1"), lines[1])
	wide := get("-o", "wide")
	g.Expect(tableRow(wide[0], wide[1])).To(And(HaveKeyWithValue("SKILLS", "1"), HaveKeyWithValue("PROMPTS", "1"), HaveKeyWithValue("RESOURCES", "1")), wide[1])
}

// tableRow reads a row of kubectl's table by the columns' positions in the header
// (empty cells leave no field to count).
func tableRow(header, row string) map[string]string {
	out := map[string]string{}
	names := strings.Fields(header)
	for i, name := range names {
		start := strings.Index(header, name)
		end := len(row)
		if i+1 < len(names) {
			end = min(strings.Index(header, names[i+1]), len(row))
		}
		if start < len(row) {
			out[name] = strings.TrimSpace(row[start:end])
		}
	}
	return out
}

// kubectl runs the kubectl of the test control plane against it.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flags := []string{"--server", restConfig.Host,
		"--certificate-authority", write("ca.crt", restConfig.CAData),
		"--client-certificate", write("client.crt", restConfig.CertData),
		"--client-key", write("client.key", restConfig.KeyData)}
	cmd := exec.CommandContext(context.Background(), filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), append(flags, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAgentSkillsSample: the sample's ConfigMap and SkillServer are accepted by the API
// server and render the skill, the prompt and the resource.
func TestAgentSkillsSample(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "cantus_v1alpha1_skillserver_agentskills.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var ss *cantusv1alpha1.SkillServer
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
		obj.SetNamespace(ns)
		g.Expect(k8sClient.Create(ctx, obj)).To(Succeed(), obj.GetKind())
		if obj.GetKind() == "SkillServer" {
			ss = &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: obj.GetName()}}
		}
	}
	_, err = kubernetesReconciler().Reconcile(ctx, kubekit.ReconcileRequest(ss))
	g.Expect(err).NotTo(HaveOccurred())
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, ss.Name)()
	g.Expect(got.Status.AgentSkills).To(ConsistOf(HaveField("URI", "skill://acme/support/pdf-forms/SKILL.md")))
	g.Expect(got.Status.Prompts).To(Equal([]string{"summarize_ticket"}))
	g.Expect(got.Status.Resources).To(Equal([]string{"docs://support/escalation"}))
	g.Expect(kubekit.StalledMessage(got)).To(BeEmpty())
}

// TestPolicyChangeReleasesImageSkill: a ToolSourcePolicy that comes to allow an image
// re-renders the servers mounting it, without a change to them.
func TestPolicyChangeReleasesImageSkill(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	startManager(t, workload.NewKubernetes(nil, "img", "cluster.local"))
	image := "registry.example.com/released/" + ns
	ss := kubekit.NewSkillServer(ns, "imaged")
	ss.Spec.AgentSkills = []cantusv1alpha1.AgentSkill{{Name: "pdf-forms", Image: &cantusv1alpha1.SkillImageSource{Reference: image + ":1"}}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "imaged")).Should(WithTransform(kubekit.StalledMessage, ContainSubstring(image)))
	policy := &cantusv1alpha1.ToolSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: "released-" + ns}, Spec: cantusv1alpha1.ToolSourcePolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Images:            []string{image},
	}}
	g.Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), policy) })
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "imaged")).Should(WithTransform(kubekit.StalledMessage, BeEmpty()))
}
