package controller

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// The API server refuses callerCredentials on a stdio import, and a spec with both
// modes or neither.
func TestCallerCredentials_CRDRefusesStdioAndBothOrNeitherMode(t *testing.T) {
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	exchange := &cantusv1alpha1.TokenExchange{TokenEndpoint: "https://sts.example/token", ClientID: "gw"}
	cases := map[string]struct {
		mutate func(*cantusv1alpha1.RemoteToolImport)
		want   string
	}{
		"stdio": {func(imp *cantusv1alpha1.RemoteToolImport) {
			imp.Spec.URL = ""
			imp.Spec.Transport = cantusv1alpha1.ImportTransportStdio
			imp.Spec.Stdio = &cantusv1alpha1.StdioSource{Image: "img", Command: []string{"serve"}}
			imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{TokenExchange: exchange}
		}, "callerCredentials is refused for stdio imports"},
		"both": {func(imp *cantusv1alpha1.RemoteToolImport) {
			imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{TokenExchange: exchange, PerCallerSecret: &cantusv1alpha1.PerCallerSecret{}}
		}, "exactly one of tokenExchange, perCallerSecret or connect"},
		"neither": {func(imp *cantusv1alpha1.RemoteToolImport) {
			imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Header: "X-Api-Key"}
		}, "exactly one of tokenExchange, perCallerSecret or connect"},
	}
	for name, c := range cases {
		imp := kubekit.NewImport(ns, name, "https://remote.example/mcp")
		c.mutate(imp)
		err := k8sClient.Create(ctx, imp)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: create gave %v, want a refusal saying %q", name, err, c.want)
		}
	}
	ok := kubekit.NewImport(ns, "fine", "https://remote.example/mcp")
	ok.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{PerCallerSecret: &cantusv1alpha1.PerCallerSecret{}}
	if err := k8sClient.Create(ctx, ok); err != nil {
		t.Fatalf("a valid perCallerSecret import was refused: %v", err)
	}
	if ok.Spec.CallerCredentials.Header != "Authorization" || ok.Spec.CallerCredentials.PerCallerSecret.Key != "token" {
		t.Errorf("defaults not applied: %+v %+v", ok.Spec.CallerCredentials, ok.Spec.CallerCredentials.PerCallerSecret)
	}
}

// A token endpoint is held to the ToolSourcePolicy like the remote, and to https away
// from loopback: a plain-http one elsewhere refuses the import, naming it; an https one
// the policy allows is recorded with its checked addresses.
func TestCallerCredentials_PolicyRefusesPlainHTTPTokenEndpoint(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	p := kubekit.AllowLoopback(t, k8sClient, ns)
	p.Spec.Hosts = []string{"127.0.0.1", "sts.example"}
	g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
	srv := testkit.NewCountingServer(t, adapterHandler(t, "", "create"))
	r := importReconciler()
	r.Resolver = staticResolver{"sts.example": netip.MustParseAddr("192.0.2.10")}

	plain := kubekit.NewImport(ns, "plain", srv.URL+"/mcp")
	plain.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{TokenExchange: &cantusv1alpha1.TokenExchange{TokenEndpoint: "http://sts.example/token", ClientID: "gw"}}
	got := kubekit.ReconcileImport(t, k8sClient, r, plain)
	allowed := kubekit.ImportCondition(got, cantusv1alpha1.ConditionSourceAllowed)
	g.Expect(allowed.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(allowed.Reason).To(Equal(cantusv1alpha1.ReasonTokenEndpointNotAllowed))
	g.Expect(allowed.Message).To(And(ContainSubstring("http://sts.example/token"), ContainSubstring(cantusv1alpha1.ReasonInsecureTokenEndpoint)))
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(srv.Requests.Load()).To(BeZero(), "a refused import is not probed")
	g.Expect(got.Status.CallerCredentials).To(Equal(&cantusv1alpha1.CallerCredentialsStatus{Mode: cantusv1alpha1.CallerCredentialsModeTokenExchange}))

	unlisted := kubekit.NewImport(ns, "unlisted", srv.URL+"/mcp")
	unlisted.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{TokenExchange: &cantusv1alpha1.TokenExchange{TokenEndpoint: "https://other.example/token", ClientID: "gw"}}
	got = kubekit.ReconcileImport(t, k8sClient, r, unlisted)
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionSourceAllowed).Reason).To(Equal(cantusv1alpha1.ReasonTokenEndpointNotAllowed))
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Message).To(ContainSubstring("other.example"))

	secure := kubekit.NewImport(ns, "secure", srv.URL+"/mcp")
	secure.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{TokenExchange: &cantusv1alpha1.TokenExchange{TokenEndpoint: "https://sts.example/token", ClientID: "gw"}}
	got = kubekit.ReconcileImport(t, k8sClient, r, secure)
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "%+v", got.Status.Conditions)
	g.Expect(got.Status.CallerCredentials).To(Equal(&cantusv1alpha1.CallerCredentialsStatus{
		Mode: cantusv1alpha1.CallerCredentialsModeTokenExchange, TokenEndpointChecked: true, TokenEndpointAddresses: []string{"192.0.2.10"}}))

	loopback := kubekit.NewImport(ns, "loopback", srv.URL+"/mcp")
	loopback.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{TokenExchange: &cantusv1alpha1.TokenExchange{TokenEndpoint: "http://127.0.0.1:9/token", ClientID: "gw"}}
	got = kubekit.ReconcileImport(t, k8sClient, r, loopback)
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "plain http on loopback is allowed: %+v", got.Status.Conditions)
}

