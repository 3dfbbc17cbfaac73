package connect_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/prometheus/common/expfmt"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/catalog"
	"github.com/cantus-dev/cantus-operator/internal/connect"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

var k8s client.Client

func TestMain(m *testing.M) {
	env, cfg, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	code := 1
	if err == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	_ = env.Stop()
	os.Exit(code)
}

// fixture is one namespace with a gateway re-exporting an import in connect mode, a
// caller, the operator's connect endpoints and an authorization server.
type fixture struct {
	t         *testing.T
	ns        string
	as        *authServer
	handler   *connect.Handler
	srv       *httptest.Server
	store     *connect.Store
	counter   *connect.Counter
	sweeper   *connect.Sweeper
	imp       *cantusv1alpha1.RemoteToolImport
	callerUID string
	gwToken   string
	now       time.Time
	nowMu     sync.Mutex
	logs      *bytes.Buffer
	logsMu    *sync.Mutex
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, ns: "team-" + strings.ToLower(randomText(6)), as: startAuthServer(t), now: time.Now(), logs: &bytes.Buffer{}, logsMu: &sync.Mutex{}}
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})
	f.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "gateway"}})
	caller := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "agent"}}
	f.create(caller)
	f.callerUID = string(caller.UID)
	f.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "other"}})
	keyData := make([]byte, 32)
	_, _ = rand.Read(keyData)
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "connect-keys"}, Data: map[string][]byte{"2026-01": keyData}})
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "client"}, Data: map[string][]byte{"secret": []byte("client-secret-" + randomText(12))}})

	f.imp = &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "whoami"},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			URL: "https://remote.example/mcp",
			CallerCredentials: &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{
				Scopes: []string{"read"},
				Client: &cantusv1alpha1.ConnectClient{ClientID: "cantus", ClientSecret: &cantusv1alpha1.SecretKeyRef{Name: "client", Key: "secret"}},
			}},
		},
	}
	f.create(f.imp)
	f.imp.Status.CallerCredentials = &cantusv1alpha1.CallerCredentialsStatus{
		Mode: cantusv1alpha1.CallerCredentialsModeConnect, AuthorizationServer: f.as.srv.URL, AuthorizationServerChecked: true,
		Endpoints: &cantusv1alpha1.AuthorizationServerEndpoints{Authorization: f.as.srv.URL + "/authorize", Token: f.as.srv.URL + "/token", Revocation: f.as.srv.URL + "/revoke"},
	}
	if err := k8s.Status().Update(ctx, f.imp); err != nil {
		t.Fatal(err)
	}
	f.create(&cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "gw"},
		Spec: cantusv1alpha1.SkillServerSpec{
			Imports: []cantusv1alpha1.SkillImport{{Name: "whoami"}},
			Pod:     &cantusv1alpha1.PodOverrides{ServiceAccountName: "gateway"},
		},
	})

	log := funcr.New(func(prefix, args string) {
		f.logsMu.Lock()
		defer f.logsMu.Unlock()
		fmt.Fprintln(f.logs, prefix, args)
	}, funcr.Options{Verbosity: 10})
	keys := &connect.Keys{Reader: k8s, Secret: types.NamespacedName{Namespace: f.ns, Name: "connect-keys"}, Refresh: time.Nanosecond}
	f.store = &connect.Store{Client: k8s, Namespace: f.ns, Keys: keys}
	f.counter = &connect.Counter{Reader: k8s, Namespace: f.ns, Keys: keys}
	f.sweeper = &connect.Sweeper{Store: f.store, Reader: k8s, Log: log}
	f.handler = &connect.Handler{
		Client: k8s, Store: f.store, Log: log,
		Gateways:   &catalog.Authorizer{Client: k8s, Audience: adapterconfig.ConnectAudience},
		Callers:    &catalog.Authorizer{Client: k8s, Audience: catalog.DefaultAudience},
		HTTPClient: f.as.srv.Client(),
		Now: func() time.Time {
			f.nowMu.Lock()
			defer f.nowMu.Unlock()
			return f.now
		},
	}
	mux := http.NewServeMux()
	f.handler.Routes(mux)
	f.srv = httptest.NewTLSServer(mux)
	t.Cleanup(f.srv.Close)
	f.gwToken = f.token("gateway", adapterconfig.ConnectAudience)
	return f
}

func randomText(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return string(b)
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		f.t.Fatal(err)
	}
}

// token is a token of service account name for audience.
func (f *fixture) token(name, audience string) string {
	f.t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}}}
	if err := k8s.SubResource("token").Create(context.Background(), sa, req); err != nil {
		f.t.Fatal(err)
	}
	return req.Status.Token
}

