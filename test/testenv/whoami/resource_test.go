package whoami_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
	"github.com/cantus-dev/cantus-operator/test/testenv/whoami"
)

const redirect = "http://127.0.0.1:9/callback"

// connected is an authorization server with the user alice and a remote that names it
// as its authorization server.
func connected(t *testing.T) (*tokenservice.Server, *whoami.Server) {
	t.Helper()
	ts := tokenservice.Start(t, tokenservice.Options{
		Users:   map[string]string{"alice": "wonderland"},
		Clients: []tokenservice.Client{{ID: "gw", Public: true, RedirectURIs: []string{redirect}}},
	})
	remote := whoami.Start(t, whoami.Options{
		Issuer: ts.URL(), Keys: ts.Keys(), AuthorizationServers: []string{ts.URL()},
		Scopes: []string{"mcp"}, Revoked: ts.AccessTokenRevoked,
	})
	return ts, remote
}

// userToken runs the code flow for alice with the resource parameter.
func userToken(t *testing.T, ts *tokenservice.Server, resource string) *oauth2.Token {
	t.Helper()
	cfg := &oauth2.Config{ClientID: "gw", RedirectURL: redirect, Endpoint: oauth2.Endpoint{
		AuthURL: ts.AuthorizationEndpoint(), TokenURL: ts.TokenEndpoint(), AuthStyle: oauth2.AuthStyleInParams,
	}}
	verifier := oauth2.GenerateVerifier()
	authURL := cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource))
	cb, err := ts.Authorize(context.Background(), nil, authURL, "alice", "wonderland")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cfg.Exchange(context.Background(), cb.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestRemoteServesItsProtectedResourceMetadata(t *testing.T) {
	ts, remote := connected(t)
	u, _ := url.Parse(remote.URL())
	for _, path := range []string{remote.ResourceMetadataURL(), u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			Scopes               []string `json:"scopes_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&m)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
		}
		if m.Resource != remote.URL() || !slices.Equal(m.AuthorizationServers, []string{ts.URL()}) || !slices.Equal(m.Scopes, []string{"mcp"}) {
			t.Fatalf("%s: %+v", path, m)
		}
	}
	if !strings.HasSuffix(remote.ResourceMetadataURL(), "/.well-known/oauth-protected-resource/mcp") {
		t.Fatalf("ResourceMetadataURL = %s", remote.ResourceMetadataURL())
	}
}

func TestRemoteAnswers401WithItsResourceMetadata(t *testing.T) {
	_, remote := connected(t)
	for auth, want := range map[string]string{
		"":                 `Bearer resource_metadata="` + remote.ResourceMetadataURL() + `"`,
		"Bearer not-a-JWT": `error="invalid_token"`,
	} {
		req, _ := newPost(remote.URL(), auth)
		resp, err := remote.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		challenge := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(challenge, want) ||
			!strings.Contains(challenge, `resource_metadata="`+remote.ResourceMetadataURL()+`"`) {
			t.Fatalf("%q: %d, WWW-Authenticate %q", auth, resp.StatusCode, challenge)
		}
	}
}

func TestRemoteAcceptsTheUsersTokenForItsResource(t *testing.T) {
	ts, remote := connected(t)
	tok := userToken(t, ts, remote.URL())
	s, err := open(t, remote.URL(), "Bearer "+tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.whoami(t); err != nil || got != "remote saw subject=alice act=-" {
		t.Fatalf("whoami = %q, %v", got, err)
	}
	if _, err := open(t, remote.URL(), "Bearer "+userToken(t, ts, "https://other.example/mcp").AccessToken); err == nil {
		t.Fatal("a token for another resource was accepted")
	}
}

func TestRemoteRefusesARevokedToken(t *testing.T) {
	ts, remote := connected(t)
	tok := userToken(t, ts, remote.URL())
	form := url.Values{"token": {tok.RefreshToken}, "client_id": {"gw"}}
	resp, err := http.PostForm(ts.RevocationEndpoint(), form)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || ts.Revocations() != 1 {
		t.Fatalf("revocation: %d, %d revocations", resp.StatusCode, ts.Revocations())
	}
	if _, err := open(t, remote.URL(), "Bearer "+tok.AccessToken); err == nil {
		t.Fatal("the access token of a revoked grant was accepted")
	}
}
