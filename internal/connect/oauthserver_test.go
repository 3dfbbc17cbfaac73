package connect_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"
)

// authServer is a small OAuth 2.1 authorization server for the connect package's own
// tests: code flow with S256 PKCE (the user approves at once, as subject "user-1"),
// refresh tokens rotated at every use, RFC 7009 revocation. The end-to-end tests use
// the test token service instead.
type authServer struct {
	srv *httptest.Server

	mu        sync.Mutex
	codes     map[string]codeGrant
	refresh   map[string]bool // live refresh tokens
	issued    []string
	refreshes int
	revoked   []string
	lifetime  time.Duration
	// registered counts dynamic registrations, by redirect URI.
	registered map[string]int
}

type codeGrant struct {
	clientID, redirectURI, challenge, resource string
}

func startAuthServer(t *testing.T) *authServer {
	t.Helper()
	a := &authServer{codes: map[string]codeGrant{}, refresh: map[string]bool{}, lifetime: time.Hour, registered: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	mux.HandleFunc("POST /revoke", a.revoke)
	mux.HandleFunc("POST /register", a.register)
	a.srv = httptest.NewTLSServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *authServer) next(prefix string) string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return prefix + "-" + base64.RawURLEncoding.EncodeToString(b)
}

func (a *authServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") == "" {
		http.Error(w, "want a code request with S256 PKCE and a resource", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	code := a.next("code")
	a.codes[code] = codeGrant{clientID: q.Get("client_id"), redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), resource: q.Get("resource")}
	a.mu.Unlock()
	target, _ := url.Parse(q.Get("redirect_uri"))
	back := target.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	target.RawQuery = back.Encode()
	http.Redirect(w, r, target.String(), http.StatusFound)
}

func (a *authServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		g, ok := a.codes[r.PostForm.Get("code")]
		delete(a.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		clientID, _, basic := r.BasicAuth()
		if !basic {
			clientID = r.PostForm.Get("client_id")
		}
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || r.PostForm.Get("redirect_uri") != g.redirectURI || clientID != g.clientID {
			oauthError(w, "invalid_grant")
			return
		}
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		if !a.refresh[rt] {
			oauthError(w, "invalid_grant")
			return
		}
		delete(a.refresh, rt) // rotated: a refresh token works once
		a.refreshes++
	default:
		oauthError(w, "unsupported_grant_type")
		return
	}
	access, refresh := a.next("access"), a.next("refresh")
	a.refresh[refresh] = true
	a.issued = append(a.issued, access, refresh)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": access, "refresh_token": refresh, "token_type": "Bearer", "expires_in": int(a.lifetime / time.Second)})
}

func (a *authServer) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.revoked = append(a.revoked, r.PostForm.Get("token"))
	delete(a.refresh, r.PostForm.Get("token"))
}

// revokeAll makes every refresh token unusable, as a user revoking the grant at the
// authorization server would.
func (a *authServer) revokeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refresh = map[string]bool{}
}

func (a *authServer) counts() (refreshes int, issued, revoked []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refreshes, append([]string(nil), a.issued...), append([]string(nil), a.revoked...)
}

func oauthError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

// register is RFC 7591 for public clients: any redirect URI, a new client_id each time.
func (a *authServer) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.RedirectURIs) != 1 || req.AuthMethod != "none" {
		oauthError(w, "invalid_client_metadata")
		return
	}
	a.mu.Lock()
	a.registered[req.RedirectURIs[0]]++
	id := a.next("client")
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"client_id": id, "redirect_uris": req.RedirectURIs})
}

func (a *authServer) registrations(redirectURI string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.registered[redirectURI]
}
