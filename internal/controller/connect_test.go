package controller

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/connect"
	"github.com/cantus-dev/cantus-operator/internal/policy"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// metadataServer serves an authorization server's RFC 8414 metadata, naming token as its
// token endpoint.
func metadataServer(t *testing.T, token func(issuer string) string) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/oauth-authorization-server" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{
			"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize", "token_endpoint": token(srv.URL), "revocation_endpoint": srv.URL + "/revoke",
		})
	}))
	testkit.CloseAtEnd(t, srv)
	return srv
}

// An import in connect mode needs the operator's connect endpoints and a client; its
// authorization server's endpoints are held to the policy and to https away from
// loopback, and those accepted are recorded in the status.
func TestCallerCredentials_ConnectAuthorizationServerIsHeldToThePolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	p := kubekit.AllowLoopback(t, k8sClient, ns)
	p.Spec.Hosts = []string{"127.0.0.1", "sts.example"}
	g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
	remote := testkit.NewCountingServer(t, adapterHandler(t, "", "issues"))
	preRegistered := &cantusv1alpha1.ConnectClient{ClientID: "cantus"}
	reason := func(imp *cantusv1alpha1.RemoteToolImport) string {
		return kubekit.ImportCondition(imp, cantusv1alpha1.ConditionSourceAllowed).Reason
	}

	r := importReconciler()
	r.Resolver = staticResolver{"sts.example": netip.MustParseAddr("192.0.2.10")}
	off := kubekit.NewImport(ns, "off", remote.URL+"/mcp")
	off.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{Client: preRegistered}}
	g.Expect(reason(kubekit.ReconcileImport(t, k8sClient, r, off))).To(Equal(cantusv1alpha1.ReasonConnectUnavailable))

	r.Connect = &ConnectSettings{}
	noClient := kubekit.NewImport(ns, "noclient", remote.URL+"/mcp")
	noClient.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{}}
	g.Expect(reason(kubekit.ReconcileImport(t, k8sClient, r, noClient))).To(Equal(cantusv1alpha1.ReasonConnectClientRequired))

	plain := metadataServer(t, func(string) string { return "http://sts.example/token" })
	insecure := kubekit.NewImport(ns, "insecure", remote.URL+"/mcp")
	insecure.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{AuthorizationServer: plain.URL, Client: preRegistered}}
	got := kubekit.ReconcileImport(t, k8sClient, r, insecure)
	allowed := kubekit.ImportCondition(got, cantusv1alpha1.ConditionSourceAllowed)
	g.Expect(allowed.Reason).To(Equal(cantusv1alpha1.ReasonAuthorizationServerNotAllowed))
	g.Expect(allowed.Message).To(And(ContainSubstring("token_endpoint"), ContainSubstring(cantusv1alpha1.ReasonInsecureTokenEndpoint)))
	g.Expect(remote.Requests.Load()).To(BeZero(), "a refused import is not probed")

	loopback := metadataServer(t, func(issuer string) string { return issuer + "/token" })
	good := kubekit.NewImport(ns, "good", remote.URL+"/mcp")
	good.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{AuthorizationServer: loopback.URL, Client: preRegistered}}
	got = kubekit.ReconcileImport(t, k8sClient, r, good)
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "%+v", got.Status.Conditions)
	g.Expect(got.Status.CallerCredentials).To(Equal(&cantusv1alpha1.CallerCredentialsStatus{
		Mode: cantusv1alpha1.CallerCredentialsModeConnect, AuthorizationServer: loopback.URL, AuthorizationServerChecked: true,
		Endpoints: &cantusv1alpha1.AuthorizationServerEndpoints{Authorization: loopback.URL + "/authorize", Token: loopback.URL + "/token", Revocation: loopback.URL + "/revoke"},
		Client:    cantusv1alpha1.ConnectClientPreRegistered,
	}))
}

