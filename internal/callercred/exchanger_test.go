package callercred

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
)

const (
	clusterIssuer = "https://kubernetes.default.svc"
	gatewayAud    = "library.skillserver.cantus.dev"
	remoteURL     = "https://remote.example/mcp"
	remoteAud     = "remote-api"
	clientID      = "gateway"
	clientSecret  = "s3cret-of-the-gateway-client"
)

// fixture is a token service trusting a stand-in cluster issuer, and an exchange
// config for it authenticating with a client secret.
type fixture struct {
	ts      *tokenservice.Server
	cluster *tokenservice.TrustedIssuer
	dir     string
	cfg     adapterconfig.TokenExchange
}

func newFixture(t testing.TB, o tokenservice.Options) *fixture {
	t.Helper()
	cluster := tokenservice.NewTrustedIssuer(t, clusterIssuer)
	o.Trusted = append(o.Trusted, cluster)
	o.Clients = append(o.Clients, tokenservice.Client{ID: clientID, Secret: clientSecret})
	f := &fixture{ts: tokenservice.Start(t, o), cluster: cluster, dir: t.TempDir()}
	f.cfg = adapterconfig.TokenExchange{
		TokenEndpoint:    f.ts.TokenEndpoint(),
		Resource:         remoteURL,
		Audience:         remoteAud,
		Scopes:           []string{"read", "write"},
		ClientID:         clientID,
		ClientSecretFile: f.write(t, "client-secret", clientSecret),
	}
	return f
}