func (f *fixture) caller() string {
	return adapterconfig.ServiceAccountCaller(f.ns+"/agent", f.callerUID)
}

// expireTokens moves the operator's clock past the connected tokens' expiry; the
// tokens the authorization server issues from then on live longer than the jump.
func (f *fixture) expireTokens() {
	f.as.mu.Lock()
	f.as.lifetime = 3 * time.Hour
	f.as.mu.Unlock()
	f.advance(2 * time.Hour)
}

func (f *fixture) advance(d time.Duration) {
	f.nowMu.Lock()
	f.now = f.now.Add(d)
	f.nowMu.Unlock()
}

// fetch asks the token endpoint as a gateway with token gwToken.
func (f *fixture) fetch(gwToken string, req adapterconfig.ConnectTokenRequest) (int, adapterconfig.ConnectTokenResponse) {
	f.t.Helper()
	body, _ := json.Marshal(req)
	r, _ := http.NewRequest(http.MethodPost, f.srv.URL+adapterconfig.ConnectTokenPath, bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+gwToken)
	resp, err := f.srv.Client().Do(r)
	if err != nil {
		f.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out adapterconfig.ConnectTokenResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, out
}

func (f *fixture) request() adapterconfig.ConnectTokenRequest {
	return adapterconfig.ConnectTokenRequest{Import: f.ns + "/whoami", Caller: f.caller()}
}

// browser follows links as a user's browser: it trusts both servers and follows
// redirects.
func (f *fixture) browser() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(f.srv.Certificate())
	pool.AddCert(f.as.srv.Certificate())
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

func (f *fixture) open(link string) (int, string) {
	f.t.Helper()
	resp, err := f.browser().Get(link)
	if err != nil {
		f.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// connect gets a connect link and opens it.
func (f *fixture) connect() {
	f.t.Helper()
	status, resp := f.fetch(f.gwToken, f.request())
	if status != http.StatusConflict || resp.Error != adapterconfig.ConnectRequiredErr || resp.ConnectURL == "" {
		f.t.Fatalf("first fetch: want 409 %s with a link, got %d %+v", adapterconfig.ConnectRequiredErr, status, resp)
	}
	if code, page := f.open(resp.ConnectURL); code != http.StatusOK || !strings.Contains(page, "connected") {
		f.t.Fatalf("connect page: %d %s", code, page)
	}
}

func (f *fixture) accountSecrets() []corev1.Secret {
	f.t.Helper()
	list := &corev1.SecretList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(f.ns), client.MatchingLabels{connect.LabelAccount: "account"}); err != nil {
		f.t.Fatal(err)
	}
	return list.Items
}

func TestCallerCredentials_ConnectFlowGivesTheCallersOwnToken(t *testing.T) {
	f := newFixture(t)
	f.connect()
	status, resp := f.fetch(f.gwToken, f.request())
	if status != http.StatusOK || resp.AccessToken == "" || resp.ExpiresIn <= 0 {
		t.Fatalf("after connecting: want 200 with an access token, got %d %+v", status, resp)
	}
	_, issued, _ := f.as.counts()
	if resp.AccessToken != issued[0] {
		t.Fatalf("want the token the authorization server issued at the code exchange")
	}
	secrets := f.accountSecrets()
	if len(secrets) != 1 || strings.Contains(secrets[0].Name, "agent") || bytes.Contains(secrets[0].Data["sealed"], []byte(resp.AccessToken)) {
		t.Fatalf("want one account Secret, named by a digest, its tokens encrypted: %v", secrets)
	}
	counts, err := f.counter.Count(context.Background(), f.imp)
	if err != nil || counts.Connected != 1 || counts.ReconnectNeeded != 0 {
		t.Fatalf("counts: %+v %v", counts, err)
	}
	states := connect.States{Store: f.store}
	if state, err := states.State(context.Background(), f.ns+"/whoami", f.caller()); err != nil || state != catalog.ConnectStateConnected {
		t.Fatalf("the catalog's state of the caller: %q %v", state, err)
	}
	if state, _ := states.State(context.Background(), f.ns+"/whoami", f.caller()+"x"); state != catalog.ConnectStateNotConnected {
		t.Fatalf("the catalog's state of another caller: %q", state)
	}
}

func TestCallerCredentials_ConnectLinkWorksOnceAndOnlyForItsCaller(t *testing.T) {
	f := newFixture(t)
	status, resp := f.fetch(f.gwToken, f.request())
	if status != http.StatusConflict {
		t.Fatalf("want 409, got %d", status)
	}
	again, resp2 := f.fetch(f.gwToken, f.request())
	if again != http.StatusConflict || resp2.ConnectURL != resp.ConnectURL {
		t.Fatalf("a retry before the link is used gets the same link: %s vs %s", resp.ConnectURL, resp2.ConnectURL)
	}
	if code, _ := f.open(resp.ConnectURL); code != http.StatusOK {
		t.Fatalf("first open: %d", code)
	}
	if code, page := f.open(resp.ConnectURL); code != http.StatusBadRequest || !strings.Contains(page, "not valid") {
		t.Fatalf("second open: want refused, got %d %s", code, page)
	}
	tampered := resp.ConnectURL[:len(resp.ConnectURL)-3] + "xyz"
	if code, _ := f.open(tampered); code != http.StatusBadRequest {
		t.Fatalf("a tampered link: want refused, got %d", code)
	}
	// Another caller gets its own link.
	other := f.request()
	var sa corev1.ServiceAccount
	_ = k8s.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: "other"}, &sa)
	other.Caller = adapterconfig.ServiceAccountCaller(f.ns+"/other", string(sa.UID))
	if status, resp3 := f.fetch(f.gwToken, other); status != http.StatusConflict || resp3.ConnectURL == resp.ConnectURL {
		t.Fatalf("another caller: want its own link, got %d %+v", status, resp3)
	}
}

