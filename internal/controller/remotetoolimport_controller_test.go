package controller

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// adapterHandler serves a real cantus adapter with the given tools; token, when set, is
// the bearer token it requires.
func adapterHandler(t *testing.T, token string, toolNames ...string) http.Handler {
	t.Helper()
	cfg := &adapterconfig.Config{Server: adapterconfig.ServerInfo{Name: "remote-books", Version: "1.2.3"}, Transport: adapterconfig.TransportStreamableHTTP, Stateless: true}
	for _, name := range toolNames {
		cfg.Tools = append(cfg.Tools, adapterconfig.Tool{Name: name, Description: "tool " + name, InputSchema: json.RawMessage(kubekit.BookSchema),
			Template: &adapterconfig.TemplateBackend{Text: "ok {{ .title }}"}})
	}
	if token != "" {
		cfg.BearerTokenFile = filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(cfg.BearerTokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return runAdapter(t, cfg)
}

// runAdapter runs the adapter binary (peers.AdapterBinary) with cfg until the test ends
// and returns a handler that forwards to it. A process, not adapter.NewServer in this
// one: the controller's tests link nothing of the data plane, as the controller does
// not; test/integration runs adapters in process.
func runAdapter(t *testing.T, cfg *adapterconfig.Config) http.Handler {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := peers.StartAdapter(t, ctx, peers.WriteJSON(t, "adapter.json", cfg))
	target, err := url.Parse(base)
	if err != nil {
		t.Fatalf("adapter URL %q: %v", base, err)
	}
	return httputil.NewSingleHostReverseProxy(target)
}

func importReconciler() *RemoteToolImportReconciler {
	return &RemoteToolImportReconciler{Client: k8sClient, Prober: mcpclient.Probe}
}

func TestImportOfOwnAdapterListsToolsWithSchemasUnchanged(t *testing.T) {
	g := NewWithT(t)
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	srv := testkit.NewCountingServer(t, adapterHandler(t, "", "search_book", "get_book", "delete_book"))

	imp := kubekit.NewImport(ns, "books", srv.URL+"/mcp")
	imp.Spec.Tools = &cantusv1alpha1.ToolFilter{Exclude: []string{"delete_*"}}
	got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), imp)

	for _, c := range []string{cantusv1alpha1.ConditionSourceAllowed, cantusv1alpha1.ConditionHandshakeSucceeded, cantusv1alpha1.ConditionToolsDiscovered, cantusv1alpha1.ConditionReady} {
		g.Expect(kubekit.ImportCondition(got, c).Status).To(Equal(metav1.ConditionTrue), "%s: %+v", c, kubekit.ImportCondition(got, c))
	}
	g.Expect(got.Status.ServerInfo.Name).To(Equal("remote-books"))
	g.Expect(got.Status.ServerInfo.Version).To(Equal("1.2.3"))
	g.Expect(got.Status.ServerInfo.ProtocolVersion).NotTo(BeEmpty())
	g.Expect(got.Status.ServerInfo.Capabilities).To(ContainElement("tools"))
	g.Expect(got.Status.ToolCount).To(Equal(int32(2)))
	g.Expect(got.Status.Tools).To(HaveLen(2))
	for _, tool := range got.Status.Tools {
		g.Expect(tool.Name).NotTo(Equal("delete_book"), "excluded by spec.tools.exclude")
		g.Expect(tool.InputSchema.Raw).To(MatchJSON(kubekit.BookSchema), "schema passes through unchanged")
	}
	g.Expect(got.Status.CatalogDigest).To(MatchRegexp(`^[0-9a-f]{64}$`))
	g.Expect(got.Status.LastSuccessTime).NotTo(BeNil())
	g.Expect(got.Status.ConsecutiveFailures).To(BeZero())
}

