package controller

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// serviceRoutes stands in for kube-proxy: it sends a connection to a Service's cluster IP
// and port to the emulated pod behind it, and refuses one to a Service with no pod, as
// kube-proxy's reject rule does.
type serviceRoutes struct {
	mu     sync.Mutex
	routes map[string]string
}

func newServiceRoutes() *serviceRoutes { return &serviceRoutes{routes: map[string]string{}} }

// route sends the Service's traffic to the pod listening on every interface at podURL,
// by this machine's own non-loopback address, as a pod is reached by its pod IP.
func (s *serviceRoutes) route(t *testing.T, svc *corev1.Service, podURL string) {
	t.Helper()
	u, err := url.Parse(podURL)
	if err != nil {
		t.Fatalf("pod URL %q: %v", podURL, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port))] = net.JoinHostPort(podIP(t), u.Port())
}

// podIP is a non-loopback address of this machine. A server refuses requests that
// arrive on loopback for another host name (DNS rebinding protection); traffic through a
// Service never arrives on loopback.
func podIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatalf("interface addresses: %v", err)
	}
	for _, a := range addrs {
		if ipNet, ok := a.(*net.IPNet); ok && !ipNet.IP.IsLoopback() && ipNet.IP.To4() != nil {
			return ipNet.IP.String()
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address to reach an emulated pod by")
	return ""
}

func (s *serviceRoutes) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	s.mu.Lock()
	pod, ok := s.routes[addr]
	s.mu.Unlock()
	if !ok {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, pod)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the pod's filesystem is emulated with chroot, which needs root (CI and dev machines here run as root)")
	}
}

// TestPodsServingTheWrongToolsAreNotReady: an available Deployment whose pods answer MCP
// with other tools, or do not answer at all, does not make a SkillServer Ready; the
// Verified condition says what the operator saw.
func TestPodsServingTheWrongToolsAreNotReady(t *testing.T) {
	requireRoot(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	routes := newServiceRoutes()
	startManagerVerifying(t, workload.NewKubernetes(nil, "example.com/cantus:test", "cluster.local"), &MCPVerifier{Dial: routes.Dial, Timeout: 2 * time.Second})

	books := kubekit.NewSkillServer(ns, "books", kubekit.TemplateSkill("search_book", "found: {{ .title }}"))
	films := kubekit.NewSkillServer(ns, "films", kubekit.TemplateSkill("search_film", "found: {{ .title }}"))
	for _, ss := range []*cantusv1alpha1.SkillServer{books, films} {
		g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	}
	booksDep, filmsDep, booksSvc := &appsv1.Deployment{}, &appsv1.Deployment{}, &corev1.Service{}
	for _, o := range []struct {
		name string
		obj  crclient.Object
	}{{"books", booksDep}, {"films", filmsDep}, {"books", booksSvc}} {
		g.Eventually(func() error { return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: o.name}, o.obj) }).Should(Succeed())
	}
	markDeploymentAvailable(g, ctx, booksDep)

	// Available, but nothing answers behind the Service.
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "books"), 45*time.Second).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionAvailable, metav1.ConditionTrue, cantusv1alpha1.ReasonAvailable),
		kubekit.HaveCondition(cantusv1alpha1.ConditionVerified, metav1.ConditionFalse, cantusv1alpha1.ReasonNotAnswering),
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonNotAnswering)))

	// A pod that answers MCP with another server's tools.
	routes.route(t, booksSvc, startAsPodBehindService(t, ctx, filmsDep).BaseURL)
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "books"), 45*time.Second).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionVerified, metav1.ConditionFalse, cantusv1alpha1.ReasonToolsMismatch),
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonToolsMismatch)))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "books")()
	verified := kubekit.FindCondition(got, cantusv1alpha1.ConditionVerified)
	g.Expect(verified.Message).To(ContainSubstring("missing: search_book"))
	g.Expect(verified.Message).To(ContainSubstring("not expected: search_film"))

	// Its own pod: verified and Ready.
	routes.route(t, booksSvc, startAsPodBehindService(t, ctx, booksDep).BaseURL)
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "books"), 45*time.Second).Should(And(
		kubekit.HaveCondition(cantusv1alpha1.ConditionVerified, metav1.ConditionTrue, cantusv1alpha1.ReasonToolsServed),
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled)))
}

