package adapter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/go-logr/logr/funcr"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// keyRemote is a remote MCP server that knows its users by API key: whoami answers
// with the user whose key came in the Authorization header, and every initialize is
// recorded with the key that opened it, so a test sees which sessions callers share.
type keyRemote struct {
	url   string
	users map[string]string // "Bearer <key>" → user

	requests atomic.Int32 // every request, known key or not

	mu     sync.Mutex
	opens  map[string]int // user → sessions opened
	closes map[string]int // user → sessions closed (DELETE)
}

type authKey struct{}

func startKeyRemote(t *testing.T, users map[string]string) *keyRemote {
	t.Helper()
	r := &keyRemote{users: users, opens: map[string]int{}, closes: map[string]int{}}
	s := server.NewMCPServer("key-remote", "1.0.0")
	s.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		user, _ := ctx.Value(authKey{}).(string)
		return mcp.NewToolResultText("remote saw subject=" + user), nil
	})
	h := server.NewStreamableHTTPServer(s, server.WithHTTPContextFunc(func(ctx context.Context, req *http.Request) context.Context {
		return context.WithValue(ctx, authKey{}, r.users[req.Header.Get("Authorization")])
	}))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		user, ok := r.users[req.Header.Get("Authorization")]
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unknown key", http.StatusUnauthorized)
			return
		}
		r.mu.Lock()
		switch {
		case req.Method == http.MethodPost && req.Header.Get("Mcp-Session-Id") == "":
			r.opens[user]++
		case req.Method == http.MethodDelete:
			r.closes[user]++
		}
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(hs.Close)
	r.url = hs.URL + "/mcp"
	return r
}

func (r *keyRemote) sessionsOpenedBy(user string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opens[user]
}

func (r *keyRemote) sessionsClosedBy(user string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closes[user]
}