func (f *fixture) write(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(f.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// caller is a service-account caller: its identity and its inbound token.
type caller struct {
	identity, token, sub string
}

func (f *fixture) caller(t testing.TB, name string) caller {
	t.Helper()
	uid := "uid-" + name
	return caller{
		identity: adapterconfig.ServiceAccountCaller("agents/"+name, uid),
		token:    f.cluster.ServiceAccountToken(t, "agents", name, uid, gatewayAud),
		sub:      "system:serviceaccount:agents:" + name,
	}
}

func (f *fixture) exchanger(t testing.TB, o Options) *Exchanger {
	t.Helper()
	cfg := f.cfg
	e, err := NewExchanger(&cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func token(t testing.TB, e *Exchanger, c caller) string {
	t.Helper()
	tok, err := e.Token(context.Background(), c.identity, c.token)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// claimsOf verifies an issued token with the token service's keys.
type issuedClaims struct {
	jwt.Claims
	Act *struct {
		Sub string `json:"sub"`
	} `json:"act"`
}

func (f *fixture) claimsOf(t testing.TB, raw string) issuedClaims {
	t.Helper()
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	var c issuedClaims
	if err := tok.Claims(f.ts.Keys().Keys[0].Key, &c); err != nil {
		t.Fatalf("the issued token does not verify with the token service's key: %v", err)
	}
	return c
}

func TestCallerCredentials_TwoCallersGetTokensOfTheirOwn(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	e := f.exchanger(t, Options{})
	alice, bob := f.caller(t, "alice"), f.caller(t, "bob")

	ta, tb := token(t, e, alice), token(t, e, bob)
	if ta == tb {
		t.Fatal("two callers got the same token")
	}
	ca, cb := f.claimsOf(t, ta), f.claimsOf(t, tb)
	if ca.Subject != alice.sub || cb.Subject != bob.sub {
		t.Fatalf("subjects = %q, %q; want %q, %q", ca.Subject, cb.Subject, alice.sub, bob.sub)
	}
	if ca.Issuer != f.ts.URL() || !ca.Audience.Contains(remoteAud) || ca.Audience.Contains(gatewayAud) {
		t.Fatalf("iss = %q, aud = %v; want the token service and only the remote's audience", ca.Issuer, ca.Audience)
	}
	last := f.ts.LastRequest()
	if strings.Join(last.Resource, ",") != remoteURL || strings.Join(last.Audience, ",") != remoteAud || strings.Join(last.Scopes, " ") != "read write" {
		t.Fatalf("the token service got resource %v, audience %v, scopes %v", last.Resource, last.Audience, last.Scopes)
	}
	if ta == alice.token || tb == bob.token {
		t.Fatal("a caller's own token was passed through")
	}
}

func TestCallerCredentials_OneExchangePerCallerPerLifetime(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	e := f.exchanger(t, Options{})
	callers := []caller{f.caller(t, "alice"), f.caller(t, "bob")}

	var wg sync.WaitGroup
	tokens := make([][]string, len(callers))
	for i := range callers {
		tokens[i] = make([]string, 50)
		for j := range 50 {
			wg.Go(func() {
				tok, err := e.Token(context.Background(), callers[i].identity, callers[i].token)
				if err != nil {
					t.Error(err)
				}
				tokens[i][j] = tok
			})
		}
	}
	wg.Wait()
	for i, c := range callers {
		if n := f.ts.Exchanges(c.sub); n != 1 {
			t.Errorf("%s: %d exchanges at the token service for 50 concurrent calls; want 1", c.sub, n)
		}
		for _, tok := range tokens[i] {
			if tok != tokens[i][0] {
				t.Fatalf("%s got different tokens", c.sub)
			}
		}
	}
	// Later calls are served from the cache.
	for range 10 {
		token(t, e, callers[0])
	}
	if n := f.ts.TotalExchanges(); n != 2 {
		t.Fatalf("%d exchanges in all; want 2", n)
	}
	if s := e.Stats(); s.Exchanges != 2 || s.Hits < 10 || s.Failures != 0 {
		t.Fatalf("stats = %+v", s)
	}
	if e.Len() != 2 {
		t.Fatalf("Len = %d; want 2", e.Len())
	}
}

func TestCallerCredentials_ExpiredTokenIsReplaced(t *testing.T) {
	f := newFixture(t, tokenservice.Options{TokenLifetime: 2 * time.Second})
	e := f.exchanger(t, Options{})
	alice := f.caller(t, "alice")

	first := token(t, e, alice)
	if again := token(t, e, alice); again != first {
		t.Fatal("a fresh token was not reused")
	}
	exp := f.claimsOf(t, first).Expiry.Time()
	// Waits out the token's real lifetime: the exchanger judges expiry by the clock.
	time.Sleep(time.Until(exp) + 100*time.Millisecond)
	second := token(t, e, alice)
	if second == first {
		t.Fatal("an expired token was reused")
	}
	if n := f.ts.Exchanges(alice.sub); n != 2 {
		t.Fatalf("%d exchanges; want 2", n)
	}
}

func TestCallerCredentials_TokenIsReplacedThirtySecondsBeforeExpiry(t *testing.T) {
	f := newFixture(t, tokenservice.Options{TokenLifetime: 5 * time.Minute})
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	e := f.exchanger(t, Options{Now: clock})
	alice := f.caller(t, "alice")

	first := token(t, e, alice)
	advance(4*time.Minute + 20*time.Second)
	if token(t, e, alice) != first {
		t.Fatal("replaced more than 30 s before expiry")
	}
	advance(11 * time.Second)
	if token(t, e, alice) == first {
		t.Fatal("still used within 30 s of expiry")
	}
}

func TestCallerCredentials_MaxCacheTTLBoundsReuse(t *testing.T) {
	f := newFixture(t, tokenservice.Options{TokenLifetime: time.Hour})
	f.cfg.MaxCacheTTL = adapterconfig.Duration{Duration: time.Minute}
	now := time.Now()
	e := f.exchanger(t, Options{Now: func() time.Time { return now }})
	alice := f.caller(t, "alice")
	first := token(t, e, alice)
	now = now.Add(time.Minute + time.Second)
	if token(t, e, alice) == first {
		t.Fatal("reused beyond maxCacheTTL")
	}
}

func TestCallerCredentials_ForgetDropsTheCallersToken(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	cache, err := NewCache(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := f.exchanger(t, Options{Cache: cache})
	alice, bob := f.caller(t, "alice"), f.caller(t, "bob")
	first := token(t, e, alice)
	bobs := token(t, e, bob)

	e.Forget(alice.identity)
	if e.Len() != 1 {
		t.Fatalf("Len = %d after Forget; want 1", e.Len())
	}
	if token(t, e, alice) == first || f.ts.Exchanges(alice.sub) != 2 {
		t.Fatal("a forgotten caller's token was reused")
	}
	if token(t, e, bob) != bobs || f.ts.Exchanges(bob.sub) != 1 {
		t.Fatal("forgetting one caller dropped another's token")
	}
	if n := cache.ForgetCaller(bob.identity); n != 1 || cache.Len() != 1 {
		t.Fatalf("ForgetCaller dropped %d, left %d", n, cache.Len())
	}
}

func TestCallerCredentials_ClientAuthentication(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		public any
		pem    []byte
	}{
		"private_key_jwt RSA PKCS #1": {&rsaKey.PublicKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})},
		"private_key_jwt RSA PKCS #8": {&rsaKey.PublicKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})},
		"private_key_jwt EC SEC 1":    {&ecKey.PublicKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER})},
		"client_secret_basic":         {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tokenservice.Options{})
			if tc.public != nil {
				f.ts.SetClient(tokenservice.Client{ID: "keyed", PublicKey: tc.public})
				f.cfg.ClientID, f.cfg.ClientSecretFile = "keyed", ""
				f.cfg.PrivateKeyFile = f.write(t, "key.pem", string(tc.pem))
				f.cfg.Issuer = f.ts.URL()
			}
			e := f.exchanger(t, Options{})
			alice := f.caller(t, "alice")
			if c := f.claimsOf(t, token(t, e, alice)); c.Subject != alice.sub {
				t.Fatalf("sub = %q", c.Subject)
			}
			if got := f.ts.LastRequest().ClientID; got != f.cfg.ClientID {
				t.Fatalf("the token service saw client %q", got)
			}
		})
	}
}