// A callerCredentials header may also be in spec.headers, as most remotes take both the
// service identity and a user's token in Authorization: the probe sends the service
// identity, and gateways send the caller's credential in its place.
func TestCallerCredentials_HeaderSharedWithHeadersIsTheProbes(t *testing.T) {
	g := NewWithT(t)
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	srv := testkit.NewCountingServer(t, adapterHandler(t, "", "create"))
	g.Expect(k8sClient.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"},
		StringData: map[string]string{"token": "Bearer service-identity-1f3a"}})).To(Succeed())
	imp := kubekit.NewImport(ns, "shared", srv.URL+"/mcp")
	imp.Spec.Headers = []cantusv1alpha1.HeaderFromSecret{{Name: "authorization", ValueFrom: cantusv1alpha1.SecretKeyRef{Name: "svc", Key: "token"}}}
	imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{PerCallerSecret: &cantusv1alpha1.PerCallerSecret{}}
	got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), imp)
	ready := kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady)
	g.Expect(ready.Message).NotTo(ContainSubstring("spec.callerCredentials.header"))
	g.Expect(srv.Requests.Load()).NotTo(BeZero(), "the probe ran with the service identity")
}

// On the kubernetes runtime the pods mount the caller-keys Secret whole, as a Secret
// volume the kubelet keeps up to date: a changed per-caller key changes the Secret and
// leaves the Deployment's pod template (and so the pods) as it was.
func TestCallerCredentials_PodsMountCallerKeysWithoutRollingOnAChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	mgr := newTestManager(t)
	kube := workload.NewKubernetes(nil, "img", "cluster.local")
	kube.Client, kube.APIReader = ChildClient(mgr), mgr.GetAPIReader()
	g.Expect((&SkillServerReconciler{Client: mgr.GetClient(), Runtime: kube, Recorder: mgr.GetEventRecorder("cantus-operator")}).SetupWithManager(mgr)).To(Succeed())
	g.Expect((&RemoteToolImportReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("cantus-operator")}).SetupWithManager(mgr)).To(Succeed())
	kubekit.RunManager(t, mgr)
	remote := remoteLibrary(t)

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}}
	g.Expect(k8sClient.Create(ctx, sa)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.CallerSecret(ns, "agent-notes", "notes", "serviceaccount:"+ns+"/agent", "first-value-5e1b"))).To(Succeed())
	imp := kubekit.NewImport(ns, "notes", remote.URL+"/mcp")
	imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{PerCallerSecret: &cantusv1alpha1.PerCallerSecret{}}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.OIDCGateway(ns, "gw", "notes"))).To(Succeed())

	key := adapterconfig.CallerKeyFileName(ns+"/notes", adapterconfig.ServiceAccountCaller(ns+"/agent", string(sa.UID)))
	g.Eventually(kubekit.SecretData(ctx, k8sClient, ns, render.CallerKeysSecretName("gw")), 30*time.Second).Should(Equal(map[string]string{key: "first-value-5e1b"}))
	dep := &appsv1.Deployment{}
	var volume *corev1.Volume
	g.Eventually(func() (*corev1.Volume, error) {
		if err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "gw"}, dep); err != nil {
			return nil, err
		}
		for i, v := range dep.Spec.Template.Spec.Volumes {
			if v.Projected != nil && len(v.Projected.Sources) == 1 && v.Projected.Sources[0].Secret != nil &&
				v.Projected.Sources[0].Secret.Name == render.CallerKeysSecretName("gw") {
				volume = &dep.Spec.Template.Spec.Volumes[i]
			}
		}
		return volume, nil
	}, 30*time.Second).ShouldNot(BeNil())
	g.Expect(volume.Projected.Sources[0].Secret.Items).To(BeEmpty(), "the whole Secret, so that new keys come without a new template")
	g.Expect(dep.Spec.Template.Spec.Containers[0].VolumeMounts).To(ContainElement(And(
		HaveField("Name", volume.Name), HaveField("MountPath", render.CallerKeysDir), HaveField("SubPath", "")))) // a subPath is never updated
	template := dep.Spec.Template.DeepCopy()

	s := &corev1.Secret{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "agent-notes"}, s)).To(Succeed())
	s.Data["token"] = []byte("second-value-8a0c")
	g.Expect(k8sClient.Update(ctx, s)).To(Succeed())
	g.Eventually(kubekit.SecretData(ctx, k8sClient, ns, render.CallerKeysSecretName("gw")), 30*time.Second).Should(Equal(map[string]string{key: "second-value-8a0c"}))
	g.Consistently(func() (*corev1.PodTemplateSpec, error) {
		err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "gw"}, dep)
		return &dep.Spec.Template, err
	}, 2*time.Second).Should(Equal(template))
}

