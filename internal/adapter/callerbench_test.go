package adapter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
	"github.com/cantus-dev/cantus-operator/test/testenv/whoami"
)

// BenchmarkCallerCredentialsGateway prints what acting as each caller costs a gateway,
// measured in one run on one machine:
//
//   - throughput of tools/call through a gateway whose import exchanges the caller's
//     token (cached) against the same call through a gateway that sends one static
//     header (issue 36's target: ≥ 0.95×), in alternating slices (ABBA);
//   - the first call of a new caller on each (the exchange's cache miss);
//   - the gateway's memory per cached caller with 10,000 callers, each with its
//     exchanged token and its own upstream session.
//
// Both gateways authenticate callers by service-account token and are stateless, so
// that neither keeps inbound sessions; both send the remote a JWT it verifies (the
// static one got by client_credentials), so that the remote does the same work for
// either. The token service and the remote run in a process of their own
// (TestCallerBenchRemoteProcess), so that this process's heap growth is the gateways'
// alone. Run it with `make bench` (or -bench CallerCredentials -benchtime 1x).
func BenchmarkCallerCredentialsGateway(b *testing.B) {
	w := startBenchWorld(b)
	agent := w.cluster.ServiceAccountToken(b, "bench", "agent", "uid-agent", "room")
	exchange, static := w.side(w.exchangeURL, agent), w.side(w.staticURL, agent)
	for _, s := range []benchSide{exchange, static} {
		if err := s.call(); err != nil {
			b.Fatal(err)
		}
	}

	const workers, rounds, slice = 8, 4, 400 * time.Millisecond
	var callsExchange, callsStatic int64
	for r := range rounds {
		order := []*benchSide{&exchange, &static, &static, &exchange}
		if r%2 == 1 {
			order = []*benchSide{&static, &exchange, &exchange, &static}
		}
		for _, s := range order {
			n, err := s.run(workers, slice)
			if err != nil {
				b.Fatal(err)
			}
			if s == &exchange {
				callsExchange += n
			} else {
				callsStatic += n
			}
		}
	}
	seconds := (rounds * 2 * slice).Seconds()
	ratio := float64(callsExchange) / float64(callsStatic)
	fmt.Printf("caller credentials, %d workers: exchanged token (cached) %.0f calls/s, static header %.0f calls/s: %.3f× (target ≥ 0.95×)\n",
		workers, float64(callsExchange)/seconds, float64(callsStatic)/seconds, ratio)
	b.ReportMetric(ratio, "exchange/static")

	const newCallers = 200
	firstExchange, firstStatic := w.firstCalls(b, newCallers, "first")
	fmt.Printf("first call of a new caller (mean of %d): exchange %.2f ms, static %.2f ms: a cache miss costs %.2f ms\n",
		newCallers, ms(firstExchange), ms(firstStatic), ms(firstExchange-firstStatic))
	b.ReportMetric(ms(firstExchange-firstStatic), "miss-ms")

	const callers = 10000
	before := heapAfterGC()
	if _, _, err := w.callEach(b, callers, "many", w.exchangeURL); err != nil {
		b.Fatal(err)
	}
	after := heapAfterGC()
	perCaller := float64(after-before) / callers
	fmt.Printf("memory with %d cached callers (token and upstream session each): %.1f MiB, %.0f bytes per caller\n",
		callers, float64(after-before)/(1<<20), perCaller)
	b.ReportMetric(perCaller, "bytes/caller")
}

// benchWorld is the token service, the remote and the two gateways in front of it.
type benchWorld struct {
	cluster                *tokenservice.TrustedIssuer
	exchangeURL, staticURL string
	http                   *http.Client
}

func startBenchWorld(b *testing.B) *benchWorld {
	b.Helper()
	w := &benchWorld{cluster: tokenservice.NewTrustedIssuer(b, "https://kubernetes.default.svc.cluster.local"),
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 256}}}
	b.Cleanup(w.http.CloseIdleConnections)
	far := startRemoteProcess(b, w.cluster)
	dir := b.TempDir()
	write := func(name, value string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(value), 0o600); err != nil {
			b.Fatal(err)
		}
		return path
	}
	auth := &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{
		Kind: adapterconfig.IssuerServiceAccount, URL: w.cluster.URL, Audiences: []string{"room"}, JWKS: w.cluster.JWKS(b)}}}
	gateway := func(configure func(*adapterconfig.RemoteBackend)) string {
		tool := remoteTool("team.whoami", objectSchema, far.Remote, adapterconfig.TransportStreamableHTTP, whoami.ToolName)
		configure(tool.Remote)
		cfg := configWith(adapterconfig.TransportStreamableHTTP, true, tool)
		cfg.Auth = auth
		srv, err := NewServer(cfg)
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		b.Cleanup(func() { hs.Close(); _ = srv.Close() })
		return hs.URL + adapterconfig.PathMCP
	}
	w.exchangeURL = gateway(func(r *adapterconfig.RemoteBackend) {
		r.CallerCredentials = &adapterconfig.CallerCredentials{Header: "Authorization", ValuePrefix: "Bearer ",
			TokenExchange: &adapterconfig.TokenExchange{TokenEndpoint: far.TokenEndpoint, Resource: far.Remote,
				Audience: remoteAudience, ClientID: "gateway", ClientSecretFile: write("secret", exchangeClientSecret)}}
	})
	w.staticURL = gateway(func(r *adapterconfig.RemoteBackend) {
		r.HeaderFiles = map[string]string{"Authorization": write("static", "Bearer "+far.ServiceToken)}
	})
	return w
}