func TestImportHandshakeFaults(t *testing.T) {
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)

	closedPort := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/mcp"
	}
	silent := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
			}
		}()
		return "http://" + ln.Addr().String() + "/mcp"
	}
	serve := func(h http.HandlerFunc) string { return testkit.NewCountingServer(t, h).URL + "/mcp" }
	tooManyTools := make([]string, 1001)
	for i := range tooManyTools {
		tooManyTools[i] = fmt.Sprintf("tool_%04d", i)
	}

	cases := []struct {
		name   string
		url    func() string
		reason string
		detail string
	}{
		{"connection refused", closedPort, "ConnectionRefused", ""},
		{"accepts TCP and never answers", silent, "Timeout", ""},
		{"HTTP 500", func() string {
			return serve(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
		}, "HTTPError", "500"},
		{"HTTP 401", func() string {
			return testkit.NewCountingServer(t, adapterHandler(t, "right-token", "x")).URL + "/mcp"
		}, "Unauthorized", "401"},
		{"invalid JSON", func() string {
			return serve(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":`))
			})
		}, "ProtocolError", ""},
		{"plain non-MCP HTTP server", func() string {
			return serve(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				_, _ = w.Write([]byte("<html><body>hello</body></html>"))
			})
		}, "ProtocolError", ""},
		{"TLS with an unknown CA", func() string {
			s := httptest.NewTLSServer(adapterHandler(t, "", "x"))
			testkit.CloseAtEnd(t, s)
			return s.URL + "/mcp"
		}, "TLSError", ""},
		{"tool list over the limit", func() string {
			return testkit.NewCountingServer(t, adapterHandler(t, "", tooManyTools...)).URL + "/mcp"
		}, "ResponseTooLarge", ""},
		{"connection dropped mid-answer", func() string {
			return serve(func(w http.ResponseWriter, _ *http.Request) {
				conn, buf, _ := w.(http.Hijacker).Hijack()
				_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{\"jsonrpc\":\"2.0\",")
				_ = buf.Flush()
				conn.Close()
			})
		}, "ConnectionDropped", ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), kubekit.NewImport(ns, fmt.Sprintf("fault-%d", i), tc.url()))
			ready := kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady)
			hs := kubekit.ImportCondition(got, cantusv1alpha1.ConditionHandshakeSucceeded)
			g.Expect(hs.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(hs.Reason).To(Equal(tc.reason), hs.Message)
			g.Expect(ready.Reason).To(Equal(tc.reason))
			g.Expect(ready.Message).To(HavePrefix("mcp_handshake_failed: "))
			g.Expect(ready.Message).To(ContainSubstring(tc.detail))
			g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionSourceAllowed).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(got.Status.ConsecutiveFailures).To(Equal(int32(1)))
			g.Expect(got.Status.Tools).To(BeEmpty())
		})
	}
}

func TestImportTrustsCABundleFromConfigMap(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	s := httptest.NewTLSServer(adapterHandler(t, "", "search_book"))
	testkit.CloseAtEnd(t, s)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	_, err := x509.ParseCertificate(s.Certificate().Raw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8sClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "remote-ca"}, Data: map[string]string{"ca.crt": string(caPEM)}})).To(Succeed())

	imp := kubekit.NewImport(ns, "tls", s.URL+"/mcp")
	imp.Spec.TLS = &cantusv1alpha1.ImportTLS{CABundle: &cantusv1alpha1.CABundleRef{ConfigMapRef: &cantusv1alpha1.ConfigMapKeyRef{Name: "remote-ca"}}}
	got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), imp)
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Message)
}

func TestImportRedirectToDisallowedHostIsRefused(t *testing.T) {
	g := NewWithT(t)
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	// 127.0.0.2 is loopback too, but the policy names only 127.0.0.1.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("127.0.0.2 is not available here: %v", err)
	}
	target := &testkit.CountingServer{}
	target.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { target.Requests.Add(1) }))
	target.Listener = ln
	target.Start()
	testkit.CloseAtEnd(t, target.Server)
	redirector := testkit.NewCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/mcp", http.StatusTemporaryRedirect)
	}))

	got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), kubekit.NewImport(ns, "redirect", redirector.URL+"/mcp"))
	ready := kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady)
	g.Expect(ready.Reason).To(Equal("RedirectRefused"), ready.Message)
	g.Expect(ready.Message).To(HavePrefix("mcp_handshake_failed: "))
	g.Expect(target.Requests.Load()).To(BeZero(), "the redirect target received no request")
}