// status.callerCredentials is written when a probe finds it changed, and probes that
// find nothing changed write nothing, for either mode.
func TestCallerCredentials_UnchangedProbeWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	srv := testkit.NewCountingServer(t, adapterHandler(t, "", "search_book"))
	clock := time.Now()
	r := importReconciler()
	r.Now = func() time.Time { clock = clock.Add(5 * time.Minute); return clock }
	g.Expect(k8sClient.Create(ctx, kubekit.CallerSecret(ns, "alice", "keys", "oidc:https://login.example.com#alice", "alice-value-0b4e"))).To(Succeed())

	keys := kubekit.NewImport(ns, "keys", srv.URL+"/mcp")
	keys.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{PerCallerSecret: &cantusv1alpha1.PerCallerSecret{}}
	exchange := kubekit.NewImport(ns, "exchange", srv.URL+"/mcp")
	exchange.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{TokenExchange: &cantusv1alpha1.TokenExchange{TokenEndpoint: "http://127.0.0.1:9/token", ClientID: "gw"}}
	for _, imp := range []*cantusv1alpha1.RemoteToolImport{keys, exchange} {
		got := kubekit.ReconcileImport(t, k8sClient, r, imp)
		g.Expect(got.Status.CallerCredentials).NotTo(BeNil())
		version := got.ResourceVersion
		for range 3 {
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: crclient.ObjectKeyFromObject(got)})
			g.Expect(err).NotTo(HaveOccurred())
		}
		again := &cantusv1alpha1.RemoteToolImport{}
		g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(got), again)).To(Succeed())
		g.Expect(again.ResourceVersion).To(Equal(version), "%s: three unchanged probes wrote the status", imp.Name)
	}
	got := &cantusv1alpha1.RemoteToolImport{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(keys), got)).To(Succeed())
	g.Expect(got.Status.CallerCredentials.CallerSecrets).To(Equal(int32(1)))
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(exchange), got)).To(Succeed())
	g.Expect(got.Status.CallerCredentials).To(Equal(&cantusv1alpha1.CallerCredentialsStatus{
		Mode: cantusv1alpha1.CallerCredentialsModeTokenExchange, TokenEndpointChecked: true, TokenEndpointAddresses: []string{"127.0.0.1"}}))
}

