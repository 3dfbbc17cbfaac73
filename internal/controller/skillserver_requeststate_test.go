package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// A gateway (a SkillServer with imports) gets a request state Secret it controls,
// holding one key; its pods read the key from that Secret through the projected
// import files at the path the adapter config names, and neither the config nor the
// pod template holds the key. A rotation asked for on the Secret adds a new key after
// the current one (the steps that follow are timed: TestNextRequestStateKeys_*); a
// deleted Secret is made again. A server without imports gets none.
func TestRequestStateKeys_GatewayOwnsASecretItsPodsRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	mgr := newTestManager(t)
	kube := workload.NewKubernetes(nil, "img", "cluster.local")
	kube.Client, kube.APIReader = ChildClient(mgr), mgr.GetAPIReader()
	g.Expect((&SkillServerReconciler{Client: mgr.GetClient(), Runtime: kube, Recorder: mgr.GetEventRecorder("cantus-operator")}).SetupWithManager(mgr)).To(Succeed())
	kubekit.RunManager(t, mgr)

	gw := kubekit.NewSkillServer(ns, "gw", kubekit.TemplateSkill("hello", "hi"))
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "upstream"}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	plain := kubekit.NewSkillServer(ns, "plain", kubekit.TemplateSkill("hello", "hi"))
	g.Expect(k8sClient.Create(ctx, plain)).To(Succeed())

	secretName := render.RequestStateSecretName("gw")
	keys := func() ([]string, error) {
		s := &corev1.Secret{}
		if err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: secretName}, s); err != nil {
			return nil, err
		}
		return strings.Fields(string(s.Data[render.RequestStateKeysKey])), nil
	}
	g.Eventually(keys, 30*time.Second).Should(HaveLen(1))
	first, _ := keys()
	g.Expect(len(first[0])).To(BeNumerically(">=", 32))
	secret := &corev1.Secret{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: secretName}, secret)).To(Succeed())
	owner := secret.OwnerReferences
	g.Expect(owner).To(HaveLen(1))
	g.Expect(owner[0].Kind).To(Equal("SkillServer"))
	g.Expect(owner[0].UID).To(Equal(gw.UID))
	g.Expect(owner[0].Controller).To(HaveValue(BeTrue()))

	dep := &appsv1.Deployment{}
	g.Eventually(func() error { return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "gw"}, dep) }, 30*time.Second).Should(Succeed())
	var source *corev1.SecretProjection
	var volume string
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.Secret != nil && s.Secret.Name == secretName {
				source, volume = s.Secret, v.Name
			}
		}
	}
	g.Expect(source).NotTo(BeNil(), "the pod template projects the request state Secret")
	g.Expect(source.Items).To(ConsistOf(corev1.KeyToPath{Key: render.RequestStateKeysKey,
		Path: strings.TrimPrefix(render.RequestStateKeyFile, render.ImportFilesDir+"/")}))
	g.Expect(dep.Spec.Template.Spec.Containers[0].VolumeMounts).To(ContainElement(And(
		HaveField("Name", volume), HaveField("MountPath", render.ImportFilesDir), HaveField("ReadOnly", true), HaveField("SubPath", ""))))
	template, _ := json.Marshal(dep.Spec.Template)
	g.Expect(string(template)).NotTo(ContainSubstring(first[0]))

	cm := &corev1.ConfigMap{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: workload.ConfigMapName(gw)}, cm)).To(Succeed())
	var cfg adapterconfig.Config
	g.Expect(json.Unmarshal([]byte(cm.Data[adapterconfig.ConfigFileName]), &cfg)).To(Succeed())
	g.Expect(cfg.RequestStateKeyFile).To(Equal(render.RequestStateKeyFile))
	g.Expect(cm.Data[adapterconfig.ConfigFileName]).NotTo(ContainSubstring(first[0]))

	secret.Annotations = map[string]string{cantusv1alpha1.AnnotationRotateRequestStateKey: "2026-12-06T19:00:00Z"}
	g.Expect(k8sClient.Update(ctx, secret)).To(Succeed())
	g.Eventually(keys, 30*time.Second).Should(And(HaveLen(2), HaveEach(Not(BeEmpty()))))
	rotated, _ := keys()
	g.Expect(rotated[0]).To(Equal(first[0]), "the current key seals until every pod has the new one")
	g.Expect(rotated[1]).NotTo(Equal(first[0]))

	g.Expect(k8sClient.Delete(ctx, secret)).To(Succeed())
	g.Eventually(func() (bool, error) {
		got, err := keys()
		return err == nil && len(got) == 1 && got[0] != rotated[0] && got[0] != rotated[1], crclient.IgnoreNotFound(err)
	}, 30*time.Second).Should(BeTrue(), "a deleted Secret is made again, with a new key")

	g.Eventually(func() error {
		return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "plain"}, &appsv1.Deployment{})
	}, 30*time.Second).Should(Succeed())
	err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: render.RequestStateSecretName("plain")}, &corev1.Secret{})
	g.Expect(err).To(MatchError(ContainSubstring("not found")), "a server without imports has no request state Secret")
}
