package callercred

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

const (
	gatewayConnectToken = "gateway-sa-token-0451"
	connectURLOf        = "https://operator.example/connect/v1/start?state=st-"
)

// fakeOperator stands in for the operator's token endpoint for gateways: it answers a
// token for connected callers and 409 connect_required for the others, and records
// every request.
type fakeOperator struct {
	srv *httptest.Server

	mu        sync.Mutex
	connected map[string]string // caller → access token
	expiresIn int64
	status    int           // when set, answered to every request
	echo      string        // when set, the message of a non-200 answer
	hold      chan struct{} // when set, every answer waits for it to close
	requests  []recordedConnect
}

type recordedConnect struct {
	adapterconfig.ConnectTokenRequest
	Authorization string
}

func startFakeOperator(t *testing.T) *fakeOperator {
	t.Helper()
	f := &fakeOperator{connected: map[string]string{}, expiresIn: 300}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOperator) serve(w http.ResponseWriter, r *http.Request) {
	var req adapterconfig.ConnectTokenRequest
	if r.Method != http.MethodPost || r.URL.Path != adapterconfig.ConnectTokenPath || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, recordedConnect{ConnectTokenRequest: req, Authorization: r.Header.Get("Authorization")})
	status, token, expires, echo, hold := f.status, f.connected[req.Caller], f.expiresIn, f.echo, f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case status != 0:
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(adapterconfig.ConnectTokenResponse{Error: "refused", Message: echo})
	case token == "":
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(adapterconfig.ConnectTokenResponse{Error: adapterconfig.ConnectRequiredErr,
			ConnectURL: connectURLOf + req.Caller, ExpiresIn: 600, Message: "connect your account at the remote"})
	default:
		_ = json.NewEncoder(w).Encode(adapterconfig.ConnectTokenResponse{AccessToken: token, ExpiresIn: expires})
	}
}

func (f *fakeOperator) connect(caller, token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connected[caller] = token
}

func (f *fakeOperator) recorded() []recordedConnect {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedConnect(nil), f.requests...)
}