func TestCallerCredentials_PrivateKeyJWTWithAnotherKeyIsRefused(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	registered, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalECPrivateKey(other)
	f.ts.SetClient(tokenservice.Client{ID: "keyed", PublicKey: &registered.PublicKey})
	f.cfg.ClientID, f.cfg.ClientSecretFile, f.cfg.Issuer = "keyed", "", f.ts.URL()
	f.cfg.PrivateKeyFile = f.write(t, "key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})))
	e := f.exchanger(t, Options{})
	_, err := e.Token(context.Background(), f.caller(t, "alice").identity, f.caller(t, "alice").token)
	var xe *ExchangeError
	if !errors.As(err, &xe) || xe.Code == "" {
		t.Fatalf("err = %v; want an OAuth error", err)
	}
}

func TestCallerCredentials_PrivateKeyJWTWithAKeyClient(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	c, key := tokenservice.NewKeyClient(t, "keyed")
	f.ts.SetClient(c)
	f.cfg.ClientID, f.cfg.ClientSecretFile, f.cfg.Issuer = c.ID, "", f.ts.URL()
	f.cfg.PrivateKeyFile = f.write(t, "key.pem", string(key))
	alice := f.caller(t, "alice")
	if got := f.claimsOf(t, token(t, f.exchanger(t, Options{}), alice)).Subject; got != alice.sub {
		t.Fatalf("sub = %q", got)
	}

	// Without the issuer, the assertion's audience is the token endpoint, which
	// zitadel refuses: the error says so precisely.
	f.cfg.Issuer = ""
	_, err := f.exchanger(t, Options{}).Token(context.Background(), alice.identity, alice.token)
	var xe *ExchangeError
	if !errors.As(err, &xe) || xe.Code == "" {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}

func TestCallerCredentials_ActorTokenGivesAct(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	gatewaySA := f.cluster.ServiceAccountToken(t, "library", "gateway", "uid-gw", "tokens.example")
	f.cfg.ActorTokenFile = f.write(t, "actor-token", gatewaySA+"\n")
	e := f.exchanger(t, Options{})
	alice := f.caller(t, "alice")

	c := f.claimsOf(t, token(t, e, alice))
	if c.Subject != alice.sub || c.Act == nil || c.Act.Sub != "system:serviceaccount:library:gateway" {
		t.Fatalf("sub = %q, act = %+v; want the caller acted for by the gateway", c.Subject, c.Act)
	}
	if got := f.ts.LastRequest().Actor; got != "system:serviceaccount:library:gateway" {
		t.Fatalf("the token service saw actor %q", got)
	}
}

func TestCallerCredentials_RotatedClientSecretIsPickedUp(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	e := f.exchanger(t, Options{})
	alice, bob := f.caller(t, "alice"), f.caller(t, "bob")
	token(t, e, alice)

	const rotated = "the-rotated-secret"
	f.ts.SetClient(tokenservice.Client{ID: clientID, Secret: rotated})
	if _, err := e.Token(context.Background(), bob.identity, bob.token); err == nil {
		t.Fatal("the old secret still works after rotation at the token service")
	}
	f.write(t, "client-secret", rotated)
	if c := f.claimsOf(t, token(t, e, bob)); c.Subject != bob.sub {
		t.Fatalf("sub = %q", c.Subject)
	}
}

func TestCallerCredentials_WrongClientSecretIsAPreciseError(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	const wrong = "not-the-secret-at-all"
	f.cfg.ClientSecretFile = f.write(t, "wrong-secret", wrong)
	e := f.exchanger(t, Options{})
	alice := f.caller(t, "alice")

	_, err := e.Token(context.Background(), alice.identity, alice.token)
	if err == nil {
		t.Fatal("a wrong client secret was accepted")
	}
	text := err.Error()
	host := strings.TrimPrefix(f.ts.URL(), "http://")
	if !strings.Contains(text, host) || !strings.Contains(text, "invalid_client") {
		t.Fatalf("error %q does not name the token endpoint's host and the OAuth error", text)
	}
	for _, secret := range []string{wrong, clientSecret, alice.token} {
		if strings.Contains(text, secret) {
			t.Fatalf("error %q carries a secret", text)
		}
	}
	var xe *ExchangeError
	if !errors.As(err, &xe) || xe.Code != "invalid_client" || xe.Host != host {
		t.Fatalf("err = %#v", err)
	}
	if s := e.Stats(); s.Failures != 1 || e.Len() != 0 {
		t.Fatalf("stats = %+v, Len = %d", s, e.Len())
	}
}

func TestCallerCredentials_UntrustedSubjectTokenIsRefused(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	e := f.exchanger(t, Options{})
	stranger := tokenservice.NewTrustedIssuer(t, "https://elsewhere.example")
	tok := stranger.ServiceAccountToken(t, "agents", "alice", "u", gatewayAud)
	_, err := e.Token(context.Background(), "serviceaccount:agents/alice#u", tok)
	var xe *ExchangeError
	if !errors.As(err, &xe) || xe.Code != "invalid_request" || strings.Contains(err.Error(), tok) {
		t.Fatalf("err = %v", err)
	}
}

func TestCallerCredentials_ExchangeKeepingTheCallersAudienceIsRefused(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	f.cfg.Audience = gatewayAud // the remote would get a token the gateway accepts
	e := f.exchanger(t, Options{})
	alice := f.caller(t, "alice")
	_, err := e.Token(context.Background(), alice.identity, alice.token)
	if !errors.Is(err, ErrPassThrough) {
		t.Fatalf("err = %v; want ErrPassThrough", err)
	}
	if e.Len() != 0 {
		t.Fatal("a refused token was cached")
	}
}

// answering is a token endpoint that answers every request with status and body: for
// the answers a real token service does not give (the caller's own token back, a
// body that quotes the token).
func answering(t *testing.T, status int, body func(r *http.Request) string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, body(r))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/token"
}

func TestCallerCredentials_AnswerWithTheCallersOwnTokenIsRefused(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	f.cfg.TokenEndpoint = answering(t, http.StatusOK, func(r *http.Request) string {
		return fmt.Sprintf(`{"access_token":%q,"issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":300}`, r.PostForm.Get("subject_token"))
	})
	e := f.exchanger(t, Options{})
	alice := f.caller(t, "alice")
	_, err := e.Token(context.Background(), alice.identity, alice.token)
	if !errors.Is(err, ErrPassThrough) || strings.Contains(err.Error(), alice.token) {
		t.Fatalf("err = %v; want ErrPassThrough without the token", err)
	}
}

func TestCallerCredentials_ErrorsNeverQuoteTheAnswer(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	alice := f.caller(t, "alice")
	cases := map[string]struct {
		status int
		body   string
	}{
		"a 502 quoting the token":          {http.StatusBadGateway, "upstream said " + alice.token},
		"an unreadable 200 with a token":   {http.StatusOK, `{"access_token":"issued-secret-token","expires_in":"soon"}`},
		"an OAuth error echoing the token": {http.StatusBadRequest, fmt.Sprintf(`{"error":"invalid_grant","error_description":"bad token %s"}`, alice.token)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f.cfg.TokenEndpoint = answering(t, tc.status, func(*http.Request) string { return tc.body })
			e := f.exchanger(t, Options{})
			_, err := e.Token(context.Background(), alice.identity, alice.token)
			if err == nil {
				t.Fatal("no error")
			}
			for _, secret := range []string{alice.token, "issued-secret-token", clientSecret} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q quotes a credential", err)
				}
			}
			t.Log(err)
		})
	}
}