func TestImportAllowlist(t *testing.T) {
	ctx := context.Background()
	t.Run("no policy: no connection attempted", func(t *testing.T) {
		g := NewWithT(t)
		ns := kubekit.NewNamespace(t, k8sClient)
		srv := testkit.NewCountingServer(t, adapterHandler(t, "", "x"))
		got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), kubekit.NewImport(ns, "unlisted", srv.URL+"/mcp"))
		allowed := kubekit.ImportCondition(got, cantusv1alpha1.ConditionSourceAllowed)
		g.Expect(allowed.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(allowed.Reason).To(Equal(cantusv1alpha1.ReasonNoPolicy))
		g.Expect(allowed.Message).To(ContainSubstring("create a ToolSourcePolicy"))
		g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Reason).To(Equal(cantusv1alpha1.ReasonNoPolicy))
		g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionHandshakeSucceeded).Reason).To(Equal(cantusv1alpha1.ReasonNotAttempted))
		g.Expect(srv.Requests.Load()).To(BeZero(), "the peer received no request at all")
	})
	t.Run("host not listed names the rule that would allow it", func(t *testing.T) {
		g := NewWithT(t)
		ns := kubekit.NewNamespace(t, k8sClient)
		p := kubekit.AllowLoopback(t, k8sClient, ns)
		p.Spec.Hosts = []string{"mcp.example.com"}
		g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
		srv := testkit.NewCountingServer(t, adapterHandler(t, "", "x"))
		got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), kubekit.NewImport(ns, "unlisted", srv.URL+"/mcp"))
		allowed := kubekit.ImportCondition(got, cantusv1alpha1.ConditionSourceAllowed)
		g.Expect(allowed.Reason).To(Equal(cantusv1alpha1.ReasonNotAllowlisted))
		g.Expect(allowed.Message).To(ContainSubstring(`add "127.0.0.1" to spec.hosts`))
		g.Expect(srv.Requests.Load()).To(BeZero())
	})
	t.Run("cloud metadata IP", func(t *testing.T) {
		g := NewWithT(t)
		ns := kubekit.NewNamespace(t, k8sClient)
		p := kubekit.AllowLoopback(t, k8sClient, ns)
		p.Spec.Hosts = []string{"*.example.com", "metadata.example.com"}
		g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
		got := kubekit.ReconcileImport(t, k8sClient, importReconciler(), kubekit.NewImport(ns, "metadata", "http://169.254.169.254/latest/meta-data"))
		g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionSourceAllowed).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	})
	t.Run("a name that resolves to a denied address", func(t *testing.T) {
		g := NewWithT(t)
		ns := kubekit.NewNamespace(t, k8sClient)
		p := kubekit.AllowLoopback(t, k8sClient, ns)
		p.Spec.Hosts = []string{"metadata.example.com"}
		g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
		r := importReconciler()
		r.Resolver = staticResolver{"metadata.example.com": netip.MustParseAddr("169.254.169.254")}
		got := kubekit.ReconcileImport(t, k8sClient, r, kubekit.NewImport(ns, "rebind", "http://metadata.example.com/latest"))
		allowed := kubekit.ImportCondition(got, cantusv1alpha1.ConditionSourceAllowed)
		g.Expect(allowed.Reason).To(Equal(cantusv1alpha1.ReasonDeniedAddress))
		g.Expect(allowed.Message).To(ContainSubstring("cloud metadata"))
	})
}

type staticResolver map[string]netip.Addr

func (s staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := s[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

func TestImportStaleToolsAreMarkedWhenTheRemoteGoesDown(t *testing.T) {
	g := NewWithT(t)
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	srv := testkit.NewCountingServer(t, adapterHandler(t, "", "search_book"))
	r := importReconciler()
	got := kubekit.ReconcileImport(t, k8sClient, r, kubekit.NewImport(ns, "stale", srv.URL+"/mcp"))
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))

	srv.Close()
	got = kubekit.ReconcileImport(t, k8sClient, r, got)
	g.Expect(got.Status.Tools).To(HaveLen(1), "the last good tools stay")
	g.Expect(got.Status.Stale).To(BeTrue())
	stale := kubekit.ImportCondition(got, cantusv1alpha1.ConditionStale)
	g.Expect(stale.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(stale.Message).To(ContainSubstring("the last probe failed: mcp_handshake_failed: "))
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(got.Status.ConsecutiveFailures).To(Equal(int32(1)))
}

// The manager-driven tests: watches on policies and Secrets re-run handshakes.
func TestImportReactsToPolicyAndSecretChanges(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	startImportManager(t, 0)
	srv := testkit.NewCountingServer(t, adapterHandler(t, "right-token", "search_book"))
	g.Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "remote-auth"},
		StringData: map[string]string{"token": "Bearer wrong-token"}})).To(Succeed())

	imp := kubekit.NewImport(ns, "later", srv.URL+"/mcp")
	imp.Spec.Headers = []cantusv1alpha1.HeaderFromSecret{{Name: "Authorization", ValueFrom: cantusv1alpha1.SecretKeyRef{Name: "remote-auth"}}}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	getImport := func() (*cantusv1alpha1.RemoteToolImport, error) {
		got := &cantusv1alpha1.RemoteToolImport{}
		return got, k8sClient.Get(ctx, crclient.ObjectKeyFromObject(imp), got)
	}
	readyReason := func() (string, error) {
		got, err := getImport()
		return kubekit.ImportCondition(got, cantusv1alpha1.ConditionReady).Reason, err
	}
	g.Eventually(readyReason).Should(Equal(cantusv1alpha1.ReasonNoPolicy))
	g.Expect(srv.Requests.Load()).To(BeZero())

	kubekit.AllowLoopback(t, k8sClient, ns)
	g.Eventually(readyReason).Should(Equal("Unauthorized"), "policy added later: the handshake runs, and the bad token is refused")

	secret := &corev1.Secret{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "remote-auth"}, secret)).To(Succeed())
	secret.Data["token"] = []byte("Bearer right-token")
	g.Expect(k8sClient.Update(ctx, secret)).To(Succeed())
	g.Eventually(readyReason).Should(Equal(cantusv1alpha1.ReasonHandshakeSucceeded), "the Secret fixed: Ready without touching the import")
	got, _ := getImport()
	g.Expect(got.Generation).To(Equal(int64(1)))
	for _, c := range got.Status.Conditions {
		g.Expect(c.Message).NotTo(ContainSubstring("right-token"), "no secret value in status")
		g.Expect(c.Message).NotTo(ContainSubstring("wrong-token"))
	}
}

