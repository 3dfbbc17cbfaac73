package access

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// testIssuer signs tokens with its own key, as a cluster or an OIDC provider would.
type testIssuer struct {
	url    string
	key    *rsa.PrivateKey
	kid    string
	signer jose.Signer
}

func newTestIssuer(t *testing.T, url, kid string) *testIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	return &testIssuer{url: url, key: key, kid: kid, signer: signer}
}

func (i *testIssuer) jwks(t *testing.T) json.RawMessage {
	t.Helper()
	data, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &i.key.PublicKey, KeyID: i.kid, Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// token signs claims; std fills iss, exp and aud unless the caller set them.
func (i *testIssuer) token(t *testing.T, aud []string, exp time.Time, extra map[string]any) string {
	t.Helper()
	std := jwt.Claims{Issuer: i.url, Audience: aud, Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(time.Now().Add(-time.Minute))}
	raw, err := jwt.Signed(i.signer).Claims(std).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func serviceAccountClaims(ns, name string) map[string]any {
	return map[string]any{
		"sub":           "system:serviceaccount:" + ns + ":" + name,
		"kubernetes.io": map[string]any{"namespace": ns, "serviceaccount": map[string]any{"name": name, "uid": "u"}},
	}
}

func requestWith(token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func TestServiceAccountTokens(t *testing.T) {
	cluster := newTestIssuer(t, "https://kubernetes.default.svc", "k1")
	impostor := newTestIssuer(t, "https://kubernetes.default.svc", "k1")
	a, err := New(Settings{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{
		Kind: adapterconfig.IssuerServiceAccount, URL: cluster.url, Audiences: []string{"room.library.skillserver.cantus.dev"}, JWKS: cluster.jwks(t),
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	aud := []string{"room.library.skillserver.cantus.dev"}
	hour := time.Now().Add(time.Hour)

	caller, err := a.Authenticate(requestWith(cluster.token(t, aud, hour, serviceAccountClaims("agents", "reader"))))
	if err != nil {
		t.Fatalf("a valid token was refused: %v", err)
	}
	if caller.ServiceAccount != "agents/reader" || !strings.Contains(strings.Join(caller.Groups, ","), "system:serviceaccounts:agents") {
		t.Errorf("caller %+v, want agents/reader in system:serviceaccounts:agents", caller)
	}
	if caller.String() != "serviceaccount:agents/reader" {
		t.Errorf("audit name %q", caller.String())
	}

	for name, token := range map[string]string{
		"another audience":      cluster.token(t, []string{"other.library.skillserver.cantus.dev"}, hour, serviceAccountClaims("agents", "reader")),
		"expired":               cluster.token(t, aud, time.Now().Add(-time.Minute), serviceAccountClaims("agents", "reader")),
		"signed by another key": impostor.token(t, aud, hour, serviceAccountClaims("agents", "reader")),
		"another issuer":        newTestIssuer(t, "https://elsewhere", "k1").token(t, aud, hour, serviceAccountClaims("agents", "reader")),
		"not a JWT":             "opaque-token",
	} {
		if _, err := a.Authenticate(requestWith(token)); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: got %v, want ErrInvalidToken", name, err)
		}
	}
	if _, err := a.Authenticate(requestWith("")); !errors.Is(err, ErrNoToken) {
		t.Errorf("no token: got %v, want ErrNoToken", err)
	}
}

// A token bound to a service account or pod the operator saw deleted is refused, as the
// API server would refuse it; so is one that lives longer than the deletions are
// remembered.
func TestServiceAccountTokenBindings(t *testing.T) {
	cluster := newTestIssuer(t, "https://kubernetes.default.svc", "k1")
	aud := []string{"room.library.skillserver.cantus.dev"}
	limit := adapterconfig.Duration{Duration: 2 * time.Hour}
	a, err := New(Settings{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{
		Kind: adapterconfig.IssuerServiceAccount, URL: cluster.url, Audiences: aud, JWKS: cluster.jwks(t),
		RevokedUIDs: []string{"deleted-account", "deleted-pod"}, MaxTokenLifetime: &limit,
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	bound := func(accountUID, podUID string) map[string]any {
		k8s := map[string]any{"namespace": "agents", "serviceaccount": map[string]any{"name": "reader", "uid": accountUID}}
		if podUID != "" {
			k8s["pod"] = map[string]any{"name": "reader-0", "uid": podUID}
		}
		return map[string]any{"sub": "system:serviceaccount:agents:reader", "kubernetes.io": k8s}
	}
	hour := time.Now().Add(time.Hour)

	if _, err := a.Authenticate(requestWith(cluster.token(t, aud, hour, bound("live-account", "live-pod")))); err != nil {
		t.Errorf("a token of a live account and pod was refused: %v", err)
	}
	for name, tc := range map[string]struct {
		token string
		says  string
	}{
		"deleted account":   {cluster.token(t, aud, hour, bound("deleted-account", "")), "service account was deleted"},
		"deleted pod":       {cluster.token(t, aud, hour, bound("live-account", "deleted-pod")), "pod it was issued to was deleted"},
		"valid for 3 hours": {cluster.token(t, aud, time.Now().Add(3*time.Hour), bound("live-account", "")), "longer than the 2h0m0s"},
	} {
		_, err := a.Authenticate(requestWith(tc.token))
		if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v, want ErrInvalidToken saying %q", name, err, tc.says)
		}
	}
}

// A token bound to a Secret, or to a Node without a pod, is refused: the API server
// refuses it once that object is deleted, and the operator does not watch those
// deletions (issue 23 #15). A pod's projected token names its node too and passes.
// Before, all three were accepted.
func TestTokensBoundToSecretsOrNodesAreRefused(t *testing.T) {
	cluster := newTestIssuer(t, "https://kubernetes.default.svc", "k1")
	aud := []string{"room.library.skillserver.cantus.dev"}
	a, err := New(Settings{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{
		Kind: adapterconfig.IssuerServiceAccount, URL: cluster.url, Audiences: aud, JWKS: cluster.jwks(t),
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	boundTo := func(objects map[string]any) string {
		k8s := map[string]any{"namespace": "agents", "serviceaccount": map[string]any{"name": "reader", "uid": "u1"}}
		maps.Copy(k8s, objects)
		return cluster.token(t, aud, time.Now().Add(time.Hour), map[string]any{"sub": "system:serviceaccount:agents:reader", "kubernetes.io": k8s})
	}
	pod := map[string]any{"name": "reader-0", "uid": "p1"}
	node := map[string]any{"name": "node-a", "uid": "n1"}
	secret := map[string]any{"name": "reader-token", "uid": "s1"}

	for name, objects := range map[string]map[string]any{"unbound": nil, "a pod (and its node)": {"pod": pod, "node": node}} {
		if _, err := a.Authenticate(requestWith(boundTo(objects))); err != nil {
			t.Errorf("a token bound to %s was refused: %v", name, err)
		}
	}
	for name, tc := range map[string]struct {
		objects map[string]any
		says    string
	}{
		"a Secret":          {map[string]any{"secret": secret}, "bound to a Secret"},
		"a Node and no pod": {map[string]any{"node": node}, "bound to a Node and no pod"},
	} {
		_, err := a.Authenticate(requestWith(boundTo(tc.objects)))
		if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("a token bound to %s: got %v, want ErrInvalidToken saying %q", name, err, tc.says)
		}
	}
}

// After the operator had to drop deletions, a token issued before the newest dropped
// one is refused (any of them may have been its binding), and a token issued since
// passes (issue 23, finding 6: dropping used to let such tokens pass).
func TestTokensIssuedBeforeDroppedRevocationsAreRefused(t *testing.T) {
	cluster := newTestIssuer(t, "https://kubernetes.default.svc", "k1")
	aud := []string{"room.library.skillserver.cantus.dev"}
	dropped := time.Now().Add(-30 * time.Second).Truncate(time.Second)
	a, err := New(Settings{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{
		Kind: adapterconfig.IssuerServiceAccount, URL: cluster.url, Audiences: aud, JWKS: cluster.jwks(t),
		RevokedServiceAccountUIDs: []string{"deleted-account"}, RefuseIssuedBefore: &dropped,
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Add(time.Hour)
	old := cluster.token(t, aud, hour, serviceAccountClaims("agents", "reader")) // issued a minute ago
	if _, err := a.Authenticate(requestWith(old)); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "issued before") {
		t.Errorf("a token issued before the dropped deletions: got %v, want ErrInvalidToken saying it was issued before", err)
	}
	fresh := serviceAccountClaims("agents", "reader")
	fresh["iat"] = time.Now().Unix()
	if _, err := a.Authenticate(requestWith(cluster.token(t, aud, hour, fresh))); err != nil {
		t.Errorf("a token issued after the dropped deletions was refused: %v", err)
	}
	gone := serviceAccountClaims("agents", "reader")
	gone["iat"] = time.Now().Unix()
	gone["kubernetes.io"] = map[string]any{"namespace": "agents", "serviceaccount": map[string]any{"name": "reader", "uid": "deleted-account"}}
	if _, err := a.Authenticate(requestWith(cluster.token(t, aud, hour, gone))); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "service account was deleted") {
		t.Errorf("a token of an account listed among revokedServiceAccountUIDs: got %v, want refused", err)
	}
}

// The operator hands rotated keys over by Update: tokens of the new key pass at once,
// those of the retired key no longer do.
func TestUpdateRotatesIssuerKeys(t *testing.T) {
	old, rotated := newTestIssuer(t, "https://kubernetes.default.svc", "k1"), newTestIssuer(t, "https://kubernetes.default.svc", "k2")
	settings := func(i *testIssuer) Settings {
		return Settings{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{
			Kind: adapterconfig.IssuerServiceAccount, URL: i.url, Audiences: []string{"a"}, JWKS: i.jwks(t)}}}}
	}
	a, err := New(settings(old))
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Add(time.Hour)
	oldToken, newToken := old.token(t, []string{"a"}, hour, serviceAccountClaims("n", "s")), rotated.token(t, []string{"a"}, hour, serviceAccountClaims("n", "s"))
	if _, err := a.Authenticate(requestWith(newToken)); err == nil {
		t.Fatal("a token of a key the server does not know yet was accepted")
	}
	if err := a.Update(settings(rotated)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(requestWith(newToken)); err != nil {
		t.Errorf("after the update, a token of the new key was refused: %v", err)
	}
	if _, err := a.Authenticate(requestWith(oldToken)); err == nil {
		t.Error("after the update, a token of the retired key was accepted")
	}
}

// An OIDC issuer is discovered over TLS, trusting only the CA bundle given.
func TestOIDCDiscoveryTrustsOnlyTheCABundle(t *testing.T) {
	var issuer *testIssuer
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": issuer.url, "jwks_uri": issuer.url + "/keys",
				"authorization_endpoint": issuer.url + "/auth", "id_token_signing_alg_values_supported": []string{"RS256"}})
		case "/keys":
			_, _ = w.Write(issuer.jwks(t))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	issuer = newTestIssuer(t, srv.URL, "o1")
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	token := issuer.token(t, []string{"cantus"}, time.Now().Add(time.Hour), map[string]any{"sub": "alice", "email": "alice@example.com", "groups": []string{"readers"}})

	trusting, err := New(Settings{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{Kind: adapterconfig.IssuerOIDC, URL: srv.URL, Audiences: []string{"cantus"}, CAFile: caFile}}}})
	if err != nil {
		t.Fatal(err)
	}
	caller, err := trusting.Authenticate(requestWith(token))
	if err != nil {
		t.Fatalf("a token of the trusted issuer was refused: %v", err)
	}
	if caller.Subject != "alice" || len(caller.Groups) != 1 || caller.Groups[0] != "readers" || caller.Claims["email"] != "alice@example.com" {
		t.Errorf("caller %+v", caller)
	}

	untrusting, err := New(Settings{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{Kind: adapterconfig.IssuerOIDC, URL: srv.URL, Audiences: []string{"cantus"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusting.Authenticate(requestWith(token)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA bundle discovery must fail on the certificate, got %v", err)
	}
}

// A rotated Secret holds old and new tokens while clients move over; then the old one
// goes, without a restart.
func TestStaticTokensRotateWithOverlap(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(content string) {
		t.Helper()
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write("old-token\n")
	a, err := New(Settings{BearerTokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	accepted := func(token string) bool { _, err := a.Authenticate(requestWith(token)); return err == nil }
	if !accepted("old-token") || accepted("new-token") {
		t.Fatal("want only old-token at first")
	}
	write("old-token\nnew-token\n")
	testkit.EventuallyTrue(t, 5*time.Second, "the added token to be accepted", func() bool { return accepted("new-token") })
	if !accepted("old-token") {
		t.Error("the old token stopped working while both are in the file")
	}
	write("new-token\n")
	testkit.EventuallyTrue(t, 5*time.Second, "the removed token to be refused", func() bool { return !accepted("old-token") })
	write("")
	// Waits out rereadEvery, which the authenticator measures by the clock, so that
	// the next check reads the emptied file.
	time.Sleep(1100 * time.Millisecond)
	if !accepted("new-token") {
		t.Error("an emptied file locked out the last token; it should keep the last tokens")
	}
}

func TestEmptyTokenFileIsRefusedAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("\n \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Settings{BearerTokenFile: file}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("got %v, want an error saying the file is empty", err)
	}
}

// Tokens with made-up key ids do not make the adapter fetch the issuer's keys on every
// request (issue 23, finding 10): one fetch per cooldown at most; a key the issuer rotates
// in is accepted once the cooldown has passed.
func TestUnknownKeyIDsFetchTheIssuersKeysOncePerCooldown(t *testing.T) {
	var issuer, rotated *testIssuer
	var keyFetches atomic.Int32
	serveRotated := atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": issuer.url, "jwks_uri": issuer.url + "/keys",
				"authorization_endpoint": issuer.url + "/auth", "id_token_signing_alg_values_supported": []string{"RS256"}})
		case "/keys":
			keyFetches.Add(1)
			if serveRotated.Load() {
				_, _ = w.Write(rotated.jwks(t))
				return
			}
			_, _ = w.Write(issuer.jwks(t))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	issuer = newTestIssuer(t, srv.URL, "current")
	rotated = newTestIssuer(t, srv.URL, "next")
	stranger := newTestIssuer(t, srv.URL, "made-up")
	a, err := New(Settings{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{Kind: adapterconfig.IssuerOIDC, URL: srv.URL, Audiences: []string{"cantus"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"sub": "alice"}
	if _, err := a.Authenticate(requestWith(issuer.token(t, []string{"cantus"}, time.Now().Add(time.Hour), claims))); err != nil {
		t.Fatalf("a token of the issuer was refused: %v", err)
	}
	for range 50 {
		if _, err := a.Authenticate(requestWith(stranger.token(t, []string{"cantus"}, time.Now().Add(time.Hour), claims))); err == nil {
			t.Fatal("a token signed with a key the issuer does not publish was accepted")
		}
	}
	if n := keyFetches.Load(); n != 1 {
		t.Errorf("the issuer's keys were fetched %d times for 1 good and 50 made-up key ids, want 1", n)
	}

	// The issuer rotates its key; once the cooldown has passed the new key is fetched.
	serveRotated.Store(true)
	keys := a.state.Load().issuers[0].keySet
	keys.mu.Lock()
	keys.fetched = time.Now().Add(-keyRefreshCooldown)
	keys.mu.Unlock()
	if _, err := a.Authenticate(requestWith(rotated.token(t, []string{"cantus"}, time.Now().Add(time.Hour), claims))); err != nil {
		t.Fatalf("a token signed with the rotated key was refused after the cooldown: %v", err)
	}
	if n := keyFetches.Load(); n != 2 {
		t.Errorf("keys fetched %d times, want 2", n)
	}
}

// servedOIDCIssuer is an OIDC issuer discovered over TLS; it returns the issuer and its
// CA bundle's file.
func servedOIDCIssuer(t *testing.T) (*testIssuer, string) {
	t.Helper()
	var issuer *testIssuer
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": issuer.url, "jwks_uri": issuer.url + "/keys",
				"authorization_endpoint": issuer.url + "/auth", "id_token_signing_alg_values_supported": []string{"RS256"}})
		case "/keys":
			_, _ = w.Write(issuer.jwks(t))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	issuer = newTestIssuer(t, srv.URL, "o1")
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return issuer, caFile
}

// An identity provider's group named like a Kubernetes group does not satisfy a rule
// meant for service accounts: OIDC groups are prefixed, and system: groups are never
// taken from an OIDC token, whatever the prefix (issue 23 #5). Before, the caller was in
// system:serviceaccounts:prod and the rule let it deploy.
func TestOIDCGroupsCannotPassForKubernetesGroups(t *testing.T) {
	issuer, caFile := servedOIDCIssuer(t)
	token := issuer.token(t, []string{"cantus"}, time.Now().Add(time.Hour), map[string]any{"sub": "mallory",
		"groups": []string{"system:serviceaccounts:prod", "system:masters", "readers"}})
	rules := &adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{
		{Tools: []string{"deploy"}, Groups: []string{"system:serviceaccounts:prod"}},
		{Tools: []string{"read"}, Groups: []string{"oidc:readers"}},
	}}
	for _, prefix := range []string{"oidc:", ""} {
		t.Run("prefix "+strconv.Quote(prefix), func(t *testing.T) {
			a, err := New(Settings{Auth: &adapterconfig.AuthConfig{Authorization: rules, Issuers: []adapterconfig.Issuer{
				{Kind: adapterconfig.IssuerOIDC, URL: issuer.url, Audiences: []string{"cantus"}, CAFile: caFile, GroupsPrefix: prefix}}}})
			if err != nil {
				t.Fatal(err)
			}
			caller, err := a.Authenticate(requestWith(token))
			if err != nil {
				t.Fatalf("the token was refused: %v", err)
			}
			if want := []string{prefix + "readers"}; !slices.Equal(caller.Groups, want) {
				t.Errorf("caller groups %v, want %v", caller.Groups, want)
			}
			if a.Allows(caller, "deploy") {
				t.Error("an OIDC group named system:serviceaccounts:prod satisfied the service-account rule")
			}
			if got := a.Allows(caller, "read"); got != (prefix == "oidc:") {
				t.Errorf("read allowed = %v with prefix %q", got, prefix)
			}
		})
	}
}

// A Kubernetes service-account token is accepted only by a service-account issuer, which
// checks its binding; an OIDC issuer refuses it, even one configured by hand with the
// cluster's URL and the API server's audience (review R10). Before, an OIDC issuer
// accepted it with none of those checks.
func TestOIDCIssuersRefuseServiceAccountTokens(t *testing.T) {
	issuer, caFile := servedOIDCIssuer(t)
	reserved := []string{"https://kubernetes.default.svc", "cantus"}
	a, err := New(Settings{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{
		{Kind: adapterconfig.IssuerOIDC, URL: issuer.url, Audiences: reserved, CAFile: caFile}}}})
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Add(time.Hour)
	if _, err := a.Authenticate(requestWith(issuer.token(t, []string{"cantus"}, hour, map[string]any{"sub": "alice"}))); err != nil {
		t.Fatalf("an OIDC token was refused: %v", err)
	}
	for name, claims := range map[string]map[string]any{
		"a projected token":          serviceAccountClaims("agents", "reader"),
		"a service-account subject":  {"sub": "system:serviceaccount:agents:reader"},
		"a legacy token's namespace": {"sub": "x", "kubernetes.io/serviceaccount/namespace": "agents"},
	} {
		token := issuer.token(t, []string{"https://kubernetes.default.svc"}, hour, claims)
		if _, err := a.Authenticate(requestWith(token)); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "service-account token") {
			t.Errorf("%s: got %v, want a refusal of a service-account token", name, err)
		}
	}
}

// One URL cannot be both the service-account issuer and an OIDC issuer of one server:
// the OIDC one would take the cluster's tokens past the service-account checks.
func TestAnOIDCIssuerAtTheServiceAccountIssuersURLIsRefused(t *testing.T) {
	cluster := newTestIssuer(t, "https://kubernetes.default.svc", "k1")
	auth := &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{
		{Kind: adapterconfig.IssuerServiceAccount, URL: cluster.url, Audiences: []string{"room.library.skillserver.cantus.dev"}, JWKS: cluster.jwks(t)},
		{Kind: adapterconfig.IssuerOIDC, URL: cluster.url + "/", Audiences: []string{"https://kubernetes.default.svc"}},
	}}
	if err := ValidateAuth(auth); err == nil || !strings.Contains(err.Error(), "service-account issuer") {
		t.Errorf("ValidateAuth = %v, want a refusal", err)
	}
	if _, err := New(Settings{Auth: auth}); err == nil {
		t.Error("New accepted an OIDC issuer at the service-account issuer's URL")
	}
}

// No prefix and group together may spell a Kubernetes group (review R13): the check is
// on what the rules see, prefix+group, not on the group alone. Before, "system" and
// ":serviceaccounts:prod" made system:serviceaccounts:prod.
func TestOIDCGroupsPrefixAndGroupCannotSpellAKubernetesGroup(t *testing.T) {
	for _, tc := range []struct {
		prefix  string
		claimed []string
		want    []string
	}{
		{"system", []string{":serviceaccounts:prod", "-ops"}, []string{"system-ops"}},
		{"s", []string{"ystem:masters", "re"}, []string{"sre"}},
		{"system:", []string{"masters"}, []string{}},
		{"", []string{"system:masters", "readers"}, []string{"readers"}},
		{"oidc:", []string{"system:masters", "readers"}, []string{"oidc:readers"}},
	} {
		if got := oidcGroups(tc.claimed, tc.prefix); !slices.Equal(got, tc.want) {
			t.Errorf("prefix %q, groups %q: got %q, want %q", tc.prefix, tc.claimed, got, tc.want)
		}
	}
}

// Only a JWT signed with a public-key algorithm can be an issuer's: "none", HMAC and an
// empty signature are not, whatever the claims say.
func TestSignedWithPublicKey(t *testing.T) {
	issuer := newTestIssuer(t, "https://kubernetes.default.svc", "k1")
	signed := issuer.token(t, []string{"a"}, time.Now().Add(time.Hour), nil)
	head := func(alg string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"` + alg + `"}`))
	}
	payload := strings.Split(signed, ".")[1]
	for token, want := range map[string]bool{
		signed:                                  true,
		head("none") + "." + payload + ".":      false,
		head("none") + "." + payload + ".c2ln":  false,
		head("HS256") + "." + payload + ".c2ln": false,
		head("RS256") + "." + payload + ".":     false,
		"opaque":                                false,
	} {
		if got := SignedWithPublicKey(token); got != want {
			t.Errorf("%.40s…: got %v, want %v", token, got, want)
		}
	}
}
