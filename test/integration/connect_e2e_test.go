package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/catalog"
	"github.com/cantus-dev/cantus-operator/internal/connect"
	"github.com/cantus-dev/cantus-operator/internal/controller"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/saissuer"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/mcpkit"
	"github.com/cantus-dev/cantus-operator/internal/workload/local"
	"github.com/cantus-dev/cantus-operator/test/testenv"
	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
	"github.com/cantus-dev/cantus-operator/test/testenv/whoami"
)

// connectLink finds the connect link in what a caller was told.
var connectLink = regexp.MustCompile(`https://[^\s"']+` + regexp.QuoteMeta(adapterconfig.ConnectStartPath) + `\?s=[A-Za-z0-9._%-]+`)

// connectWorld is a gateway re-exporting whoami in connect mode, run by the operator's
// controllers on the local runtime, with the operator's connect endpoints, the test
// token service as the remote's authorization server, and a caller.
type connectWorld struct {
	ns, opsNS    string
	ts           *tokenservice.Server
	remote       *whoami.Server
	listener     *httptest.Server
	listenerCA   []byte
	sweeper      *connect.Sweeper
	gatewayURL   string
	callerToken  string
	logs         *lockedBuffer
	clientSecret string
	memoryDir    string
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// connectWorldOptions vary the world: metadataDocument makes the operator the client by
// its Client ID Metadata Document (a public base URL, no pre-registered client).
type connectWorldOptions struct {
	metadataDocument bool
}

func startConnectWorld(t *testing.T, o ...connectWorldOptions) *connectWorld {
	t.Helper()
	var opts connectWorldOptions
	if len(o) > 0 {
		opts = o[0]
	}
	g := NewWithT(t)
	ctx := context.Background()
	w := &connectWorld{ns: kubekit.NewNamespace(t, k8sClient), opsNS: kubekit.NewNamespace(t, k8sClient), logs: &lockedBuffer{}}
	g.Expect(k8sClient.Create(ctx, &cantusv1alpha1.ToolSourcePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "connect-" + w.ns},
		Spec: cantusv1alpha1.ToolSourcePolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": w.ns}},
			Hosts:             []string{"127.0.0.1"},
			ServiceAccounts:   []string{"gateway"},
		},
	})).To(Succeed())
	for _, name := range []string{"gateway", "agent", "prober"} {
		g.Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}})).To(Succeed())
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	g.Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.opsNS, Name: "connect-keys"}, Data: map[string][]byte{"k1": key}})).To(Succeed())

	w.ts = tokenservice.Start(t, tokenservice.Options{TLS: true})
	w.ts.AddUser("alice", "wonderland")
	w.ts.AddUser("carol", "probe-pass")
	w.remote = whoami.Start(t, whoami.Options{TLS: true, Issuer: w.ts.URL(), Keys: w.ts.Keys(), AuthorizationServers: []string{w.ts.URL()},
		APIKeys: map[string]string{"probe-key": "operator-probe"}, Revoked: w.ts.AccessTokenRevoked})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(w.ts.CAPEM())
	roots.AppendCertsFromPEM(w.remote.CAPEM())

	log := funcr.New(func(prefix, args string) {
		w.logs.mu.Lock()
		defer w.logs.mu.Unlock()
		fmt.Fprintln(&w.logs.buf, prefix, args)
	}, funcr.Options{Verbosity: 10})
	keys := &connect.Keys{Reader: k8sClient, Secret: types.NamespacedName{Namespace: w.opsNS, Name: "connect-keys"}, Refresh: time.Nanosecond}
	store := &connect.Store{Client: k8sClient, Namespace: w.opsNS, Keys: keys}
	w.sweeper = &connect.Sweeper{Store: store, Reader: k8sClient, Log: log}

	// The manager's own logs (the reconcilers') go where the test greps for tokens.
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}, Cache: controller.CacheOptions(), Client: controller.ClientOptions(), Logger: log,
	})
	g.Expect(err).NotTo(HaveOccurred())
	handler := &connect.Handler{
		Client: mgr.GetClient(), Store: store, Log: log, DialFor: controller.PolicyDialer(mgr.GetClient(), nil), RootCAs: roots,
		Gateways: &catalog.Authorizer{Client: k8sClient, Audience: adapterconfig.ConnectAudience},
		Callers:  &catalog.Authorizer{Client: k8sClient, Audience: catalog.DefaultAudience},
	}
	mux := http.NewServeMux()
	handler.Routes(mux)
	w.listener = httptest.NewTLSServer(mux)
	t.Cleanup(w.listener.Close)
	w.listenerCA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.listener.Certificate().Raw})
	baseURL := ""
	if opts.metadataDocument {
		baseURL = w.listener.URL
		handler.BaseURL = baseURL
		// The authorization server fetches the operator's document over HTTPS.
		w.ts.SetHTTPClient(w.ts.BrowserClient(w.listenerCA))
	}
	w.clientSecret = "client-secret-" + strings.ToLower(rand.Text())
	w.ts.SetClient(tokenservice.Client{ID: "cantus-connect", Secret: w.clientSecret, RedirectURIs: []string{w.listener.URL + adapterconfig.ConnectCallback}})

	adapters := local.New(mgr.GetAPIReader())
	adapters.MemoryDir = t.TempDir()
	w.memoryDir = adapters.MemoryDir
	adapters.MintToken = local.MintToken(mgr.GetClient())
	g.Expect(mgr.Add(adapters)).To(Succeed())
	issuer := &saissuer.Watcher{Client: discovery.NewDiscoveryClientForConfigOrDie(restConfig).RESTClient(), Every: time.Hour}
	revocations := &saissuer.Revocations{Config: restConfig, MaxTokenLifetime: saissuer.DefaultMaxTokenLifetime, Every: time.Hour, OnChange: func() {}}
	watchCtx, stopWatching := context.WithCancel(ctx)
	t.Cleanup(stopWatching)
	go func() { _ = revocations.Start(watchCtx) }()
	servers := &controller.SkillServerReconciler{Client: mgr.GetClient(), Runtime: adapters, Recorder: mgr.GetEventRecorder("cantus-operator"),
		Issuer: issuer, Revocations: revocations, IssuerChanged: make(chan event.GenericEvent),
		ConnectEndpoint: w.listener.URL + adapterconfig.ConnectTokenPath, ConnectCA: func() []byte { return w.listenerCA }}
	g.Expect(servers.SetupWithManager(mgr)).To(Succeed())
	imports := &controller.RemoteToolImportReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("cantus-operator"),
		Connect: &controller.ConnectSettings{BaseURL: baseURL, Counter: &connect.Counter{Reader: k8sClient, Namespace: w.opsNS, Keys: keys}, RootCAs: roots, ProbeTokens: handler}}
	g.Expect(imports.SetupWithManager(mgr)).To(Succeed())
	kubekit.RunManager(t, mgr)

	g.Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "whoami"}, Data: map[string][]byte{
		"probe": []byte("Bearer probe-key"), "ca.crt": w.remote.CAPEM(), "client-secret": []byte(w.clientSecret),
	}})).To(Succeed())
	imp := kubekit.NewImport(w.ns, "whoami", w.remote.URL())
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(10 * time.Second)
	imp.Spec.Headers = []cantusv1alpha1.HeaderFromSecret{{Name: "Authorization", ValueFrom: cantusv1alpha1.SecretKeyRef{Name: "whoami", Key: "probe"}}}
	imp.Spec.TLS = &cantusv1alpha1.ImportTLS{CABundle: &cantusv1alpha1.CABundleRef{SecretRef: &cantusv1alpha1.SecretKeyRef{Name: "whoami", Key: "ca.crt"}}}
	imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{
		Client: &cantusv1alpha1.ConnectClient{ClientID: "cantus-connect", ClientSecret: &cantusv1alpha1.SecretKeyRef{Name: "whoami", Key: "client-secret"}},
	}}
	if opts.metadataDocument {
		imp.Spec.CallerCredentials.Connect.Client = nil
	}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	gw := kubekit.NewSkillServer(w.ns, "gw")
	gw.Spec.Auth = &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}}
	gw.Spec.Pod = &cantusv1alpha1.PodOverrides{ServiceAccountName: "gateway"}
	gw.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "whoami"}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	g.Eventually(func() string {
		got, err := kubekit.GetSkillServer(ctx, k8sClient, w.ns, "gw")()
		if err != nil {
			return err.Error()
		}
		if len(got.Status.Tools) == 0 || got.Status.URL == "" {
			b, _ := yaml.Marshal(got.Status.Conditions)
			return "not serving whoami yet: " + string(b)
		}
		w.gatewayURL = got.Status.URL
		return ""
	}, 60*time.Second, 200*time.Millisecond).Should(BeEmpty())
	w.callerToken = serviceAccountToken(t, w.ns, "agent", render.DefaultServiceAccountAudience(gw))
	return w
}