// caFile writes the fake's certificate as a CA bundle.
func (f *fakeOperator) caFile(t *testing.T) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "ca.crt")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	if err := os.WriteFile(name, block, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

func writeToken(t *testing.T, name, value string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

type connectFixture struct {
	op        *fakeOperator
	c         *Connector
	tokenFile string
	clock     *fakeClock
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newConnectFixture(t *testing.T) *connectFixture {
	t.Helper()
	f := &connectFixture{op: startFakeOperator(t), tokenFile: filepath.Join(t.TempDir(), "token"), clock: &fakeClock{now: time.Unix(1_800_000_000, 0)}}
	writeToken(t, f.tokenFile, gatewayConnectToken)
	c, err := NewConnector("team/upstream", &adapterconfig.Connect{
		Endpoint: f.op.srv.URL + adapterconfig.ConnectTokenPath, CAFile: f.op.caFile(t), TokenFile: f.tokenFile,
	}, Options{Now: f.clock.Now, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f.c = c
	return f
}

// Each caller's token is fetched once for as long as it lives, with the gateway's own
// token as the bearer and the import and caller in the request; the next fetch comes
// when the cached token is 30 s from its expiry.
func TestCallerCredentials_ConnectFetchesOncePerCallerAndLifetime(t *testing.T) {
	f := newConnectFixture(t)
	f.op.connect("serviceaccount:team/ada#u1", "ada-access-1")
	f.op.connect("serviceaccount:team/bo#u2", "bo-access-1")
	ctx := context.Background()
	for range 3 {
		for caller, want := range map[string]string{"serviceaccount:team/ada#u1": "ada-access-1", "serviceaccount:team/bo#u2": "bo-access-1"} {
			if got, err := f.c.Token(ctx, caller); err != nil || got != want {
				t.Fatalf("Token(%s) = %q, %v; want %q", caller, got, err, want)
			}
		}
	}
	got := f.op.recorded()
	if len(got) != 2 {
		t.Fatalf("the operator was asked %d times for 6 lookups of 2 callers, want 2", len(got))
	}
	for _, r := range got {
		if r.Authorization != "Bearer "+gatewayConnectToken || r.Import != "team/upstream" || r.Refused {
			t.Errorf("request %+v: want the gateway's token as bearer, import team/upstream, not refused", r)
		}
	}
	if s := f.c.Stats(); s.Hits != 4 || s.Misses != 2 || s.Exchanges != 2 {
		t.Errorf("stats %+v, want 4 hits, 2 misses, 2 fetches", s)
	}

	f.clock.advance(300*time.Second - DefaultRefreshBefore - time.Second)
	if _, err := f.c.Token(ctx, "serviceaccount:team/ada#u1"); err != nil || len(f.op.recorded()) != 2 {
		t.Errorf("a token 31 s from expiry was fetched again (%d requests, %v)", len(f.op.recorded()), err)
	}
	f.clock.advance(2 * time.Second)
	if _, err := f.c.Token(ctx, "serviceaccount:team/ada#u1"); err != nil || len(f.op.recorded()) != 3 {
		t.Errorf("a token 29 s from expiry was not fetched again (%d requests, %v)", len(f.op.recorded()), err)
	}
}

// A token of under a minute is reused for half its lifetime; none is reused past the
// connect cache's bound.
func TestCallerCredentials_ConnectCacheLifetimeBounds(t *testing.T) {
	f := newConnectFixture(t)
	f.op.connect("c", "short")
	f.op.expiresIn = 40
	ctx := context.Background()
	if _, err := f.c.Token(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	f.clock.advance(19 * time.Second)
	_, _ = f.c.Token(ctx, "c")
	if n := len(f.op.recorded()); n != 1 {
		t.Errorf("a 40 s token was fetched again after 19 s (%d requests)", n)
	}
	f.clock.advance(2 * time.Second)
	_, _ = f.c.Token(ctx, "c")
	if n := len(f.op.recorded()); n != 2 {
		t.Errorf("a 40 s token was not fetched again after 21 s (%d requests)", n)
	}

	f.op.expiresIn = 3600
	f.clock.advance(time.Hour)
	_, _ = f.c.Token(ctx, "c")
	f.clock.advance(DefaultConnectMaxCacheTTL + time.Second)
	_, _ = f.c.Token(ctx, "c")
	if n := len(f.op.recorded()); n != 4 {
		t.Errorf("an hour's token was reused past %s (%d requests, want 4)", DefaultConnectMaxCacheTTL, n)
	}
}

// Forget (the remote refused the token) drops the cached token, and the next fetch
// tells the operator so that it refreshes; the fetch after that does not.
func TestCallerCredentials_ConnectForgetSendsRefused(t *testing.T) {
	f := newConnectFixture(t)
	f.op.connect("c", "tok-1")
	ctx := context.Background()
	_, _ = f.c.Token(ctx, "c")
	f.c.Forget("c")
	f.op.connect("c", "tok-2")
	if got, err := f.c.Token(ctx, "c"); err != nil || got != "tok-2" {
		t.Fatalf("after Forget: %q, %v; want the refreshed tok-2", got, err)
	}
	f.clock.advance(time.Hour)
	_, _ = f.c.Token(ctx, "c")
	got := f.op.recorded()
	if len(got) != 3 || got[0].Refused || !got[1].Refused || got[2].Refused {
		t.Errorf("refused flags of the 3 fetches: %+v, want false, true, false", got)
	}
}

// A caller who has not connected gets ConnectRequired with the operator's URL, its
// expiry and message; the answer is not cached (the next call, once connected, goes
// through), and its text holds neither the URL nor the caller.
func TestCallerCredentials_ConnectRequiredCarriesTheURL(t *testing.T) {
	f := newConnectFixture(t)
	ctx := context.Background()
	_, err := f.c.Token(ctx, "serviceaccount:team/cy#u3")
	var required *ConnectRequired
	if !errors.As(err, &required) {
		t.Fatalf("got %v, want ConnectRequired", err)
	}
	if required.URL != connectURLOf+"serviceaccount:team/cy#u3" || !required.Expires.Equal(f.clock.Now().Add(600*time.Second)) ||
		required.Message == "" || required.Import != "team/upstream" {
		t.Errorf("got %+v, want the operator's URL, expiry in 600 s and message", required)
	}
	if strings.Contains(err.Error(), "https://") || strings.Contains(err.Error(), "team/cy") {
		t.Errorf("the error's text shows the URL or the caller: %q", err.Error())
	}
	f.op.connect("serviceaccount:team/cy#u3", "cy-access")
	if got, err := f.c.Token(ctx, "serviceaccount:team/cy#u3"); err != nil || got != "cy-access" {
		t.Errorf("after connecting: %q, %v; want cy-access", got, err)
	}
	if s := f.c.Stats(); s.Failures != 0 {
		t.Errorf("a caller told to connect counted as a failure: %+v", s)
	}
}

// The gateway's token file is read at every fetch, so a rotated token is sent next.
func TestCallerCredentials_ConnectRereadsTheRotatedTokenFile(t *testing.T) {
	f := newConnectFixture(t)
	f.op.connect("a", "tok-a")
	f.op.connect("b", "tok-b")
	ctx := context.Background()
	_, _ = f.c.Token(ctx, "a")
	writeToken(t, f.tokenFile, "gateway-sa-token-rotated")
	_, _ = f.c.Token(ctx, "b")
	got := f.op.recorded()
	if len(got) != 2 || got[1].Authorization != "Bearer gateway-sa-token-rotated" {
		t.Errorf("after rotation the operator got %+v, want the rotated token", got)
	}
}

// TLS to the operator trusts the CA file only: not the system's roots, nor another CA.
func TestCallerCredentials_ConnectTrustsOnlyItsCAFile(t *testing.T) {
	op := startFakeOperator(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken(t, tokenFile, gatewayConnectToken)
	for name, ca := range map[string]string{"system roots": "", "another CA": otherCA(t)} {
		c, err := NewConnector("team/upstream", &adapterconfig.Connect{Endpoint: op.srv.URL + adapterconfig.ConnectTokenPath, CAFile: ca, TokenFile: tokenFile}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Token(context.Background(), "a")
		var ce *ConnectError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: got %v, want a certificate error", name, err)
		}
	}
	if n := len(op.recorded()); n != 0 {
		t.Errorf("the operator was reached %d times over untrusted TLS", n)
	}
}

// Failures name the operator's host, status and error, never the gateway's token, even
// when the operator echoes it; an unreachable operator is a ConnectError too.
func TestCallerCredentials_ConnectFailuresShowNoSecret(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusInternalServerError} {
		f := newConnectFixture(t)
		f.op.status, f.op.echo = status, "bad token "+gatewayConnectToken
		_, err := f.c.Token(context.Background(), "a")
		var ce *ConnectError
		if !errors.As(err, &ce) || ce.Status != status || ce.Code != "refused" {
			t.Errorf("HTTP %d: got %v, want a ConnectError with the status and code", status, err)
			continue
		}
		if strings.Contains(err.Error(), gatewayConnectToken) || !strings.Contains(err.Error(), "[redacted]") {
			t.Errorf("HTTP %d: the error shows the gateway's token: %q", status, err.Error())
		}
	}
	f := newConnectFixture(t)
	f.op.srv.Close()
	_, err := f.c.Token(context.Background(), "a")
	var ce *ConnectError
	if !errors.As(err, &ce) || strings.Contains(err.Error(), gatewayConnectToken) {
		t.Errorf("unreachable operator: got %v, want a ConnectError without the token", err)
	}
}

// Concurrent misses of one caller make one fetch.
func TestCallerCredentials_ConnectConcurrentMissesFetchOnce(t *testing.T) {
	f := newConnectFixture(t)
	f.op.connect("c", "tok")
	release := make(chan struct{})
	f.op.hold = release
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := f.c.Token(context.Background(), "c"); err != nil || got != "tok" {
				t.Errorf("Token = %q, %v", got, err)
			}
		}()
	}
	// Every goroutine is either waiting on the one flight or finds the cached token.
	close(release)
	wg.Wait()
	if n := len(f.op.recorded()); n != 1 {
		t.Errorf("8 concurrent lookups made %d fetches, want 1", n)
	}
}

// otherCA writes a CA bundle of a self-signed certificate the fake's is not issued by.
func otherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign,
		DNSNames: []string{"example.com"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "other-ca.crt")
	if err := os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}