func startImportManager(t *testing.T, maxConcurrent int) {
	t.Helper()
	mgr := newTestManager(t)
	r := &RemoteToolImportReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("cantus-operator"), MaxConcurrentHandshakes: maxConcurrent}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("set up import controller: %v", err)
	}
	kubekit.RunManager(t, mgr)
}

// 200 imports, 20 of them at servers that accept TCP and never answer: the healthy ones
// must not queue behind the hanging ones' timeouts.
func TestImportHangingRemotesDoNotStarveHealthyOnes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startImportManager(t, 0)
	healthy := testkit.NewCountingServer(t, adapterHandler(t, "", "search_book"))
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { hang.Close() })
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()

	const hangTimeout = 20 * time.Second
	start := time.Now()
	for i := range 200 {
		url := healthy.URL + "/mcp"
		if i%10 == 0 {
			url = "http://" + hang.Addr().String() + "/mcp"
		}
		imp := kubekit.NewImport(ns, fmt.Sprintf("imp-%03d", i), url)
		imp.Spec.Timeout = cantusv1alpha1.DurationFrom(hangTimeout)
		g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	}
	countReady := func() (ready, timedOut int) {
		list := &cantusv1alpha1.RemoteToolImportList{}
		g.Expect(k8sClient.List(ctx, list, crclient.InNamespace(ns))).To(Succeed())
		for i := range list.Items {
			c := kubekit.ImportCondition(&list.Items[i], cantusv1alpha1.ConditionReady)
			switch {
			case c.Status == metav1.ConditionTrue:
				ready++
			case c.Reason == "Timeout":
				timedOut++
			}
		}
		return ready, timedOut
	}
	var timedOutWhenHealthyReady int
	g.Eventually(func() int {
		ready, timedOut := countReady()
		timedOutWhenHealthyReady = timedOut
		return ready
	}, 2*time.Minute, 200*time.Millisecond).Should(Equal(180))
	healthyTook := time.Since(start)
	g.Eventually(func() int { _, timedOut := countReady(); return timedOut }, 2*time.Minute, time.Second).Should(Equal(20))
	hangingTook := time.Since(start)
	t.Logf("200 imports (20 hanging, timeout %s): 180 healthy Ready after %s; 20 hanging reported Timeout after %s", hangTimeout, healthyTook.Round(time.Millisecond), hangingTook.Round(time.Millisecond))
	fmt.Printf("figures: 180 healthy imports Ready in %s beside 20 hanging ones (timeout %s, reported after %s)\n", healthyTook.Round(time.Millisecond), hangTimeout, hangingTook.Round(time.Millisecond))
	g.Expect(timedOutWhenHealthyReady).To(BeZero(), "the healthy imports were all Ready before any hanging one timed out")
}

// swappableHandler serves whichever handler was stored last.
type swappableHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swappableHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

func TestImportRecordsEventsWhenTheRemoteToolsChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startImportManager(t, 0)
	remote := &swappableHandler{}
	first := adapterHandler(t, "", "search_book", "old_tool")
	remote.h.Store(&first)
	srv := testkit.NewCountingServer(t, remote)

	imp := kubekit.NewImport(ns, "changing", srv.URL+"/mcp")
	imp.Spec.RefreshInterval = cantusv1alpha1.DurationFrom(cantusv1alpha1.MinRefreshInterval)
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	g.Eventually(func() int32 {
		got := &cantusv1alpha1.RemoteToolImport{}
		_ = k8sClient.Get(ctx, crclient.ObjectKeyFromObject(imp), got)
		return got.Status.ToolCount
	}, 20*time.Second).Should(Equal(int32(2)))

	second := adapterHandler(t, "", "search_book", "new_tool")
	remote.h.Store(&second)
	g.Eventually(func() []string {
		list := &eventsv1.EventList{}
		_ = k8sClient.List(ctx, list, crclient.InNamespace(ns))
		var notes []string
		for _, e := range list.Items {
			notes = append(notes, e.Reason+": "+e.Note)
		}
		return notes
	}, 3*cantusv1alpha1.MinRefreshInterval).Should(ContainElements(
		HavePrefix("HandshakeSucceeded: initialized with remote-books 1.2.3"),
		Equal("ToolsChanged: added new_tool; removed old_tool"),
	))
}
