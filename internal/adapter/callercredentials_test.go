package adapter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// keyRemote is a remote MCP server that knows its users by API key: whoami answers
// with the user whose key came in the Authorization header, and every initialize is
// recorded with the key that opened it, so a test sees which sessions callers share.
type keyRemote struct {
	url   string
	users map[string]string // "Bearer <key>" → user

	mu    sync.Mutex
	opens map[string]int // user → sessions opened
}

type authKey struct{}

func startKeyRemote(t *testing.T, users map[string]string) *keyRemote {
	t.Helper()
	r := &keyRemote{users: users, opens: map[string]int{}}
	s := server.NewMCPServer("key-remote", "1.0.0")
	s.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		user, _ := ctx.Value(authKey{}).(string)
		return mcp.NewToolResultText("remote saw subject=" + user), nil
	})
	h := server.NewStreamableHTTPServer(s, server.WithHTTPContextFunc(func(ctx context.Context, req *http.Request) context.Context {
		return context.WithValue(ctx, authKey{}, r.users[req.Header.Get("Authorization")])
	}))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user, ok := r.users[req.Header.Get("Authorization")]
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unknown key", http.StatusUnauthorized)
			return
		}
		if req.Method == http.MethodPost && req.Header.Get("Mcp-Session-Id") == "" {
			r.mu.Lock()
			r.opens[user]++
			r.mu.Unlock()
		}
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
func perCallerGateway(t *testing.T, key *clusterKey, remoteURL string) (*running, string) {
	t.Helper()
	dir := t.TempDir()
	tool := remoteTool("team.whoami", objectSchema, remoteURL, adapterconfig.TransportStreamableHTTP, "whoami")
	tool.Remote.CallerCredentials = &adapterconfig.CallerCredentials{
		Header: "Authorization", ValuePrefix: "Bearer ",
		PerCallerSecret: &adapterconfig.PerCallerSecret{Dir: dir, Namespace: "team", Label: "cantus.dev/caller-credentials-for=upstream", Key: "token"},
	}
	cfg := identityConfig(t, key)
	cfg.Tools = []adapterconfig.Tool{tool}
	return serve(t, cfg), dir
}

func writeCallerKey(t *testing.T, dir, caller, value string) {
	t.Helper()
	writeFileAtomically(t, filepath.Join(dir, adapterconfig.CallerKeyFileName("team/upstream", caller)), value)
}

// Two service accounts calling one imported tool reach the remote as two users, each
// on a session of its own; a caller with no key gets the Secret to create and nothing
// reaches the remote.
func TestCallerCredentials_PerCallerSecretsReachTheRemoteAsTwoUsers(t *testing.T) {
	remote := startKeyRemote(t, map[string]string{"Bearer key-of-ada-0001": "ada", "Bearer key-of-bo-0002": "bo"})
	key := newClusterKey(t, "k1")
	gw, dir := perCallerGateway(t, key, remote.url)
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
	res := callTool(t, cy, "team.whoami", map[string]any{})
	wantToolError(t, res, gateway.CodeCallerCredentialsMissing+": ", "namespace team", "cantus.dev/caller-credentials-for=upstream",
		"cantus.dev/caller=serviceaccount:team/cy", `"token"`, "nothing was sent")
	if n := remote.sessionsOpenedBy(""); n != 0 {
		t.Errorf("a caller without a key reached the remote %d times", n)
	}

	// A recreated account (new UID) is another caller: the old account's key is not its.
	cy2 := connect(t, gw.baseURL, protocol20251125, bearerHeader(key.saToken(t, "team", "ada", "uid-ada-recreated", "room")))
	wantToolError(t, callTool(t, cy2, "team.whoami", map[string]any{}), gateway.CodeCallerCredentialsMissing+": ")
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
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}