// On the kubernetes runtime a gateway that re-exports an import in connect mode gets
// the operator's CA in its caller-keys Secret, mounted whole, and its own token for
// cantus.dev/connect projected by the kubelet, which renews it.
func TestCallerCredentials_ConnectGatewayPodsGetTheOperatorsCAAndAToken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	p := kubekit.AllowLoopback(t, k8sClient, ns)
	p.Spec.ServiceAccounts = []string{"gateway"}
	g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
	mgr := newTestManager(t)
	kube := workload.NewKubernetes(nil, "img", "cluster.local")
	kube.Client, kube.APIReader = ChildClient(mgr), mgr.GetAPIReader()
	g.Expect((&SkillServerReconciler{Client: mgr.GetClient(), Runtime: kube, Recorder: mgr.GetEventRecorder("cantus-operator"),
		ConnectEndpoint: "https://cantus-catalog.cantus-system.svc/connect/v1/token", ConnectCA: func() []byte { return []byte("the operator's CA") }}).SetupWithManager(mgr)).To(Succeed())
	g.Expect((&RemoteToolImportReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("cantus-operator"), Connect: &ConnectSettings{}}).SetupWithManager(mgr)).To(Succeed())
	kubekit.RunManager(t, mgr)
	remote := remoteLibrary(t)
	server := metadataServer(t, func(issuer string) string { return issuer + "/token" })

	imp := kubekit.NewImport(ns, "tracker", remote.URL+"/mcp")
	imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{AuthorizationServer: server.URL, Client: &cantusv1alpha1.ConnectClient{ClientID: "cantus"}}}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	gw := kubekit.OIDCGateway(ns, "gw", "tracker")
	gw.Spec.Pod = &cantusv1alpha1.PodOverrides{ServiceAccountName: "gateway"}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())

	g.Eventually(kubekit.SecretData(ctx, k8sClient, ns, render.CallerKeysSecretName("gw")), 30*time.Second).Should(HaveKeyWithValue(render.ConnectCAKey, "the operator's CA"))
	dep := &appsv1.Deployment{}
	g.Eventually(func() []string {
		if err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "gw"}, dep); err != nil {
			return nil
		}
		var audiences []string
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					audiences = append(audiences, src.ServiceAccountToken.Audience)
				}
			}
		}
		return audiences
	}, 30*time.Second).Should(ContainElement(adapterconfig.ConnectAudience))
	g.Expect(dep.Spec.Template.Spec.ServiceAccountName).To(Equal("gateway"))
	cm := &corev1.ConfigMap{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "gw-adapter"}, cm)).To(Succeed())
	g.Expect(cm.Data[adapterconfig.ConfigFileName]).To(And(ContainSubstring("https://cantus-catalog.cantus-system.svc/connect/v1/token"), ContainSubstring(render.ConnectCAKey)))
}

// The operator's own requests to authorization servers dial only what the import's
// namespace's ToolSourcePolicies allow, checked when connecting.
func TestCallerCredentials_ConnectRequestsAreHeldToThePolicyWhenDialling(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	allowedNS, otherNS := kubekit.NewNamespace(t, k8sClient), kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, allowedNS)
	server := metadataServer(t, func(issuer string) string { return issuer + "/token" })
	dialFor := PolicyDialer(k8sClient, nil)
	addr := server.Listener.Addr().String()

	dial, err := dialFor(ctx, allowedNS)
	g.Expect(err).NotTo(HaveOccurred())
	conn, err := dial(ctx, "tcp", addr)
	g.Expect(err).NotTo(HaveOccurred())
	_ = conn.Close()

	dial, err = dialFor(ctx, otherNS)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = dial(ctx, "tcp", addr)
	g.Expect(err).To(MatchError(policy.ErrRefused))
}

// Without a pre-registered client the operator is the client of its Client ID Metadata
// Document, unless the authorization server does not say it takes them and offers
// dynamic registration, whose endpoint is then held to the policy too.
func TestCallerCredentials_ConnectChoosesItsClient(t *testing.T) {
	for name, c := range map[string]struct {
		md   connect.ServerMetadata
		want string
	}{
		"documents supported":        {connect.ServerMetadata{MetadataDocuments: true, RegistrationEndpoint: "https://as/register"}, cantusv1alpha1.ConnectClientMetadataDocument},
		"registration only":          {connect.ServerMetadata{RegistrationEndpoint: "https://as/register"}, cantusv1alpha1.ConnectClientDynamicRegistration},
		"neither said: the document": {connect.ServerMetadata{}, cantusv1alpha1.ConnectClientMetadataDocument},
	} {
		if got := chooseClient(c.md); got != c.want {
			t.Errorf("%s: %s, want %s", name, got, c.want)
		}
	}
}
