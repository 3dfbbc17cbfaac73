package controller

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

func TestSkillServerOwnsSecureChildrenAndBecomesReady(t *testing.T) {
	requireRoot(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	routes := newServiceRoutes()
	kube := workload.NewKubernetes(nil, "example.com/cantus:test", "cluster.local")
	kube.Operator = workload.OperatorPeer("cantus-system")
	startManagerVerifying(t, kube, &MCPVerifier{Dial: routes.Dial, Timeout: 2 * time.Second})

	ss := kubekit.NewSkillServer(ns, "books", kubekit.TemplateSkill("search_book", "found: {{ .title }}"))
	ss.Spec.AllowFrom = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "agent"}}}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	dep, cm, svc, np := &appsv1.Deployment{}, &corev1.ConfigMap{}, &corev1.Service{}, &networkingv1.NetworkPolicy{}
	for name, obj := range map[string]crclient.Object{"books": dep, "books-adapter": cm} {
		g.Eventually(func() error { return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: name}, obj) }).Should(Succeed())
	}
	for _, obj := range []crclient.Object{svc, np} {
		g.Eventually(func() error { return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "books"}, obj) }).Should(Succeed())
	}

	for _, obj := range []metav1.Object{dep, cm, svc, np} {
		g.Expect(metav1.IsControlledBy(obj, ss)).To(BeTrue(), "%s is controlled by the SkillServer", obj.GetName())
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(workload.LabelSkillServer, "books"))
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(workload.LabelManagedBy, "cantus-operator"))
	}

	pod := dep.Spec.Template.Spec
	g.Expect(pod.AutomountServiceAccountToken).To(Equal(ptr.To(false)))
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(Equal(ptr.To(true)))
	g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	g.Expect(pod.Containers).To(HaveLen(1))
	c := pod.Containers[0]
	g.Expect(c.Image).To(Equal("example.com/cantus:test"))
	g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(Equal(ptr.To(true)))
	g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(Equal(ptr.To(false)))
	g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(c.Resources.Requests).NotTo(BeEmpty())
	g.Expect(c.Resources.Limits).To(HaveKey(corev1.ResourceMemory))
	g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal(adapterconfig.PathReadyz))
	g.Expect(c.Args).To(ContainElements("--config", workload.ConfigPath))
	// /metrics has a port of its own, which the Service does not expose (issue 23, #9).
	g.Expect(c.Args).To(ContainElements("--metrics-port", "9090"))
	g.Expect(c.Ports).To(ContainElement(And(HaveField("Name", "metrics"), HaveField("ContainerPort", int32(9090)))))
	g.Expect(cm.Data).To(HaveKey(adapterconfig.ConfigFileName))
	// Discovery: kagent finds the Service by label and annotations, agentgateway by the
	// port's appProtocol.
	g.Expect(svc.Labels).To(HaveKeyWithValue("kagent.dev/mcp-service", "true"))
	g.Expect(svc.Labels).To(HaveKeyWithValue("cantus.dev/mcp-server", "true"))
	g.Expect(svc.Annotations).To(HaveKeyWithValue("kagent.dev/mcp-service-path", "/mcp"))
	g.Expect(svc.Annotations).To(HaveKeyWithValue("kagent.dev/mcp-service-port", "8765"))
	g.Expect(svc.Annotations).To(HaveKeyWithValue("kagent.dev/mcp-service-protocol", "STREAMABLE_HTTP"))
	g.Expect(svc.Spec.Ports).To(HaveLen(1))
	g.Expect(svc.Spec.Ports[0].TargetPort.StrVal).To(Equal("mcp"))
	g.Expect(svc.Spec.Ports[0].AppProtocol).To(Equal(ptr.To("agentgateway.dev/mcp")))
	g.Expect(np.Spec.Ingress).To(HaveLen(1))
	g.Expect(np.Spec.Ingress[0].From[0].PodSelector.MatchLabels).To(HaveKeyWithValue("role", "agent"))
	// The operator's own pods stay allowed: they verify the server through its Service.
	g.Expect(np.Spec.Ingress[0].From).To(HaveLen(2))
	g.Expect(np.Spec.Ingress[0].From[1].NamespaceSelector.MatchLabels).To(Equal(map[string]string{"kubernetes.io/metadata.name": "cantus-system"}))
	g.Expect(np.Spec.Ingress[0].From[1].PodSelector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "cantus-operator"}))

	// envtest runs no Deployment controller: until its status says the pods are ready,
	// the SkillServer is not Ready.
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "books")).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonProgressing))

	// The pods run, and the operator lists their tools through the Service before Ready.
	routes.route(t, svc, startAsPodBehindService(t, ctx, dep).BaseURL)
	markDeploymentAvailable(g, ctx, dep)
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "books"), 20*time.Second).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionVerified, metav1.ConditionTrue, cantusv1alpha1.ReasonToolsServed),
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled)))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "books")()
	g.Expect(got.Status.URL).To(Equal("http://books." + ns + ".svc.cluster.local:8765/mcp"))
	g.Expect(got.Status.ToolCount).To(Equal(int32(1)))
	g.Expect(got.Status.Tools).To(Equal([]cantusv1alpha1.ServedTool{{Name: "search_book", Source: "skill"}}))
	g.Expect(got.Status.ReadyReplicas).To(Equal(int32(1)))
	g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	g.Expect(got.Status.Selector).To(Equal("app.kubernetes.io/instance=books,app.kubernetes.io/name=cantus-adapter"))

	// A changed spec renders a new config, and the new hash on the pod template rolls the pods.
	oldHash := dep.Spec.Template.Annotations[workload.AnnotationConfigHash]
	g.Expect(oldHash).NotTo(BeEmpty())
	g.Expect(kubekit.Update(ctx, k8sClient, got, func(got *cantusv1alpha1.SkillServer) {
		got.Spec.Skills[0].Template.Text = "catalog hit: {{ .title }}"
		got.Spec.AllowFrom = nil
	})).To(Succeed())
	g.Eventually(func() (string, error) {
		err := k8sClient.Get(ctx, crclient.ObjectKeyFromObject(dep), dep)
		return dep.Spec.Template.Annotations[workload.AnnotationConfigHash], err
	}).ShouldNot(Equal(oldHash))
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(cm), cm)).To(Succeed())
	g.Expect(cm.Data[adapterconfig.ConfigFileName]).To(ContainSubstring("catalog hit"))
	// allowFrom removed: the NetworkPolicy goes.
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(np), &networkingv1.NetworkPolicy{}))
	}).Should(BeTrue())
}