func TestAlreadyVerifiedOnlyForTheSameConfigAndURL(t *testing.T) {
	verifiedAt := func(gen int64, hash, url string, status metav1.ConditionStatus) *cantusv1alpha1.SkillServer {
		ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		ss.Status.ConfigHash, ss.Status.URL = hash, url
		setCondition(ss, cantusv1alpha1.ConditionVerified, status, cantusv1alpha1.ReasonToolsServed, "")
		return ss
	}
	tests := []struct {
		name string
		ss   *cantusv1alpha1.SkillServer
		want bool
	}{
		{"same config, URL and generation", verifiedAt(2, "h1", "u", metav1.ConditionTrue), true},
		{"config changed", verifiedAt(2, "h0", "u", metav1.ConditionTrue), false},
		{"URL changed", verifiedAt(2, "h1", "v", metav1.ConditionTrue), false},
		{"last check failed", verifiedAt(2, "h1", "u", metav1.ConditionFalse), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := alreadyVerified(tt.ss, "h1", "u"); got != tt.want {
				t.Errorf("alreadyVerified = %v, want %v", got, tt.want)
			}
		})
	}
	newer := verifiedAt(2, "h1", "u", metav1.ConditionTrue)
	newer.Generation = 3
	if alreadyVerified(newer, "h1", "u") {
		t.Error("a verification of an older generation counts for a newer one")
	}
}

// verifiedFor matches a SkillServer whose Verified condition has the given status and
// reason for the given generation.
func verifiedFor(generation int64, status metav1.ConditionStatus, reason string) OmegaMatcher {
	return WithTransform(func(ss *cantusv1alpha1.SkillServer) string {
		c := kubekit.FindCondition(ss, cantusv1alpha1.ConditionVerified)
		if c == nil {
			return "absent"
		}
		return fmt.Sprintf("%s/%s for generation %d", c.Status, c.Reason, c.ObservedGeneration)
	}, Equal(fmt.Sprintf("%s/%s for generation %d", status, reason, generation)))
}

// TestPodsServingAnOlderDescriptionAreNotVerified: a description-only change keeps
// every tool name, so the names alone would verify pods that still serve the old
// description: here the Deployment reports the rollout done while the Service still
// sends the operator to an old pod, as it does until the endpoints catch up. Verified
// stays False for the new generation, naming the tool and the member, until a pod
// serves the new description.
func TestPodsServingAnOlderDescriptionAreNotVerified(t *testing.T) {
	requireRoot(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	routes := newServiceRoutes()
	startManagerVerifying(t, workload.NewKubernetes(nil, "example.com/cantus:test", "cluster.local"), &MCPVerifier{Dial: routes.Dial, Timeout: 2 * time.Second})

	ss := kubekit.NewSkillServer(ns, "books", kubekit.TemplateSkill("search_book", "found: {{ .title }}"))
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	dep, svc := &appsv1.Deployment{}, &corev1.Service{}
	for _, obj := range []crclient.Object{dep, svc} {
		g.Eventually(func() error { return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "books"}, obj) }).Should(Succeed())
	}
	markDeploymentAvailable(g, ctx, dep)
	// The pod's volumes are copies made when it starts: it keeps serving this config.
	routes.route(t, svc, startAsPodBehindService(t, ctx, dep).BaseURL)
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "books"), 45*time.Second).Should(verifiedFor(ss.Generation, metav1.ConditionTrue, cantusv1alpha1.ReasonToolsServed))

	rolled := dep.Generation
	g.Eventually(func() error {
		current, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "books")()
		if err != nil {
			return err
		}
		current.Spec.Skills[0].Description = "Find a book by its title."
		if err := k8sClient.Update(ctx, current); err != nil {
			return err
		}
		ss = current
		return nil
	}).Should(Succeed())
	// The new template rolls the pods; the rollout is reported done, the old pod answers.
	g.Eventually(func() (int64, error) {
		err := k8sClient.Get(ctx, crclient.ObjectKeyFromObject(dep), dep)
		return dep.Generation, err
	}).Should(BeNumerically(">", rolled))
	markDeploymentAvailable(g, ctx, dep)

	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "books"), 45*time.Second).Should(
		verifiedFor(ss.Generation, metav1.ConditionFalse, cantusv1alpha1.ReasonDefinitionsMismatch))
	g.Consistently(kubekit.GetSkillServer(ctx, k8sClient, ns, "books"), 5*time.Second).ShouldNot(
		verifiedFor(ss.Generation, metav1.ConditionTrue, cantusv1alpha1.ReasonToolsServed))
	got, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "books")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kubekit.FindCondition(got, cantusv1alpha1.ConditionVerified).Message).To(ContainSubstring(`tool "search_book": description differs`))
	g.Expect(kubekit.FindCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))

	// A pod of the new template serves the new description.
	routes.route(t, svc, startAsPodBehindService(t, ctx, dep).BaseURL)
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "books"), 45*time.Second).Should(And(
		verifiedFor(ss.Generation, metav1.ConditionTrue, cantusv1alpha1.ReasonToolsServed),
		kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled)))
}
