package controller

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/stdioproxy"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// pod is a pod as a NetworkPolicy sees it: its namespace (with the namespace's labels)
// and its labels.
type pod struct {
	name      string
	namespace string
	nsLabels  map[string]string
	labels    map[string]string
}

// admits says whether the policy lets p connect to a pod it selects on the port, by the
// NetworkPolicy rules: a peer with only a podSelector means pods of the policy's
// namespace; with a namespaceSelector, pods of the namespaces it selects.
// A named port is resolved by bridgePorts, the bridge container's ports.
func admits(t *testing.T, np *networkingv1.NetworkPolicy, p pod, port int32) bool {
	t.Helper()
	for _, rule := range np.Spec.Ingress {
		if len(rule.From) == 0 {
			return true // from everyone
		}
		if !portAllowed(rule.Ports, port) {
			continue
		}
		for _, peer := range rule.From {
			if peer.IPBlock != nil {
				t.Errorf("the bridge's policy admits an IP block: %+v", peer.IPBlock)
				return true
			}
			if peer.NamespaceSelector == nil && p.namespace != np.Namespace {
				continue
			}
			if peer.NamespaceSelector != nil && !selects(t, peer.NamespaceSelector, p.nsLabels) {
				continue
			}
			if peer.PodSelector == nil || selects(t, peer.PodSelector, p.labels) {
				return true
			}
		}
	}
	return false
}

func portAllowed(ports []networkingv1.NetworkPolicyPort, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil || p.Port.IntVal == port || (p.Port.StrVal != "" && bridgePorts[p.Port.StrVal] == port) {
			return true
		}
	}
	return false
}

// bridgePorts are the named ports of the bridge container, filled in from its Deployment.
var bridgePorts = map[string]int32{}

func selects(t *testing.T, s *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatalf("selector %+v: %v", s, err)
	}
	return sel.Matches(labels.Set(l))
}

// A stdio bridge admits, by its NetworkPolicy, the gateway pods of the SkillServers that
// import it and the operator's pods, and nobody else: not another server's pods, not a
// gateway of the same name in another namespace, not any other pod. The policy follows
// the servers' imports (R8).
func TestStdioBridgeAdmitsOnlyItsImportersAndTheOperator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, elsewhere := kubekit.NewNamespace(t, k8sClient), kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowStdio(t, k8sClient, ns, []string{"ghcr.io/acme/"}, []string{"mcp-server"})

	gw := kubekit.NewSkillServer(ns, "gw")
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "acme"}}
	plain := kubekit.NewSkillServer(ns, "plain")
	plain.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "other"}}
	twin := kubekit.NewSkillServer(elsewhere, "gw")
	twin.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "acme"}}
	for _, ss := range []*cantusv1alpha1.SkillServer{gw, plain, twin} {
		g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	}

	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme"},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStdio,
			Stdio:     &cantusv1alpha1.StdioSource{Image: "ghcr.io/acme/tools:1.0", Command: []string{"mcp-server"}},
			Timeout:   cantusv1alpha1.DurationFrom(time.Second),
		},
	}
	kube := workload.NewKubernetes(k8sClient, "ghcr.io/cantus-dev/cantus-operator:test", "cluster.local")
	kube.Operator = workload.OperatorPeer("cantus-system")
	r := importReconciler()
	r.Bridges = kube.Bridges()
	got := kubekit.ReconcileImport(t, k8sClient, r, imp)
	ready := kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady)
	g.Expect(ready.Reason).To(Equal(cantusv1alpha1.ReasonBridgeNotReady), ready.Message)

	key := crclient.ObjectKey{Namespace: ns, Name: "acme-bridge"}
	np := &networkingv1.NetworkPolicy{}
	g.Expect(k8sClient.Get(ctx, key, np)).To(Succeed(), "the bridge has no NetworkPolicy")
	g.Expect(metav1.IsControlledBy(np, got)).To(BeTrue())
	g.Expect(np.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress))

	dep := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(ctx, key, dep)).To(Succeed())
	g.Expect(selects(t, &np.Spec.PodSelector, dep.Spec.Template.Labels)).To(BeTrue(), "the policy does not select the bridge's pods")
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		bridgePorts[p.Name] = p.ContainerPort
	}
	gatewayLabels := workload.Labels(gw)
	g.Expect(selects(t, &np.Spec.PodSelector, gatewayLabels)).To(BeFalse(), "the policy selects the gateway's pods, not the bridge's")

	nsLabels := func(name string) map[string]string { return map[string]string{corev1.LabelMetadataName: name} }
	gatewayPod := pod{"gw", ns, nsLabels(ns), gatewayLabels}
	operatorPod := pod{"operator", "cantus-system", nsLabels("cantus-system"), map[string]string{workload.LabelName: workload.OperatorName}}
	refused := []pod{
		{"plain", ns, nsLabels(ns), workload.Labels(plain)},
		{"gw elsewhere", elsewhere, nsLabels(elsewhere), workload.Labels(twin)},
		{"any pod", ns, nsLabels(ns), map[string]string{"app": "curl"}},
		{"unlabelled", elsewhere, nsLabels(elsewhere), nil},
		{"operator-named pod elsewhere", elsewhere, nsLabels(elsewhere), map[string]string{workload.LabelName: workload.OperatorName}},
		{"the bridge itself", ns, nsLabels(ns), dep.Spec.Template.Labels},
	}
	for _, p := range []pod{gatewayPod, operatorPod} {
		g.Expect(admits(t, np, p, workload.BridgePort)).To(BeTrue(), "%s is refused: %+v", p.name, np.Spec.Ingress)
	}
	for _, p := range refused {
		g.Expect(admits(t, np, p, workload.BridgePort)).To(BeFalse(), "%s is admitted: %+v", p.name, np.Spec.Ingress)
	}
	g.Expect(admits(t, np, gatewayPod, 9090)).To(BeFalse(), "another port is open")

	// The bridge's token: in a Secret of the import, read by the container from it.
	secret := &corev1.Secret{}
	g.Expect(k8sClient.Get(ctx, key, secret)).To(Succeed())
	g.Expect(metav1.IsControlledBy(secret, got)).To(BeTrue())
	g.Expect(secret.Data[render.BridgeTokenKey]).To(HaveLen(43))
	g.Expect(dep.Spec.Template.Spec.Containers[0].Env).To(ContainElement(HaveField("Name", stdioproxy.TokenEnv)))
	for _, c := range got.Status.Conditions {
		g.Expect(c.Message).NotTo(ContainSubstring(string(secret.Data[render.BridgeTokenKey])))
	}

	// A SkillServer that stops importing it is no longer admitted, and the change
	// re-runs the import's reconcile (the watch maps a server to its stdio imports).
	g.Expect(r.stdioImportsOf(ctx, gw)).To(ConsistOf(HaveField("NamespacedName", crclient.ObjectKeyFromObject(imp))))
	g.Expect(r.stdioImportsOf(ctx, plain)).To(BeEmpty())
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(gw), gw)).To(Succeed())
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "other"}}
	g.Expect(k8sClient.Update(ctx, gw)).To(Succeed())
	kubekit.ReconcileImport(t, k8sClient, r, got)
	g.Expect(k8sClient.Get(ctx, key, np)).To(Succeed())
	g.Expect(admits(t, np, gatewayPod, workload.BridgePort)).To(BeFalse(), "a server that no longer imports the bridge is still admitted")
	g.Expect(admits(t, np, operatorPod, workload.BridgePort)).To(BeTrue(), "the operator is refused")
}