// call calls whoami through the gateway as the caller.
func (w *connectWorld) call(ctx context.Context) (string, error) {
	return callAs(ctx, w.gatewayURL, w.callerToken)
}

// connectAs follows the link in what the caller was told and signs in as the user.
func (w *connectWorld) connectAs(ctx context.Context, t *testing.T, told, user, password string) {
	t.Helper()
	status, page := w.openConnectLink(ctx, t, told, user, password)
	if status != http.StatusOK || !strings.Contains(page, "Connected") {
		t.Fatalf("callback page: %d %s", status, page)
	}
}

// callAs calls whoami through gatewayURL with token.
func callAs(ctx context.Context, gatewayURL, token string) (string, error) {
	res, err := mcpkit.CallTool(ctx, gatewayURL, "streamable-http", whoami.ToolName, nil, bearer(token))
	if err != nil {
		return "", err
	}
	return mcpkit.ResultText(res), nil
}

// openConnectLink follows the link in what the caller was told and signs in as user,
// returning the callback page.
func (w *connectWorld) openConnectLink(ctx context.Context, t *testing.T, told, user, password string) (int, string) {
	t.Helper()
	link := connectLink.FindString(told)
	if link == "" {
		t.Fatalf("no connect link in %q", told)
	}
	resp, err := w.ts.Login(ctx, w.ts.BrowserClient(w.listenerCA), link, user, password)
	if err != nil {
		t.Fatalf("log in through the connect link: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func tokenAccountSecrets(t *testing.T, ns string) []corev1.Secret {
	t.Helper()
	list := &corev1.SecretList{}
	if err := k8sClient.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{connect.LabelAccount: "account"}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// A caller's first call through the gateway is told where to connect; the user follows
// the link and signs in at the remote's authorization server; the retry reaches the
// remote as the user. An expired access token is refreshed with the refresh token;
// disconnecting revokes it; a deleted service account's account is forgotten; and no
// token shows in statuses, events, logs or metrics.
func TestCallerCredentials_ConnectEndToEndOnTheLocalRuntime(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := startConnectWorld(t)

	imp, err := kubekit.GetImport(ctx, k8sClient, w.ns, "whoami")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(imp.Status.CallerCredentials).NotTo(BeNil())
	g.Expect(imp.Status.CallerCredentials.AuthorizationServer).To(Equal(w.ts.URL()))
	g.Expect(imp.Status.CallerCredentials.AuthorizationServerDiscovered).To(BeTrue(), "found in the remote's RFC 9728 metadata")

	told, err := w.call(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(told).To(ContainSubstring(adapterconfig.ConnectStartPath), "the first call is told where to connect")
	g.Expect(w.remote.Calls("alice")).To(BeZero())
	w.ts.SetTokenLifetime(2 * time.Second) // so that the refresh below is needed
	w.connectAs(ctx, t, told, "alice", "wonderland")

	answer, err := w.call(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(answer).To(HavePrefix("remote saw subject=alice"), "after connecting, the remote sees the user")

	t.Run("the import's status counts the connected account at its next probe", func(t *testing.T) {
		g := NewWithT(t)
		imp, err := kubekit.GetImport(ctx, k8sClient, w.ns, "whoami")()
		g.Expect(err).NotTo(HaveOccurred())
		before := imp.DeepCopy()
		if imp.Annotations == nil {
			imp.Annotations = map[string]string{}
		}
		imp.Annotations[cantusv1alpha1.ReconcileRequestAnnotation] = "count-1"
		g.Expect(k8sClient.Patch(ctx, imp, client.MergeFrom(before))).To(Succeed())
		g.Eventually(func() int32 {
			imp, _ := kubekit.GetImport(ctx, k8sClient, w.ns, "whoami")()
			if imp.Status.CallerCredentials == nil {
				return -1
			}
			return imp.Status.CallerCredentials.Connected
		}, 30*time.Second, 200*time.Millisecond).Should(Equal(int32(1)))
	})

	t.Run("an expired access token is refreshed with the refresh token", func(t *testing.T) {
		g := NewWithT(t)
		before := w.ts.Grants(oidc.GrantTypeRefreshToken)
		g.Eventually(func() int {
			if answer, err := w.call(ctx); err != nil || !strings.HasPrefix(answer, "remote saw subject=alice") {
				return -1
			}
			return w.ts.Grants(oidc.GrantTypeRefreshToken) - before
		}, 30*time.Second, 500*time.Millisecond).Should(BeNumerically(">=", 1))
	})

	t.Run("no token shows in statuses, events, logs or metrics", func(t *testing.T) {
		secrets := append(w.ts.IssuedTokens(), w.ts.IssuedRefreshTokens()...)
		secrets = append(secrets, w.callerToken, w.clientSecret)
		// The gateway's own token for the operator, as the local runtime minted it.
		gatewayToken, err := os.ReadFile(filepath.Join(w.memoryDir, ".imports", w.ns, "gw", "whoami", "connect-token"))
		g.Expect(err).NotTo(HaveOccurred())
		secrets = append(secrets, string(gatewayToken))
		var hay strings.Builder
		for _, obj := range []client.Object{&cantusv1alpha1.RemoteToolImport{}, &cantusv1alpha1.SkillServer{}} {
			name := "whoami"
			if _, ok := obj.(*cantusv1alpha1.SkillServer); ok {
				name = "gw"
			}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: name}, obj)).To(Succeed())
			b, _ := json.Marshal(obj)
			hay.Write(b)
		}
		events := &corev1.EventList{}
		g.Expect(k8sClient.List(ctx, events, client.InNamespace(w.ns))).To(Succeed())
		for _, e := range events.Items {
			hay.WriteString(e.Message)
		}
		g.Expect(w.logs.String()).To(ContainSubstring("remotetoolimport"), "the manager's own logs are among those searched")
		hay.WriteString(w.logs.String())
		families, err := ctrlmetrics.Registry.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		for _, mf := range families {
			_, _ = expfmt.MetricFamilyToText(&hay, mf)
		}
		for _, s := range tokenAccountSecrets(t, w.opsNS) {
			fmt.Fprintf(&hay, "%s %v %v %s", s.Name, s.Labels, s.Annotations, s.Data["sealed"])
		}
		g.Expect(len(secrets)).To(BeNumerically(">=", 4))
		for _, s := range secrets {
			if s != "" && strings.Contains(hay.String(), s) {
				t.Fatal("a token or the client secret shows in a status, event, log, metric or the account's Secret")
			}
		}
	})

	t.Run("disconnecting revokes the token and asks to connect again", func(t *testing.T) {
		g := NewWithT(t)
		revocations := w.ts.Revocations()
		req, _ := http.NewRequest(http.MethodPost, w.listener.URL+adapterconfig.ConnectDisconnect+"?import="+w.ns+"/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+serviceAccountToken(t, w.ns, "agent", catalog.DefaultAudience))
		resp, err := w.listener.Client().Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(w.ts.Revocations()).To(BeNumerically(">", revocations), "revoked at the authorization server (RFC 7009)")
		g.Expect(tokenAccountSecrets(t, w.opsNS)).To(BeEmpty())
		g.Eventually(func() string {
			told, _ := w.call(ctx)
			return told
		}, 30*time.Second, 500*time.Millisecond).Should(ContainSubstring(adapterconfig.ConnectStartPath))
	})

	t.Run("a remote that needs a user to list its tools is probed as the probe identity", func(t *testing.T) {
		g := NewWithT(t)
		newConnectImport := func(name string, id *cantusv1alpha1.ProbeIdentity) {
			imp := kubekit.NewImport(w.ns, name, w.remote.URL())
			imp.Spec.Timeout = cantusv1alpha1.DurationFrom(10 * time.Second)
			imp.Spec.TLS = &cantusv1alpha1.ImportTLS{CABundle: &cantusv1alpha1.CABundleRef{SecretRef: &cantusv1alpha1.SecretKeyRef{Name: "whoami", Key: "ca.crt"}}}
			imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{ProbeIdentity: id,
				Client: &cantusv1alpha1.ConnectClient{ClientID: "cantus-connect", ClientSecret: &cantusv1alpha1.SecretKeyRef{Name: "whoami", Key: "client-secret"}}}}
			g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
		}
		handshake := func(name string) func() string {
			return func() string {
				imp, err := kubekit.GetImport(ctx, k8sClient, w.ns, name)()
				if err != nil {
					return err.Error()
				}
				return kubekit.ImportCondition(imp, cantusv1alpha1.ConditionHandshakeSucceeded).Reason
			}
		}
		newConnectImport("anonymous", nil)
		g.Eventually(handshake("anonymous"), 30*time.Second, 200*time.Millisecond).Should(Equal(cantusv1alpha1.ReasonProbeIdentityRequired))

		newConnectImport("as-prober", &cantusv1alpha1.ProbeIdentity{ServiceAccount: "prober"})
		g.Eventually(handshake("as-prober"), 30*time.Second, 200*time.Millisecond).Should(Equal(cantusv1alpha1.ReasonProbeIdentityNotConnected))
		req, _ := http.NewRequest(http.MethodPost, w.listener.URL+connect.LinkPath+"?import="+w.ns+"/as-prober", nil)
		req.Header.Set("Authorization", "Bearer "+serviceAccountToken(t, w.ns, "prober", catalog.DefaultAudience))
		resp, err := w.listener.Client().Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		var link adapterconfig.ConnectTokenResponse
		g.Expect(json.NewDecoder(resp.Body).Decode(&link)).To(Succeed())
		_ = resp.Body.Close()
		w.connectAs(ctx, t, link.ConnectURL, "carol", "probe-pass")
		g.Eventually(func() []cantusv1alpha1.DiscoveredTool {
			imp, _ := kubekit.GetImport(ctx, k8sClient, w.ns, "as-prober")()
			return imp.Status.Tools
		}, 60*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty())
		g.Expect(w.remote.Requests("carol")).To(BeNumerically(">", 0), "the probe reached the remote as the probe identity's user")
	})

	t.Run("a deleted service account's account is forgotten", func(t *testing.T) {
		g := NewWithT(t)
		told, err := w.call(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		w.connectAs(ctx, t, told, "alice", "wonderland")
		g.Expect(tokenAccountSecrets(t, w.opsNS)).To(HaveLen(2), "the agent's and the prober's")
		g.Expect(k8sClient.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "agent"}})).To(Succeed())
		g.Expect(w.sweeper.Sweep(ctx)).To(Succeed())
		g.Expect(tokenAccountSecrets(t, w.opsNS)).To(HaveLen(1), "only the prober's is left")
	})
}

// Without a pre-registered client, the operator is the client its Client ID Metadata
// Document describes: the authorization server fetches it from the operator's public
// base URL, and a user connects as with a registered client.
func TestCallerCredentials_ConnectWithTheOperatorsClientIDMetadataDocument(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := startConnectWorld(t, connectWorldOptions{metadataDocument: true})
	imp, err := kubekit.GetImport(ctx, k8sClient, w.ns, "whoami")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(imp.Status.CallerCredentials.Client).To(Equal(cantusv1alpha1.ConnectClientMetadataDocument))

	told, err := w.call(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	w.connectAs(ctx, t, told, "alice", "wonderland")
	answer, err := w.call(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(answer).To(HavePrefix("remote saw subject=alice"))
	g.Expect(w.ts.MetadataDocumentFetches(w.listener.URL+adapterconfig.ConnectClientPath)).To(BeNumerically(">", 0), "the authorization server read the operator's document")
}