func TestCallerCredentials_ConnectLinkExpires(t *testing.T) {
	f := newFixture(t)
	_, resp := f.fetch(f.gwToken, f.request())
	f.advance(11 * time.Minute)
	if code, page := f.open(resp.ConnectURL); code != http.StatusBadRequest || !strings.Contains(page, "expired") {
		t.Fatalf("want an expired link refused, got %d %s", code, page)
	}
}

// OIDC callers of another identity provider than the import's authorization server
// are refused, saying why: who signs in there cannot be verified.
func TestCallerCredentials_ConnectRefusesOtherGatewaysAndOIDCCallers(t *testing.T) {
	f := newFixture(t)
	if status, _ := f.fetch(f.token("other", adapterconfig.ConnectAudience), f.request()); status != http.StatusForbidden {
		t.Fatalf("a service account no gateway runs as: want 403, got %d", status)
	}
	if status, _ := f.fetch(f.token("gateway", catalog.DefaultAudience), f.request()); status != http.StatusUnauthorized {
		t.Fatalf("a token for another audience: want 401, got %d", status)
	}
	req := f.request()
	req.Caller = adapterconfig.OIDCCaller("https://idp.example", "alice")
	if status, resp := f.fetch(f.gwToken, req); status != http.StatusForbidden || resp.Error != "caller_refused" ||
		!strings.Contains(resp.Message, "cannot verify who signs in at another identity provider") {
		t.Fatalf("an OIDC caller of another identity provider: want 403 caller_refused saying why, got %d %+v", status, resp)
	}
	req = f.request()
	req.Import = f.ns + "/elsewhere"
	if status, _ := f.fetch(f.gwToken, req); status != http.StatusForbidden {
		t.Fatalf("an import the gateway does not serve: want 403, got %d", status)
	}
}

func TestCallerCredentials_ConnectRefreshesOnceForConcurrentFetches(t *testing.T) {
	f := newFixture(t)
	f.connect()
	_, first := f.fetch(f.gwToken, f.request())
	f.expireTokens()
	var wg sync.WaitGroup
	tokens := make([]string, 8)
	for i := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, resp := f.fetch(f.gwToken, f.request())
			if status == http.StatusOK {
				tokens[i] = resp.AccessToken
			}
		}()
	}
	wg.Wait()
	refreshes, _, _ := f.as.counts()
	if refreshes != 1 {
		t.Fatalf("want one refresh for 8 concurrent fetches of an expired token, got %d", refreshes)
	}
	for _, tok := range tokens {
		if tok == "" || tok == first.AccessToken {
			t.Fatalf("every fetch gets the refreshed token: %v", tokens)
		}
	}
	// Refused by the remote: refreshed again at once, with the rotated refresh token.
	req := f.request()
	req.Refused = true
	if status, resp := f.fetch(f.gwToken, req); status != http.StatusOK || resp.AccessToken == tokens[0] {
		t.Fatalf("refused: want a new token, got %d", status)
	}
	if refreshes, _, _ := f.as.counts(); refreshes != 2 {
		t.Fatalf("want a second refresh, got %d", refreshes)
	}
}

