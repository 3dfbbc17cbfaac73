package tokenservice_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/oauth2"

	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
)

// documentServer serves a Client ID Metadata Document over HTTPS at /client.json, made
// by doc from the document's own URL.
func documentServer(t *testing.T, doc func(self string) map[string]any) *httptest.Server {
	t.Helper()
	var self atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/client.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc(self.Load().(string)))
	}))
	t.Cleanup(srv.Close)
	self.Store(srv.URL + "/client.json")
	return srv
}

func document(clientID string, redirectURIs ...string) map[string]any {
	return map[string]any{
		"client_id": clientID, "client_name": "cantus gateway", "redirect_uris": redirectURIs,
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": "none",
	}
}

func publicConfig(ts *tokenservice.Server, clientID, redirect string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: clientID, RedirectURL: redirect,
		Endpoint: oauth2.Endpoint{AuthURL: ts.AuthorizationEndpoint(), TokenURL: ts.TokenEndpoint(), AuthStyle: oauth2.AuthStyleInParams},
	}
}

func TestMetadataDocumentClientCompletesTheCodeFlow(t *testing.T) {
	docs := documentServer(t, func(self string) map[string]any { return document(self, callback) })
	clientID := docs.URL + "/client.json"
	ts := startAS(t, tokenservice.Options{HTTPClient: docs.Client()})
	tok := connect(t, ts, publicConfig(ts, clientID, callback))
	if c := parse(t, ts, tok.AccessToken); c.Subject != "alice" || c.ClientID != clientID {
		t.Fatalf("claims %+v", c)
	}
	if ts.MetadataDocumentFetches(clientID) == 0 || ts.MetadataDocumentsRefused() != 0 {
		t.Fatalf("%d fetches, %d refused", ts.MetadataDocumentFetches(clientID), ts.MetadataDocumentsRefused())
	}
	// A public client refreshes with its client_id alone.
	second, err := publicConfig(ts, clientID, callback).TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil || second.RefreshToken == tok.RefreshToken {
		t.Fatalf("refresh: %v", err)
	}
}

func TestMetadataDocumentClientIsRefusedWhenTheDocumentDoesNotFit(t *testing.T) {
	cases := map[string]struct {
		doc      func(self string) map[string]any
		redirect string
		noRoots  bool
	}{
		"client_id is not the URL": {doc: func(string) map[string]any { return document("https://elsewhere.example/client.json", callback) }, redirect: callback},
		"redirect_uri not listed":  {doc: func(self string) map[string]any { return document(self, callback) }, redirect: "http://127.0.0.1:9/other"},
		"no redirect_uris":         {doc: func(self string) map[string]any { return document(self) }, redirect: callback},
		"a secret method": {doc: func(self string) map[string]any {
			d := document(self, callback)
			d["token_endpoint_auth_method"] = "client_secret_basic"
			return d
		}, redirect: callback},
		"untrusted certificate": {doc: func(self string) map[string]any { return document(self, callback) }, redirect: callback, noRoots: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			docs := documentServer(t, c.doc)
			clientID := docs.URL + "/client.json"
			o := tokenservice.Options{HTTPClient: docs.Client()}
			if c.noRoots {
				o.HTTPClient = nil
			}
			ts := startAS(t, o)
			authURL := publicConfig(ts, clientID, c.redirect).AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
			cb, err := ts.Authorize(context.Background(), nil, authURL, "alice", "wonderland")
			// The server must not redirect to an unverified redirect_uri, not even with an
			// error: it answers the browser itself.
			if err == nil || cb != nil {
				t.Fatalf("authorized: %v, %v", cb, err)
			}
			if ts.CodesIssued() != 0 || ts.LoginFailures() != 0 {
				t.Fatal("the login page was reached")
			}
			if name != "redirect_uri not listed" && ts.MetadataDocumentsRefused() == 0 {
				t.Fatal("the refusal was not counted")
			}
		})
	}
}

func TestDynamicRegistrationMakesAClientThatCompletesTheCodeFlow(t *testing.T) {
	ts := startAS(t, tokenservice.Options{})
	for _, method := range []string{"none", "client_secret_basic"} {
		body, _ := json.Marshal(map[string]any{"redirect_uris": []string{callback}, "token_endpoint_auth_method": method, "client_name": "gw"})
		resp, err := http.Post(ts.RegistrationEndpoint(), "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var reg struct {
			ClientID     string `json:"client_id"`
			ClientSecret string `json:"client_secret"`
		}
		err = json.NewDecoder(resp.Body).Decode(&reg)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusCreated || reg.ClientID == "" || (reg.ClientSecret == "") != (method == "none") {
			t.Fatalf("%s: %d %+v %v", method, resp.StatusCode, reg, err)
		}
		cfg := publicConfig(ts, reg.ClientID, callback)
		if method != "none" {
			cfg.ClientSecret, cfg.Endpoint.AuthStyle = reg.ClientSecret, oauth2.AuthStyleInHeader
		}
		if c := parse(t, ts, connect(t, ts, cfg).AccessToken); c.ClientID != reg.ClientID || c.Subject != "alice" {
			t.Fatalf("%s: claims %+v", method, c)
		}
	}
	resp, err := http.Post(ts.RegistrationEndpoint(), "application/json", strings.NewReader(`{"client_name":"no redirect"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || ts.Registrations() != 2 {
		t.Fatalf("without redirect_uris: %d; %d registrations", resp.StatusCode, ts.Registrations())
	}
}

// TestLoginFollowsTheFlowToTheClientsCallback drives the flow as a person would: a
// connect URL served by the client (over HTTPS, by another CA) redirects to the
// service, the person signs in, and the client's callback exchanges the code.
func TestLoginFollowsTheFlowToTheClientsCallback(t *testing.T) {
	var ts *tokenservice.Server
	var cfg *oauth2.Config
	verifier := oauth2.GenerateVerifier()
	var got atomic.Value
	client := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/connect":
			http.SetCookie(w, &http.Cookie{Name: "flow", Value: "f-1", Path: "/"})
			http.Redirect(w, r, cfg.AuthCodeURL("st-9", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource)), http.StatusFound)
		case "/callback":
			if c, err := r.Cookie("flow"); err != nil || c.Value != "f-1" || r.URL.Query().Get("state") != "st-9" {
				http.Error(w, "not the flow this browser started", http.StatusBadRequest)
				return
			}
			ctx := context.WithValue(r.Context(), oauth2.HTTPClient, ts.HTTPClient())
			tok, err := cfg.Exchange(ctx, r.URL.Query().Get("code"), oauth2.VerifierOption(verifier))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			got.Store(tok)
			_, _ = io.WriteString(w, "connected")
		}
	}))
	defer client.Close()
	ts = startAS(t, tokenservice.Options{TLS: true, Clients: []tokenservice.Client{{ID: "gw", Public: true, RedirectURIs: []string{client.URL + "/callback"}}}})
	cfg = publicConfig(ts, "gw", client.URL+"/callback")

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: client.Certificate().Raw})
	resp, err := ts.Login(context.Background(), ts.BrowserClient(caPEM), client.URL+"/connect", "alice", "wonderland")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "connected" {
		t.Fatalf("callback answered %d %s", resp.StatusCode, body)
	}
	tok, _ := got.Load().(*oauth2.Token)
	if tok == nil || parse(t, ts, tok.AccessToken).Subject != "alice" {
		t.Fatal("the callback got no token for alice")
	}
	if _, err := ts.Login(context.Background(), ts.BrowserClient(caPEM), client.URL+"/connect", "alice", "nope"); err == nil {
		t.Fatal("a wrong password reached the callback")
	}
}