func TestCallerCredentials_PinnedAddressAndCAFile(t *testing.T) {
	f := newFixture(t, tokenservice.Options{TLS: true})
	// The test certificate names example.com; the name resolves nowhere, so only the
	// pinned address can reach the service.
	f.cfg.TokenEndpoint = fmt.Sprintf("https://example.com:%d/oauth/token", f.ts.Addr().Port)
	f.cfg.Addresses = []string{"127.0.0.1"}
	f.cfg.CAFile = f.ts.CAFile(t)
	e := f.exchanger(t, Options{})
	alice := f.caller(t, "alice")
	if c := f.claimsOf(t, token(t, e, alice)); c.Subject != alice.sub {
		t.Fatalf("sub = %q", c.Subject)
	}

	f.cfg.CAFile = ""
	e = f.exchanger(t, Options{})
	if _, err := e.Token(context.Background(), alice.identity, alice.token); err == nil {
		t.Fatal("a certificate outside the system roots was trusted without the CA file")
	}
}

func TestCallerCredentials_ConfigIsChecked(t *testing.T) {
	base := adapterconfig.TokenExchange{TokenEndpoint: "https://tokens.example/token", Resource: remoteURL, ClientID: "c", ClientSecretFile: "/s"}
	cases := map[string]func(*adapterconfig.TokenExchange){
		"plain http off loopback": func(c *adapterconfig.TokenExchange) { c.TokenEndpoint = "http://tokens.example/token" },
		"no resource":             func(c *adapterconfig.TokenExchange) { c.Resource = "" },
		"no client":               func(c *adapterconfig.TokenExchange) { c.ClientID = "" },
		"two client credentials":  func(c *adapterconfig.TokenExchange) { c.PrivateKeyFile = "/k" },
		"no client credential":    func(c *adapterconfig.TokenExchange) { c.ClientSecretFile = "" },
		"a bad pinned address":    func(c *adapterconfig.TokenExchange) { c.Addresses = []string{"tokens.example"} },
	}
	for name, mutate := range cases {
		cfg := base
		mutate(&cfg)
		if _, err := NewExchanger(&cfg, Options{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewExchanger(&base, Options{}); err != nil {
		t.Fatal(err)
	}
	e, _ := NewExchanger(&base, Options{})
	if _, err := e.Token(context.Background(), "", "tok"); err == nil {
		t.Error("a caller without identity got a token")
	}
}

func TestCallerCredentials_MetricsNameNoCaller(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	m := NewMetrics()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collectors()...)
	e := f.exchanger(t, Options{Metrics: m, Name: "library/remote"})
	alice := f.caller(t, "alice")
	tok := token(t, e, alice)
	token(t, e, alice)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for _, mf := range families {
		for _, metric := range mf.GetMetric() {
			var labels []string
			for _, l := range metric.GetLabel() {
				for _, secret := range []string{alice.identity, alice.token, alice.sub, tok, clientSecret} {
					if strings.Contains(l.GetValue(), secret) {
						t.Fatalf("label %s=%q carries a caller or credential", l.GetName(), l.GetValue())
					}
				}
				labels = append(labels, l.GetValue())
			}
			v := metric.GetCounter().GetValue() + metric.GetGauge().GetValue()
			values[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	want := map[string]float64{
		"cantus_adapter_caller_token_lookups_total{library/remote,hit}":         1,
		"cantus_adapter_caller_token_lookups_total{library/remote,miss}":        1,
		"cantus_adapter_caller_token_exchanges_total{succeeded,library/remote}": 1,
		"cantus_adapter_caller_tokens_cached{}":                                 1,
	}
	for k, v := range want {
		if values[k] != v {
			t.Errorf("%s = %v; want %v (all: %v)", k, values[k], v, values)
		}
	}
}

func TestCallerCredentials_ALeavingCallDoesNotCancelTheSharedExchange(t *testing.T) {
	f := newFixture(t, tokenservice.Options{})
	release := make(chan struct{})
	var asked atomic.Int32
	upstream := f.ts.TokenEndpoint()
	// A slow hop in front of the real token service: the exchange is in flight while
	// the first call leaves.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		<-release
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, upstream, r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(slow.Close)
	f.cfg.TokenEndpoint = slow.URL + "/oauth/token"
	e := f.exchanger(t, Options{})
	alice := f.caller(t, "alice")

	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := e.Token(ctx, alice.identity, alice.token); first <- err }()
	testkit.EventuallyTrue(t, 10*time.Second, "the first exchange to reach the token endpoint", func() bool { return asked.Load() > 0 })
	second := make(chan string, 1)
	go func() {
		tok, err := e.Token(context.Background(), alice.identity, alice.token)
		if err != nil {
			t.Error(err)
		}
		second <- tok
	}()
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the leaving call got %v", err)
	}
	close(release)
	if tok := <-second; tok == "" || asked.Load() != 1 || f.ts.Exchanges(alice.sub) != 1 {
		t.Fatalf("the waiting call got %q after %d requests", tok, asked.Load())
	}
}
