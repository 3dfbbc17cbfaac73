package adapter

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
	"github.com/cantus-dev/cantus-operator/test/testenv/whoami"
)

const (
	exchangeClientSecret = "gateway-client-secret-8842"
	remoteAudience       = "whoami-remote"
)

// exchangeWorld is a real token service (zitadel's op) that trusts the test cluster's
// service-account issuer, a remote that checks the tokens it gets, and a gateway whose
// import exchanges each caller's token for one for the remote.
type exchangeWorld struct {
	cluster *tokenservice.TrustedIssuer
	tokens  *tokenservice.Server
	remote  *whoami.Server
	gateway *running
	cfg     *adapterconfig.Config
	logs    *logBuffer
}

func startExchangeWorld(t *testing.T, audience string) *exchangeWorld {
	t.Helper()
	return startExchangeWorldWith(t, audience, nil)
}

// startExchangeWorldWith is startExchangeWorld with the gateway's config changed by
// tweak before it serves.
func startExchangeWorldWith(t *testing.T, audience string, tweak func(*adapterconfig.Config)) *exchangeWorld {
	t.Helper()
	w := &exchangeWorld{cluster: tokenservice.NewTrustedIssuer(t, "https://kubernetes.default.svc.cluster.local"), logs: &logBuffer{}}
	w.tokens = tokenservice.Start(t, tokenservice.Options{
		Trusted: []*tokenservice.TrustedIssuer{w.cluster},
		Clients: []tokenservice.Client{{ID: "gateway", Secret: exchangeClientSecret}},
	})
	w.remote = whoami.Start(t, whoami.Options{Issuer: w.tokens.URL(), Keys: w.tokens.Keys(), Audience: remoteAudience})
	secretFile := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secretFile, []byte(exchangeClientSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	tool := remoteTool("team.whoami", objectSchema, w.remote.URL(), adapterconfig.TransportStreamableHTTP, whoami.ToolName)
	tool.Remote.CallerCredentials = &adapterconfig.CallerCredentials{Header: "Authorization", ValuePrefix: "Bearer ",
		TokenExchange: &adapterconfig.TokenExchange{
			TokenEndpoint: w.tokens.TokenEndpoint(), Resource: w.remote.URL(), Audience: audience,
			ClientID: "gateway", ClientSecretFile: secretFile,
			MaxCacheTTL: adapterconfig.Duration{Duration: 15 * time.Minute},
		}}
	w.cfg = configWith(adapterconfig.TransportStreamableHTTP, true, tool)
	w.cfg.Auth = &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{
		Kind: adapterconfig.IssuerServiceAccount, URL: w.cluster.URL, Audiences: []string{"room"}, JWKS: w.cluster.JWKS(t),
	}}}
	if tweak != nil {
		tweak(w.cfg)
	}
	w.gateway = serve(t, w.cfg, WithLogger(funcr.New(w.logs.add, funcr.Options{Verbosity: 9})))
	return w
}

// callAs calls team.whoami as the service account team/name (UID uid) and returns the
// result's text, and the inbound token it sent.
func (w *exchangeWorld) callAs(t *testing.T, name, uid string) (string, bool, string) {
	t.Helper()
	token := w.cluster.ServiceAccountToken(t, "team", name, uid, "room")
	res := callTool(t, connect(t, w.gateway.baseURL, protocol20251125, bearerHeader(token)), "team.whoami", map[string]any{})
	return textOf(res), res.IsError, token
}