// markDeploymentAvailable does what the Deployment controller and kubelet would do.
func markDeploymentAvailable(g Gomega, ctx context.Context, dep *appsv1.Deployment) {
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(dep), dep)).To(Succeed())
	replicas := ptr.Deref(dep.Spec.Replicas, 1)
	dep.Status = appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation,
		Replicas:           replicas,
		UpdatedReplicas:    replicas,
		ReadyReplicas:      replicas,
		AvailableReplicas:  replicas,
		Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
			LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	g.Expect(k8sClient.Status().Update(ctx, dep)).To(Succeed())
}

func TestStalledWhenTemplateDoesNotParse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	ss := kubekit.NewSkillServer(ns, "broken", kubekit.TemplateSkill("echo", "{{ .title "))
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	r := &SkillServerReconciler{Client: k8sClient, Runtime: workload.NewKubernetes(k8sClient, "img", "cluster.local")}
	result, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: crclient.ObjectKeyFromObject(ss)})
	// Terminal: logged once, no retry and no requeue, so a bad spec does not spin in a retry loop.
	g.Expect(err).To(kubekit.BeTerminal())
	g.Expect(result).To(Equal(ctrl.Result{}))

	got, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "broken")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonInvalidSpec))
	g.Expect(got).To(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonInvalidSpec))
	ready := kubekit.FindCondition(got, cantusv1alpha1.ConditionReady)
	g.Expect(ready.Message).To(ContainSubstring("echo"))
	g.Expect(ready.ObservedGeneration).To(Equal(got.Generation))
	g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "broken"}, &appsv1.Deployment{}))).
		To(BeTrue(), "nothing is deployed for a spec that cannot work")
}