// headerRecorder answers the MCP handshake just enough to record the Authorization
// header each request carried.
type headerRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Get("Authorization"))
	h.mu.Unlock()
	w.WriteHeader(http.StatusUnauthorized)
}

func (h *headerRecorder) authorizations() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// The operator's handshake through a stdio bridge sends the bridge's token, in place of
// an Authorization header the spec names (which the bridge has no use for).
func TestTheOperatorsHandshakeSendsTheBridgeToken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowStdio(t, k8sClient, ns, []string{"ghcr.io/acme"}, []string{"srv"})
	recorder := &headerRecorder{}
	bridge := testkit.NewCountingServer(t, recorder)
	g.Expect(k8sClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
		Data:       map[string][]byte{"value": []byte("Bearer the-tenants-own")},
	})).To(Succeed())
	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme"},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStdio,
			Stdio:     &cantusv1alpha1.StdioSource{Image: "ghcr.io/acme/srv:1", Command: []string{"srv"}},
			Headers:   []cantusv1alpha1.HeaderFromSecret{{Name: "authorization", ValueFrom: cantusv1alpha1.SecretKeyRef{Name: "mine", Key: "value"}}},
			Timeout:   cantusv1alpha1.DurationFrom(cantusv1alpha1.MinImportTimeout),
		},
	}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	r := &RemoteToolImportReconciler{Client: k8sClient, Prober: mcpclient.Probe, Bridges: fixedBridge{url: bridge.URL + "/mcp"}}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: crclient.ObjectKeyFromObject(imp)})
	g.Expect(err).NotTo(HaveOccurred())

	secret := &corev1.Secret{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "acme-bridge"}, secret)).To(Succeed(), "no token Secret for the bridge")
	token := string(secret.Data[render.BridgeTokenKey])
	g.Expect(token).NotTo(BeEmpty())
	seen := recorder.authorizations()
	g.Expect(seen).NotTo(BeEmpty())
	for _, auth := range seen {
		g.Expect(auth).To(Equal("Bearer "+token), "the handshake's Authorization")
	}
	got := &cantusv1alpha1.RemoteToolImport{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(imp), got)).To(Succeed())
	for _, c := range got.Status.Conditions {
		g.Expect(c.Message).NotTo(ContainSubstring(token))
	}
}