// Two service accounts calling one imported tool arrive at the remote as two subjects,
// with one exchange each for as long as their tokens live, however many calls and
// sessions; no token, inbound or exchanged, nor the client secret, shows in the logs
// or the metrics.
func TestCallerCredentials_TokenExchangeActsAsEachCaller(t *testing.T) {
	w := startExchangeWorld(t, remoteAudience)
	var inbound []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range []string{"ada", "bo"} {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				text, isError, token := w.callAs(t, name, "uid-"+name)
				if want := "remote saw subject=system:serviceaccount:team:" + name + " act=-"; isError || text != want {
					t.Errorf("%s got %q (isError %v), want %q", name, text, isError, want)
				}
				mu.Lock()
				inbound = append(inbound, token)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for _, name := range []string{"ada", "bo"} {
		if n := w.tokens.Exchanges("system:serviceaccount:team:" + name); n != 1 {
			t.Errorf("%s's token was exchanged %d times for 4 calls, want 1", name, n)
		}
	}
	if got := w.tokens.LastRequest(); !slices.Contains(got.Resource, w.remote.URL()) || !slices.Contains(got.Audience, remoteAudience) {
		t.Errorf("the exchange asked for resource %v and audience %v, want the remote's URL and %s", got.Resource, got.Audience, remoteAudience)
	}

	metrics := metricsText(t, w.gateway.Server)
	secrets := append(append(slices.Clone(w.tokens.IssuedTokens()), inbound...), exchangeClientSecret)
	for _, secret := range secrets {
		if got := w.logs.matching(secret); len(got) > 0 {
			t.Errorf("the logs show a token or the client secret: %q", got)
		}
		if strings.Contains(metrics, secret) {
			t.Errorf("the metrics show a token or the client secret")
		}
	}
	if !strings.Contains(metrics, `cantus_adapter_caller_token_exchanges_total{outcome="succeeded",remote="team/upstream"} 2`) {
		t.Errorf("the metrics do not count two exchanges:\n%s", grepLines(metrics, "caller_token"))
	}
}

// A remote that refuses the exchanged token (here: issued for another audience) gets
// one re-exchange and one retry, then the caller is told upstream_unauthorized, naming
// the import and what to do.
func TestCallerCredentials_RefusedExchangedTokenIsUpstreamUnauthorized(t *testing.T) {
	w := startExchangeWorld(t, "another-audience")
	text, isError, _ := w.callAs(t, "ada", "uid-ada")
	if !isError || !strings.HasPrefix(text, gateway.CodeUpstreamUnauthorized+": ") || !strings.Contains(text, "team/upstream") ||
		!strings.Contains(text, "token service") {
		t.Errorf("got %q (isError %v), want upstream_unauthorized naming the import and what to do", text, isError)
	}
	if n := w.tokens.Exchanges("system:serviceaccount:team:ada"); n != 2 {
		t.Errorf("the caller's token was exchanged %d times, want 2 (one, and one after the remote's 401)", n)
	}
}

// An exchanged token that expires is replaced by a new exchange; a deleted (revoked)
// service account is refused at the gateway and its cached token is dropped.
func TestCallerCredentials_ExpiredTokenIsReplacedAndRevokedCallerDropped(t *testing.T) {
	w := startExchangeWorld(t, remoteAudience)
	w.tokens.SetTokenLifetime(2 * time.Second)
	sub := "system:serviceaccount:team:ada"
	if text, isError, _ := w.callAs(t, "ada", "uid-ada"); isError {
		t.Fatalf("first call: %s", text)
	}
	// Waits out the exchanged token's real 2 s lifetime: the gateway's cache judges
	// expiry by the clock.
	time.Sleep(2500 * time.Millisecond)
	if text, isError, _ := w.callAs(t, "ada", "uid-ada"); isError {
		t.Fatalf("call after the token expired: %s", text)
	}
	if n := w.tokens.Exchanges(sub); n != 2 {
		t.Errorf("exchanges after expiry: %d, want 2", n)
	}
	if got := metricsText(t, w.gateway.Server); !strings.Contains(got, "cantus_adapter_caller_tokens_cached 1") {
		t.Errorf("the cache does not hold the caller's token:\n%s", grepLines(got, "tokens_cached"))
	}

	revoked := *w.cfg
	auth := *w.cfg.Auth
	auth.Issuers = slices.Clone(w.cfg.Auth.Issuers)
	auth.Issuers[0].RevokedServiceAccountUIDs = []string{"uid-ada"}
	revoked.Auth = &auth
	if err := w.gateway.Reload(&revoked); err != nil {
		t.Fatal(err)
	}
	if got := metricsText(t, w.gateway.Server); !strings.Contains(got, "cantus_adapter_caller_tokens_cached 0") {
		t.Errorf("the revoked caller's token is still cached:\n%s", grepLines(got, "tokens_cached"))
	}
	token := w.cluster.ServiceAccountToken(t, "team", "ada", "uid-ada", "room")
	if _, err := dial(t, w.gateway.baseURL, protocol20251125, bearerHeader(token)); err == nil {
		t.Errorf("the revoked account's token is still accepted")
	}
	if n := w.tokens.Exchanges(sub); n != 2 {
		t.Errorf("a revoked caller's token was exchanged again: %d exchanges, want 2", n)
	}
}