func TestCallerCredentials_ConnectRefreshRefusedNeedsReconnect(t *testing.T) {
	f := newFixture(t)
	f.connect()
	f.as.revokeAll()
	f.advance(2 * time.Hour)
	status, resp := f.fetch(f.gwToken, f.request())
	if status != http.StatusConflict || resp.ConnectURL == "" || !strings.Contains(resp.Message, "again") {
		t.Fatalf("want 409 asking to connect again, got %d %+v", status, resp)
	}
	counts, _ := f.counter.Count(context.Background(), f.imp)
	if counts.ReconnectNeeded != 1 || counts.Connected != 0 || counts.FailedRefreshes < 1 {
		t.Fatalf("counts: %+v", counts)
	}
	if code, _ := f.open(resp.ConnectURL); code != http.StatusOK {
		t.Fatalf("reconnect: %d", code)
	}
	if status, _ := f.fetch(f.gwToken, f.request()); status != http.StatusOK {
		t.Fatalf("after reconnecting: want 200, got %d", status)
	}
}

func TestCallerCredentials_ConnectDisconnectRevokes(t *testing.T) {
	f := newFixture(t)
	f.connect()
	_, issued, _ := f.as.counts()
	r, _ := http.NewRequest(http.MethodPost, f.srv.URL+adapterconfig.ConnectDisconnect+"?import="+f.ns+"/whoami", nil)
	r.Header.Set("Authorization", "Bearer "+f.token("agent", catalog.DefaultAudience))
	resp, err := f.srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]int
	_ = json.NewDecoder(resp.Body).Decode(&out)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || out["disconnected"] != 1 || out["revoked"] != 1 {
		t.Fatalf("disconnect: %d %v", resp.StatusCode, out)
	}
	if _, _, revoked := f.as.counts(); len(revoked) != 1 || revoked[0] != issued[1] {
		t.Fatalf("want the refresh token revoked at the authorization server, got %v", revoked)
	}
	if len(f.accountSecrets()) != 0 {
		t.Fatal("the account is still kept")
	}
	if status, _ := f.fetch(f.gwToken, f.request()); status != http.StatusConflict {
		t.Fatalf("after disconnecting: want 409, got %d", status)
	}
}

func TestCallerCredentials_ConnectForgetsDeletedServiceAccounts(t *testing.T) {
	f := newFixture(t)
	f.connect()
	if err := f.sweeper.Sweep(context.Background()); err != nil || len(f.accountSecrets()) != 1 {
		t.Fatalf("a sweep keeps a live caller's account: %v", err)
	}
	if err := k8s.Delete(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "agent"}}); err != nil {
		t.Fatal(err)
	}
	if status, _ := f.fetch(f.gwToken, f.request()); status != http.StatusForbidden {
		t.Fatalf("a deleted caller: want 403, got %d", status)
	}
	if err := f.sweeper.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.accountSecrets()); n != 0 {
		t.Fatalf("want the deleted caller's account forgotten, %d left", n)
	}
}

func TestCallerCredentials_ConnectKeyMissingMeansReconnect(t *testing.T) {
	f := newFixture(t)
	f.connect()
	if err := k8s.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "connect-keys"}}); err != nil {
		t.Fatal(err)
	}
	counts, err := f.counter.Count(context.Background(), f.imp)
	if err != nil || counts.ReconnectNeeded != 1 || counts.Connected != 0 {
		t.Fatalf("counts without the key Secret: %+v %v", counts, err)
	}
	if state, _ := (connect.States{Store: f.store}).State(context.Background(), f.ns+"/whoami", f.caller()); state != catalog.ConnectStateReconnectNeeded {
		t.Fatalf("the catalog's state without the key Secret: %q", state)
	}
	if status, resp := f.fetch(f.gwToken, f.request()); status != http.StatusServiceUnavailable || resp.Error != "connect_unavailable" {
		t.Fatalf("want 503 connect_unavailable, got %d %+v", status, resp)
	}
	if err := f.sweeper.Sweep(context.Background()); err != nil {
		t.Fatalf("a sweep without keys: %v", err)
	}
}