// remoteProcess is what TestCallerBenchRemoteProcess serves: the token service's
// endpoint, the remote's URL, and a token for the remote got by client_credentials.
type remoteProcess struct {
	TokenEndpoint, Remote, ServiceToken string
}

// envBenchRemote makes TestCallerBenchRemoteProcess serve: it holds the cluster's keys
// (JWKS) that the token service trusts.
const envBenchRemote = "CANTUS_BENCH_REMOTE_JWKS"

// startRemoteProcess runs the token service and the remote in a child process (this
// test binary, running TestCallerBenchRemoteProcess) until the benchmark ends.
func startRemoteProcess(b *testing.B, cluster *tokenservice.TrustedIssuer) remoteProcess {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCallerBenchRemoteProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envBenchRemote+"="+string(cluster.JWKS(b)))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if line, ok := strings.CutPrefix(lines.Text(), "REMOTE "); ok {
			var far remoteProcess
			if err := json.Unmarshal([]byte(line), &far); err != nil {
				b.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return far
		}
	}
	b.Fatalf("the remote process ended without serving: %v", lines.Err())
	return remoteProcess{}
}

// TestCallerBenchRemoteProcess is the child process of BenchmarkCallerCredentialsGateway:
// with envBenchRemote set it serves a token service and a remote, prints where, and
// serves until its standard input closes. Without it, there is nothing to serve.
func TestCallerBenchRemoteProcess(t *testing.T) {
	jwks := os.Getenv(envBenchRemote)
	if jwks == "" {
		t.Skip("the child process of BenchmarkCallerCredentialsGateway; runs only when it starts it")
	}
	cluster := &tokenservice.TrustedIssuer{URL: "https://kubernetes.default.svc.cluster.local"}
	if err := json.Unmarshal([]byte(jwks), &cluster.Keys); err != nil {
		t.Fatal(err)
	}
	ts := tokenservice.Start(t, tokenservice.Options{Trusted: []*tokenservice.TrustedIssuer{cluster}, KeepNoTokens: true,
		TokenLifetime: time.Hour, Clients: []tokenservice.Client{
			{ID: "gateway", Secret: exchangeClientSecret},
			{ID: "service", Secret: "service-secret", ProbeAudience: []string{remoteAudience}},
		}})
	remote := whoami.Start(t, whoami.Options{Issuer: ts.URL(), Keys: ts.Keys(), Audience: remoteAudience,
		Stateless: true, KeepNoCredentials: true})
	cc := clientcredentials.Config{ClientID: "service", ClientSecret: "service-secret", TokenURL: ts.TokenEndpoint(), AuthStyle: oauth2.AuthStyleInHeader}
	token, err := cc.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(remoteProcess{TokenEndpoint: ts.TokenEndpoint(), Remote: remote.URL(), ServiceToken: token.AccessToken})
	fmt.Printf("REMOTE %s\n", line)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// benchSide is one gateway called with one caller's token.
type benchSide struct {
	url, token string
	http       *http.Client
}

func (w *benchWorld) side(url, token string) benchSide {
	return benchSide{url: url, token: token, http: w.http}
}

const benchWhoamiCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"team.whoami","arguments":{}}}`

// call makes one tools/call and checks that the remote answered.
func (s benchSide) call() error {
	req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(benchWhoamiCall))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", protocol20250618)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "remote saw subject=") || strings.Contains(string(body), `"isError":true`) {
		return fmt.Errorf("%s answered %s: %s", s.url, resp.Status, body)
	}
	return nil
}

// run calls from workers goroutines for d and returns how many calls completed.
func (s benchSide) run(workers int, d time.Duration) (int64, error) {
	var calls atomic.Int64
	var failed atomic.Value
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := s.call(); err != nil {
					failed.Store(err)
					return
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return 0, err
	}
	return calls.Load(), nil
}

// firstCalls times the first call of n new callers on each gateway, alternating, and
// returns the mean of each.
func (w *benchWorld) firstCalls(b *testing.B, n int, prefix string) (exchange, static time.Duration) {
	b.Helper()
	for i := range n {
		token := w.cluster.ServiceAccountToken(b, "bench", fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("uid-%s-%d", prefix, i), "room")
		for _, side := range []struct {
			url string
			sum *time.Duration
		}{{w.exchangeURL, &exchange}, {w.staticURL, &static}} {
			start := time.Now()
			if err := w.side(side.url, token).call(); err != nil {
				b.Fatal(err)
			}
			*side.sum += time.Since(start)
		}
	}
	return exchange / time.Duration(n), static / time.Duration(n)
}

// callEach makes one call as each of n new callers on url, from 16 goroutines.
func (w *benchWorld) callEach(b *testing.B, n int, prefix, url string) (int, time.Duration, error) {
	tokens := make(chan string, n)
	for i := range n {
		tokens <- w.cluster.ServiceAccountToken(b, "bench", fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("uid-%s-%d", prefix, i), "room")
	}
	close(tokens)
	start := time.Now()
	var failed atomic.Value
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for token := range tokens {
				if err := w.side(url, token).call(); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return 0, 0, err
	}
	return n, time.Since(start), nil
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
