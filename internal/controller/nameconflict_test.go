package controller

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// A child name held by someone else's object is a NameConflict, and that object is left
// exactly as it was (issue 23, finding 2): before, server-side apply with forced ownership
// took over an admin's NetworkPolicy or another app's Service, pointed it at the tenant's
// pods and gave it an owner reference, so deleting the SkillServer deleted it.
func TestChildNamesTakenBySomeoneElseAreNotAdopted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	adminPolicy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default-deny"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	otherService := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "payments"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	g.Expect(k8sClient.Create(ctx, adminPolicy)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, otherService)).To(Succeed())
	startManager(t, workload.NewKubernetes(nil, "example.com/cantus:test", "cluster.local"))

	denying := kubekit.NewSkillServer(ns, "default-deny", kubekit.TemplateSkill("search_book", "found {{ .title }}"))
	denying.Spec.AllowFrom = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "agent"}}}}
	paying := kubekit.NewSkillServer(ns, "payments", kubekit.TemplateSkill("search_book", "found {{ .title }}"))
	g.Expect(k8sClient.Create(ctx, denying)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, paying)).To(Succeed())

	for _, tc := range []struct{ name, kind string }{{"default-deny", "NetworkPolicy"}, {"payments", "Service"}} {
		g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, tc.name), 30*time.Second).Should(
			kubekit.HaveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonNameConflict))
		got, err := kubekit.GetSkillServer(ctx, k8sClient, ns, tc.name)()
		g.Expect(err).NotTo(HaveOccurred())
		ready := kubekit.FindCondition(got, cantusv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring(tc.kind + " " + ns + "/" + tc.name + " already exists and is not controlled by this object"))
	}

	// Both objects are as their owners left them after the conflicts, and after another
	// reconcile of each server, asked for and handled.
	for _, name := range []string{"default-deny", "payments"} {
		ss, err := kubekit.GetSkillServer(ctx, k8sClient, ns, name)()
		g.Expect(err).NotTo(HaveOccurred())
		kubekit.RequestReconcile(t, ctx, k8sClient, ss, "after-the-conflict")
		g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, name), 30*time.Second).Should(
			HaveField("Status.LastHandledReconcileAt", "after-the-conflict"), "the requested reconcile of %s", name)
	}
	policy := &networkingv1.NetworkPolicy{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(adminPolicy), policy)).To(Succeed())
	g.Expect(policy.OwnerReferences).To(BeEmpty())
	g.Expect(policy.Spec.Ingress).To(BeEmpty(), "the admin's deny-all policy gained ingress rules")
	g.Expect(policy.ResourceVersion).To(Equal(adminPolicy.ResourceVersion))
	service := &corev1.Service{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(otherService), service)).To(Succeed())
	g.Expect(service.OwnerReferences).To(BeEmpty())
	g.Expect(service.Spec.Selector).To(Equal(map[string]string{"app": "payments"}))
	g.Expect(service.ResourceVersion).To(Equal(otherService.ResourceVersion))
}

// getCounter counts the GETs a manager sends to the API server, by path.
type getCounter struct {
	mu   sync.Mutex
	gets []string
}

func (g *getCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && !strings.Contains(req.URL.RawQuery, "watch=true") {
			g.mu.Lock()
			g.gets = append(g.gets, req.URL.Path)
			g.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// of lists the GETs of one namespace that are not LISTs: a path with a name after the
// resource.
func (g *getCounter) of(ns string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, p := range g.gets {
		if _, rest, ok := strings.Cut(p, "/namespaces/"+ns+"/"); ok && strings.Count(rest, "/") >= 1 {
			out = append(out, p)
		}
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A new SkillServer's children are looked up on the API server once each, by metadata,
// before they are first written (so that someone else's object is never taken over), and
// nothing else about them is read past the cache: not the adapter ConfigMap, not the
// content shards it does not have (issue 26: at 10,000 SkillServers, about six GETs per
// server before its first apply). Once it settled, a reconcile reads nothing at all.
func TestChildrenAreLookedUpOnceAndReadFromTheCache(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	counter := &getCounter{}
	cfg := rest.CopyConfig(restConfig)
	cfg.WrapTransport = counter.wrap
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      CacheOptions(), Client: ClientOptions(),
	})
	g.Expect(err).NotTo(HaveOccurred())
	kube := workload.NewKubernetes(ChildClient(mgr), "example.com/cantus:test", "cluster.local")
	kube.APIReader = mgr.GetAPIReader()
	r := &SkillServerReconciler{Client: mgr.GetClient(), Runtime: kube, Recorder: mgr.GetEventRecorder("cantus-operator")}
	g.Expect(r.UseContentCache(mgr)).To(Succeed())
	g.Expect(r.SetupWithManager(mgr)).To(Succeed())
	kubekit.RunManager(t, mgr)

	ss := kubekit.NewSkillServer(ns, "fresh", kubekit.TemplateSkill("search_book", "found {{ .title }}"))
	ss.Spec.AllowFrom = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "agent"}}}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	key := crclient.ObjectKeyFromObject(ss)
	g.Eventually(func() (int64, error) {
		got := &cantusv1alpha1.SkillServer{}
		err := k8sClient.Get(ctx, key, got)
		return got.Status.ObservedGeneration, err
	}, 30*time.Second).Should(Equal(int64(1)))
	for _, obj := range []crclient.Object{&networkingv1.NetworkPolicy{}, &appsv1.Deployment{}, &corev1.Service{}} {
		g.Expect(k8sClient.Get(ctx, key, obj)).To(Succeed())
		g.Expect(obj.GetOwnerReferences()).To(HaveLen(1))
	}
	// A reconcile asked for after the children exist, and handled: the reads it makes
	// count too.
	fresh := &cantusv1alpha1.SkillServer{}
	g.Expect(k8sClient.Get(ctx, key, fresh)).To(Succeed())
	kubekit.RequestReconcile(t, ctx, k8sClient, fresh, "children-seen")
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "fresh"), 30*time.Second).Should(HaveField("Status.LastHandledReconcileAt", "children-seen"))

	gets := counter.of(ns)
	seen := map[string]int{}
	for _, p := range gets {
		seen[p]++
	}
	for p, n := range seen {
		g.Expect(n).To(Equal(1), "%s read %d times past the cache: %v", p, n, gets)
		g.Expect(p).NotTo(ContainSubstring("fresh-content-"), "a content shard the server does not have was read past the cache: %v", gets)
	}
	g.Expect(seen).To(HaveLen(4), "one lookup for each of the NetworkPolicy, the adapter ConfigMap, the Deployment and the Service: %v", gets)

	// A settled SkillServer reconciled again reads nothing past the cache.
	before := len(counter.of(ns))
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(counter.of(ns)[before:]).To(BeEmpty())
}