// saToken is a service-account token of the test cluster, with the account's UID.
func (k *clusterKey) saToken(t *testing.T, ns, name, uid, audience string) string {
	t.Helper()
	raw, err := jwt.Signed(k.signer).Claims(jwt.Claims{
		Issuer: testIssuerURL, Subject: "system:serviceaccount:" + ns + ":" + name, Audience: jwt.Audience{audience},
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour)), IssuedAt: jwt.NewNumericDate(time.Now()),
	}).Claims(map[string]any{"kubernetes.io": map[string]any{"namespace": ns, "serviceaccount": map[string]any{"name": name, "uid": uid}}}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// perCallerGateway serves whoami of remote re-exported by an import whose callers'
// keys are files in the returned directory (as the operator keeps them).
func perCallerGateway(t *testing.T, key *clusterKey, remoteURL string, opts ...Option) (*running, string) {
	t.Helper()
	cfg, dir := perCallerConfig(t, key, remoteURL)
	return serve(t, cfg, opts...), dir
}

func perCallerConfig(t *testing.T, key *clusterKey, remoteURL string) (*adapterconfig.Config, string) {
	t.Helper()
	dir := t.TempDir()
	tool := remoteTool("team.whoami", objectSchema, remoteURL, adapterconfig.TransportStreamableHTTP, "whoami")
	tool.Remote.CallerCredentials = &adapterconfig.CallerCredentials{
		Header: "Authorization", ValuePrefix: "Bearer ",
		PerCallerSecret: &adapterconfig.PerCallerSecret{Dir: dir, Namespace: "team", Label: "cantus.dev/caller-credentials-for=upstream", Key: "token"},
	}
	cfg := identityConfig(t, key)
	cfg.Tools = []adapterconfig.Tool{tool}
	return cfg, dir
}

func writeCallerKey(t *testing.T, dir, caller, value string) {
	t.Helper()
	writeFileAtomically(t, filepath.Join(dir, adapterconfig.CallerKeyFileName("team/upstream", caller)), value)
}

// Two service accounts calling one imported tool reach the remote as two users, each
// on a session of its own; a caller with no key gets the Secret to create and nothing
// reaches the remote.
func TestCallerCredentials_PerCallerSecretsReachTheRemoteAsTwoUsers(t *testing.T) {
	remote := startKeyRemote(t, map[string]string{"Bearer key-of-ada-0001": "ada", "Bearer key-of-bo-0002": "bo", "Bearer service-key": "service"})
	key := newClusterKey(t, "k1")
	logs := &logBuffer{}
	cfg, dir := perCallerConfig(t, key, remote.url)
	// The import's service identity is in the same header: calls send the caller's key
	// in its place.
	serviceHeader := filepath.Join(t.TempDir(), "authorization")
	writeFileAtomically(t, serviceHeader, "Bearer service-key")
	cfg.Tools[0].Remote.HeaderFiles = map[string]string{"Authorization": serviceHeader}
	gw := serve(t, cfg, WithLogger(funcr.New(logs.add, funcr.Options{Verbosity: 9})))
	writeCallerKey(t, dir, adapterconfig.ServiceAccountCaller("team/ada", "uid-ada"), "key-of-ada-0001\n")
	writeCallerKey(t, dir, adapterconfig.ServiceAccountCaller("team/bo", "uid-bo"), "key-of-bo-0002")

	ada := connect(t, gw.baseURL, protocol20251125, bearerHeader(key.saToken(t, "team", "ada", "uid-ada", "room")))
	bo := connect(t, gw.baseURL, protocol20251125, bearerHeader(key.saToken(t, "team", "bo", "uid-bo", "room")))
	for range 3 {
		wantSuccess(t, callTool(t, ada, "team.whoami", map[string]any{}), "remote saw subject=ada")
		wantSuccess(t, callTool(t, bo, "team.whoami", map[string]any{}), "remote saw subject=bo")
	}
	if a, b := remote.sessionsOpenedBy("ada"), remote.sessionsOpenedBy("bo"); a != 1 || b != 1 {
		t.Errorf("sessions opened at the remote: ada %d, bo %d; want one each (per caller, reused)", a, b)
	}

	cy := connect(t, gw.baseURL, protocol20251125, bearerHeader(key.saToken(t, "team", "cy", "uid-cy", "room")))
	before := remote.requests.Load()
	res := callTool(t, cy, "team.whoami", map[string]any{})
	wantToolError(t, res, gateway.CodeCallerCredentialsMissing+": ", "namespace team", "cantus.dev/caller-credentials-for=upstream",
		"cantus.dev/caller=serviceaccount:team/cy", `"token"`, "nothing was sent")
	if n := remote.requests.Load() - before; n != 0 {
		t.Errorf("a caller without a key reached the remote with %d requests", n)
	}

	// A recreated account (new UID) is another caller: the old account's key is not its.
	cy2 := connect(t, gw.baseURL, protocol20251125, bearerHeader(key.saToken(t, "team", "ada", "uid-ada-recreated", "room")))
	wantToolError(t, callTool(t, cy2, "team.whoami", map[string]any{}), gateway.CodeCallerCredentialsMissing+": ")

	// The audit lines name the caller (that is their job); no line shows a key, and
	// no metric names a caller.
	metrics := metricsText(t, gw.Server)
	for _, secret := range []string{"key-of-ada-0001", "key-of-bo-0002", "uid-ada"} {
		if got := logs.matching(secret); len(got) > 0 {
			t.Errorf("the logs show %q: %q", secret, got)
		}
	}
	for _, name := range []string{"key-of-ada-0001", "uid-ada", "team/ada", "team/cy"} {
		if strings.Contains(metrics, name) {
			t.Errorf("the metrics show %q", name)
		}
	}
}

// A key the remote refuses is re-read once (a rotated Secret) and, still refused, is
// reported as upstream_unauthorized naming the import and what to do; a new key is
// picked up by the next call without a restart.
func TestCallerCredentials_RefusedKeyIsUpstreamUnauthorizedAndRotates(t *testing.T) {
	remote := startKeyRemote(t, map[string]string{"Bearer key-of-ada-0001": "ada"})
	key := newClusterKey(t, "k1")
	gw, dir := perCallerGateway(t, key, remote.url)
	ada := adapterconfig.ServiceAccountCaller("team/ada", "uid-ada")
	writeCallerKey(t, dir, ada, "stale-key-9999")
	c := connect(t, gw.baseURL, protocol20251125, bearerHeader(key.saToken(t, "team", "ada", "uid-ada", "room")))

	res := callTool(t, c, "team.whoami", map[string]any{})
	wantToolError(t, res, gateway.CodeUpstreamUnauthorized+": ", "team/upstream", "401", "replace the key in the caller's Secret")
	if strings.Contains(textOf(res), "stale-key-9999") {
		t.Errorf("the error shows the key: %q", textOf(res))
	}
	writeCallerKey(t, dir, ada, "key-of-ada-0001")
	wantSuccess(t, callTool(t, c, "team.whoami", map[string]any{}), "remote saw subject=ada")
}

// A caller with a static bearer token has no identity to act for.
func TestCallerCredentials_StaticTokenCallerIsRefused(t *testing.T) {
	remote := startKeyRemote(t, map[string]string{})
	key := newClusterKey(t, "k1")
	dir := t.TempDir()
	tool := remoteTool("team.whoami", objectSchema, remote.url, adapterconfig.TransportStreamableHTTP, "whoami")
	tool.Remote.CallerCredentials = &adapterconfig.CallerCredentials{Header: "Authorization", ValuePrefix: "Bearer ",
		PerCallerSecret: &adapterconfig.PerCallerSecret{Dir: dir, Namespace: "team", Label: "l", Key: "token"}}
	cfg := identityConfig(t, key)
	cfg.Tools = []adapterconfig.Tool{tool}
	gw := serve(t, cfg, WithBearerToken("shared-static-token"))
	c := connect(t, gw.baseURL, protocol20251125, bearerHeader("shared-static-token"))
	wantToolError(t, callTool(t, c, "team.whoami", map[string]any{}), gateway.CodeCallerIdentityRequired+": ", "team/upstream")
	if n := remote.requests.Load(); n != 0 {
		t.Errorf("a caller without an identity reached the remote with %d requests", n)
	}
}

// Caller sessions are bounded: past MaxCallers the least recently used caller's session
// is closed at the remote; one unused for IdleTimeout is closed too; and a service
// account that is revoked (deleted) loses its session at the next reload.
func TestCallerCredentials_CallerSessionsAreBoundedIdleClosedAndRevoked(t *testing.T) {
	users := map[string]string{}
	for _, name := range []string{"ada", "bo", "cy", "dee"} {
		users["Bearer key-of-"+name] = name
	}
	remote := startKeyRemote(t, users)
	key := newClusterKey(t, "k1")
	cfg, dir := perCallerConfig(t, key, remote.url)
	backend := cfg.Tools[0].Remote
	backend.CallerCredentials.MaxCallers = 2
	backend.CallerCredentials.IdleTimeout = adapterconfig.Duration{Duration: 2 * time.Second}
	gw := serve(t, cfg)
	clients := map[string]*client.Client{}
	for _, name := range []string{"ada", "bo", "cy", "dee"} {
		writeCallerKey(t, dir, adapterconfig.ServiceAccountCaller("team/"+name, "uid-"+name), "key-of-"+name)
		clients[name] = connect(t, gw.baseURL, protocol20251125, bearerHeader(key.saToken(t, "team", name, "uid-"+name, "room")))
	}

	wantSuccess(t, callTool(t, clients["ada"], "team.whoami", map[string]any{}), "remote saw subject=ada")
	wantSuccess(t, callTool(t, clients["bo"], "team.whoami", map[string]any{}), "remote saw subject=bo")
	wantSuccess(t, callTool(t, clients["cy"], "team.whoami", map[string]any{}), "remote saw subject=cy")
	testkit.EventuallyTrue(t, 10*time.Second, "ada's session, the least recently used of three, closed", func() bool { return remote.sessionsClosedBy("ada") == 1 })
	if n := remote.sessionsClosedBy("bo"); n != 0 {
		t.Errorf("bo's session was closed %d times; only the least recently used should be", n)
	}
	if !strings.Contains(metricsText(t, gw.Server), `cantus_adapter_caller_sessions{import="team/upstream"} 2`) {
		t.Errorf("the caller-sessions gauge does not say 2:\n%s", grepLines(metricsText(t, gw.Server), "caller_sessions"))
	}

	testkit.EventuallyTrue(t, 10*time.Second, "idle sessions closed", func() bool { return remote.sessionsClosedBy("bo") == 1 && remote.sessionsClosedBy("cy") == 1 })

	wantSuccess(t, callTool(t, clients["dee"], "team.whoami", map[string]any{}), "remote saw subject=dee")
	revoked := *cfg
	auth := *cfg.Auth
	auth.Issuers = slices.Clone(cfg.Auth.Issuers)
	auth.Issuers[0].RevokedServiceAccountUIDs = []string{"uid-dee"}
	revoked.Auth = &auth
	if err := gw.Reload(&revoked); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 10*time.Second, "the revoked account's session closed", func() bool { return remote.sessionsClosedBy("dee") == 1 })
}