func TestCallerCredentials_ConnectRotationReencrypts(t *testing.T) {
	f := newFixture(t)
	f.connect()
	ctx := context.Background()
	keys := &corev1.Secret{}
	_ = k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "connect-keys"}, keys)
	newKey := make([]byte, 32)
	_, _ = rand.Read(newKey)
	keys.Data["2026-02"] = newKey
	if err := k8s.Update(ctx, keys); err != nil {
		t.Fatal(err)
	}
	if err := f.sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.accountSecrets()[0].Labels[connect.LabelKey]; got != "2026-02" {
		t.Fatalf("want the account re-encrypted with the newest key, got %q", got)
	}
	delete(keys.Data, "2026-01")
	if err := k8s.Update(ctx, keys); err != nil {
		t.Fatal(err)
	}
	if status, _ := f.fetch(f.gwToken, f.request()); status != http.StatusOK {
		t.Fatalf("after the old key is removed: want 200, got %d", status)
	}
}

func TestCallerCredentials_ConnectKeepsNoTokenInLogsMetricsOrLabels(t *testing.T) {
	f := newFixture(t)
	f.connect()
	f.expireTokens()
	_, resp := f.fetch(f.gwToken, f.request())
	_, _ = f.counter.Count(context.Background(), f.imp)
	_, issued, _ := f.as.counts()
	clientSecret := &corev1.Secret{}
	_ = k8s.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: "client"}, clientSecret)
	secrets := append(issued, resp.AccessToken, f.gwToken, string(clientSecret.Data["secret"]))

	var haystack strings.Builder
	f.logsMu.Lock()
	haystack.WriteString(f.logs.String())
	f.logsMu.Unlock()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		_, _ = expfmt.MetricFamilyToText(&haystack, mf)
	}
	for _, s := range f.accountSecrets() {
		fmt.Fprintf(&haystack, "%s %v %v %s\n", s.Name, s.Labels, s.Annotations, s.Data["sealed"])
	}
	events := &corev1.EventList{}
	_ = k8s.List(context.Background(), events, client.InNamespace(f.ns))
	for _, e := range events.Items {
		haystack.WriteString(e.Message)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(haystack.String(), s) {
			t.Fatalf("a token or secret shows in the logs, metrics, labels or Secret data")
		}
	}
	if !strings.Contains(haystack.String(), "cantus_connect_accounts") {
		t.Fatal("the metrics were not gathered")
	}
}

// Without a pre-registered client, at an authorization server that offers dynamic
// client registration and does not take Client ID Metadata Documents, the operator
// registers its client once, keeps it encrypted, and every caller connects with it.
func TestCallerCredentials_ConnectRegistersItsClientOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.handler.BaseURL = f.srv.URL
	f.imp.Spec.CallerCredentials.Connect.Client = nil
	if err := k8s.Update(ctx, f.imp); err != nil {
		t.Fatal(err)
	}
	f.imp.Status.CallerCredentials.Client = cantusv1alpha1.ConnectClientDynamicRegistration
	f.imp.Status.CallerCredentials.Endpoints.Registration = f.as.srv.URL + "/register"
	if err := k8s.Status().Update(ctx, f.imp); err != nil {
		t.Fatal(err)
	}
	f.connect()
	if status, _ := f.fetch(f.gwToken, f.request()); status != http.StatusOK {
		t.Fatalf("after connecting with the registered client: %d", status)
	}
	var sa corev1.ServiceAccount
	_ = k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "other"}, &sa)
	other := f.request()
	other.Caller = adapterconfig.ServiceAccountCaller(f.ns+"/other", string(sa.UID))
	_, resp := f.fetch(f.gwToken, other)
	if code, _ := f.open(resp.ConnectURL); code != http.StatusOK {
		t.Fatalf("the second caller's connect: %d", code)
	}
	if n := f.as.registrations(f.srv.URL + adapterconfig.ConnectCallback); n != 1 {
		t.Fatalf("want one registration for the operator's callback, got %d", n)
	}
	list := &corev1.SecretList{}
	_ = k8s.List(ctx, list, client.InNamespace(f.ns), client.MatchingLabels{connect.LabelAccount: "client"})
	if len(list.Items) != 1 {
		t.Fatalf("want the registered client kept in one Secret, got %d", len(list.Items))
	}
}

// An import deleted, or no longer in connect mode, leaves no account behind.
func TestCallerCredentials_ConnectForgetsAccountsOfImportsGone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.connect()
	if err := f.sweeper.Sweep(ctx); err != nil || len(f.accountSecrets()) != 1 {
		t.Fatalf("a sweep keeps the account of an import in connect mode: %v", err)
	}
	if err := k8s.Delete(ctx, f.imp); err != nil {
		t.Fatal(err)
	}
	if err := f.sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(f.accountSecrets()); n != 0 {
		t.Fatalf("want the deleted import's account forgotten, %d left", n)
	}
}