// A per-caller key larger than 16 KiB is left out with an event naming its Secret (not
// its caller); keys that together would not fit in one Secret are not written, and the
// gateway says why.
func TestCallerCredentials_CallerKeysAreBounded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	// The bounds are the reconciler's: no adapter needs to serve the gateway.
	startImportManager(t, 0)
	startManager(t, workload.NewKubernetes(nil, "img", "cluster.local"))
	remote := remoteLibrary(t)

	big := strings.Repeat("k", maxCallerKeyBytes+1)
	g.Expect(k8sClient.Create(ctx, kubekit.CallerSecret(ns, "huge", "notes", "oidc:https://login.example.com#huge", big))).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.CallerSecret(ns, "small", "notes", "oidc:https://login.example.com#small", "small-value-3d9f"))).To(Succeed())
	imp := kubekit.NewImport(ns, "notes", remote.URL+"/mcp")
	imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{PerCallerSecret: &cantusv1alpha1.PerCallerSecret{}}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.OIDCGateway(ns, "gw", "notes"))).To(Succeed())

	small := adapterconfig.CallerKeyFileName(ns+"/notes", adapterconfig.OIDCCaller("https://login.example.com", "small"))
	g.Eventually(kubekit.SecretData(ctx, k8sClient, ns, render.CallerKeysSecretName("gw")), 30*time.Second).Should(Equal(map[string]string{small: "small-value-3d9f"}))
	g.Eventually(func() ([]string, error) {
		var events eventsv1.EventList
		err := k8sClient.List(ctx, &events, crclient.InNamespace(ns))
		var notes []string
		for _, e := range events.Items {
			if e.Reason == "CallerSecretsSkipped" {
				notes = append(notes, e.Note)
			}
		}
		return notes, err
	}, 30*time.Second).Should(ContainElement(And(ContainSubstring("Secret huge"), ContainSubstring("more than the 16384"), Not(ContainSubstring("#huge")))))

	// Sixty keys of 16 KiB are more than one Secret holds.
	full := strings.Repeat("f", maxCallerKeyBytes)
	for i := range 60 {
		name := "full-" + strconv.Itoa(i)
		g.Expect(k8sClient.Create(ctx, kubekit.CallerSecret(ns, name, "notes", "oidc:https://login.example.com#"+name, full))).To(Succeed())
	}
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "gw"), 30*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonCallerKeysTooLarge))
	ss, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "gw")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kubekit.ConditionMessage(ss, cantusv1alpha1.ConditionCallerCredentialsReady)).To(ContainSubstring("1 MiB"))
	keys, err := kubekit.SecretData(ctx, k8sClient, ns, render.CallerKeysSecretName("gw"))()
	g.Expect(err).NotTo(HaveOccurred())
	// It keeps what it last held, which fitted (reconciles may have seen some of the sixty).
	total := 0
	for k, v := range keys {
		total += len(k) + len(v)
	}
	g.Expect(total).To(BeNumerically("<=", maxCallerKeysBytes))
	g.Expect(keys).To(HaveKeyWithValue(small, "small-value-3d9f"))
}

// remoteLibrary is a real adapter with a working tool and one whose backend fails.
func remoteLibrary(t *testing.T) *httptest.Server {
	t.Helper()
	remote := httptest.NewServer(runAdapter(t, kubekit.RemoteLibraryConfig(t)))
	testkit.CloseAtEnd(t, remote)
	return remote
}