// A rule the API server cannot check (CEL over claims, a glob) is checked before
// anything is rendered: the server is Stalled with the compiler's words, not crash-looping.
func TestStalledWhenAuthorizationRuleDoesNotCompile(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	ss := kubekit.NewSkillServer(ns, "ruled", kubekit.TemplateSkill("echo", "{{ .title }}"))
	ss.Spec.Auth = &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{
		IssuerURL: "https://login.example.com", Audiences: []string{"cantus"},
	}}
	ss.Spec.Authorization = &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
		{Tools: []string{"echo"}, When: "claims.email.endsWith("},
	}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	r := &SkillServerReconciler{Client: k8sClient, Runtime: workload.NewKubernetes(k8sClient, "img", "cluster.local")}
	result, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: crclient.ObjectKeyFromObject(ss)})
	g.Expect(err).To(kubekit.BeTerminal())
	g.Expect(result).To(Equal(ctrl.Result{}))

	got, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "ruled")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonInvalidSpec))
	g.Expect(kubekit.FindCondition(got, cantusv1alpha1.ConditionStalled).Message).To(ContainSubstring("when"))
	g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "ruled"}, &appsv1.Deployment{}))).
		To(BeTrue(), "nothing is deployed for rules that cannot be checked")
}

// The NetworkPolicy is applied before anything that serves: when the API server refuses
// it, no Deployment or Service exists, so the server never runs open to the cluster.
func TestRefusedNetworkPolicyLeavesNothingServing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	ss := kubekit.NewSkillServer(ns, "guarded", kubekit.TemplateSkill("echo", "{{ .title }}"))
	// The CRD cannot check CIDRs cheaply; the NetworkPolicy API does.
	ss.Spec.AllowFrom = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	r := &SkillServerReconciler{Client: k8sClient, Runtime: workload.NewKubernetes(k8sClient, "img", "cluster.local")}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: crclient.ObjectKeyFromObject(ss)})
	g.Expect(err).To(HaveOccurred())

	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "guarded")()
	g.Expect(got).To(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonApplyFailed))
	g.Expect(kubekit.FindCondition(got, cantusv1alpha1.ConditionReady).Message).To(ContainSubstring("NetworkPolicy"))
	for _, obj := range []crclient.Object{&appsv1.Deployment{}, &corev1.Service{}} {
		g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "guarded"}, obj))).
			To(BeTrue(), "%T exists although its NetworkPolicy was refused", obj)
	}
}

func TestSchemaPortableWarnsButServesSchemaUnchanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	schema := `{"type":"object","title":"SearchBookArgs","additionalProperties":false,"properties":{"title":{"type":"string","title":"Title","examples":["Dune"]}},"$defs":{"x":{"type":"string"}}}`
	skill := kubekit.TemplateSkill("search_book", "found: {{ .title }}")
	skill.InputSchema.Raw = []byte(schema)
	ss := kubekit.NewSkillServer(ns, "pydantic", skill)
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	r := &SkillServerReconciler{Client: k8sClient, Runtime: workload.NewKubernetes(k8sClient, "img", "cluster.local")}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: crclient.ObjectKeyFromObject(ss)})
	g.Expect(err).NotTo(HaveOccurred())

	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "pydantic")()
	g.Expect(got).To(kubekit.HaveCondition(cantusv1alpha1.ConditionSchemaPortable, metav1.ConditionFalse, cantusv1alpha1.ReasonNonPortableKeys))
	msg := kubekit.FindCondition(got, cantusv1alpha1.ConditionSchemaPortable).Message
	g.Expect(msg).To(ContainSubstring(`skill "search_book": /title`))
	g.Expect(msg).To(ContainSubstring("/additionalProperties=false"))
	g.Expect(msg).To(ContainSubstring("/properties/title/examples"))

	cm := &corev1.ConfigMap{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "pydantic-adapter"}, cm)).To(Succeed())
	var cfg adapterconfig.Config
	g.Expect(json.Unmarshal([]byte(cm.Data[adapterconfig.ConfigFileName]), &cfg)).To(Succeed())
	g.Expect(cfg.Tools[0].InputSchema).To(MatchJSON(schema), "the schema reaches the adapter unchanged")
}

func TestIdleReconcileWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	ss := kubekit.NewSkillServer(ns, "idle", kubekit.TemplateSkill("search_book", "found: {{ .title }}"))
	ss.Spec.AllowFrom = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	counting := &writeCounter{}
	c := counting.wrap(k8sClient)
	r := &SkillServerReconciler{Client: c, Runtime: workload.NewKubernetes(c, "img", "cluster.local")}
	req := ctrl.Request{NamespacedName: crclient.ObjectKeyFromObject(ss)}
	for range 2 { // the first creates the children, the second records their status
		_, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(counting.count()).To(BeNumerically(">", 0), "the first reconciles do write")

	counting.reset()
	for range 3 {
		_, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(counting.writes()).To(BeEmpty(), "a reconcile of an unchanged SkillServer writes nothing")

	// An operator that restarts has an empty cache; its reconcile of the same SkillServer
	// still writes nothing, since the children carry the request that wrote them.
	restarted := &SkillServerReconciler{Client: c, Runtime: workload.NewKubernetes(c, "img", "cluster.local")}
	_, err := restarted.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(counting.writes()).To(BeEmpty(), "a restarted operator rewrote unchanged children")

	// Someone else edits the Deployment: the next reconcile takes the field back.
	dep := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "idle"}, dep)).To(Succeed())
	dep.Spec.Replicas = ptr.To(int32(7))
	g.Expect(k8sClient.Update(ctx, dep)).To(Succeed())
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(dep), dep)).To(Succeed())
	g.Expect(*dep.Spec.Replicas).To(Equal(int32(1)))

	// An edit made while the operator was down is taken back by the restarted operator.
	dep.Spec.Replicas = ptr.To(int32(5))
	g.Expect(k8sClient.Update(ctx, dep)).To(Succeed())
	restartedAgain := &SkillServerReconciler{Client: c, Runtime: workload.NewKubernetes(c, "img", "cluster.local")}
	_, err = restartedAgain.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(dep), dep)).To(Succeed())
	g.Expect(*dep.Spec.Replicas).To(Equal(int32(1)))
}

// One entry renders a server: reconciles of one generation validate its schemas and
// compile its rules once between them, however often they run; a new generation does
// both once more.
func TestReconcilesValidateAndCompileOncePerGeneration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	ss := kubekit.NewSkillServer(ns, "once", kubekit.TemplateSkill("search_book", "found: {{ .title }}"), kubekit.TemplateSkill("greet", "hi {{ .title }}"))
	ss.Spec.Auth = &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: "https://login.example.com", Audiences: []string{"cantus"}}}
	ss.Spec.Authorization = &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
		{Tools: []string{"search_book"}, When: `claims.email.endsWith("@example.com")`},
	}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	r := &SkillServerReconciler{Client: k8sClient, Runtime: workload.NewKubernetes(k8sClient, "img", "cluster.local")}
	reconcileTimes := func(n int) render.Counts {
		before := render.CountsSoFar()
		for range n {
			_, err := r.Reconcile(ctx, kubekit.ReconcileRequest(ss))
			g.Expect(err).NotTo(HaveOccurred())
		}
		after := render.CountsSoFar()
		return render.Counts{
			SpecValidations:  after.SpecValidations - before.SpecValidations,
			RuleCompilations: after.RuleCompilations - before.RuleCompilations,
		}
	}

	g.Expect(reconcileTimes(3)).To(Equal(render.Counts{SpecValidations: 1, RuleCompilations: 1}), "generation 1")
	got, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "once")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Status.ConfigHash).NotTo(BeEmpty(), "rendered and applied")

	got.Spec.Skills[1].Description = "a new description"
	g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
	g.Expect(reconcileTimes(2)).To(Equal(render.Counts{SpecValidations: 1, RuleCompilations: 1}), "generation 2")
}
