package tokenservice_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"

	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
)

const (
	resource = "https://remote.example/mcp"
	callback = "http://127.0.0.1:9/callback" // never opened: Authorize stops before it
)

// startAS runs a token service with the user alice and a confidential client "app".
func startAS(t *testing.T, o tokenservice.Options) *tokenservice.Server {
	t.Helper()
	o.Users = map[string]string{"alice": "wonderland"}
	o.Clients = append(o.Clients, tokenservice.Client{ID: "app", Secret: "app-secret", RedirectURIs: []string{callback}})
	return tokenservice.Start(t, o)
}

func appConfig(ts *tokenservice.Server) *oauth2.Config {
	return &oauth2.Config{
		ClientID: "app", ClientSecret: "app-secret", RedirectURL: callback,
		Endpoint: oauth2.Endpoint{AuthURL: ts.AuthorizationEndpoint(), TokenURL: ts.TokenEndpoint(), AuthStyle: oauth2.AuthStyleInHeader},
	}
}

// authorize runs the browser side of a code flow for alice and returns the code.
func authorize(t *testing.T, ts *tokenservice.Server, cfg *oauth2.Config, verifier string) string {
	t.Helper()
	authURL := cfg.AuthCodeURL("st-1", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource))
	cb, err := ts.Authorize(context.Background(), nil, authURL, "alice", "wonderland")
	if err != nil {
		t.Fatal(err)
	}
	if cb.Query().Get("state") != "st-1" || cb.Query().Get("code") == "" || !strings.HasPrefix(cb.String(), cfg.RedirectURL+"?") {
		t.Fatalf("redirected to %s", cb)
	}
	return cb.Query().Get("code")
}

// connect runs a whole code flow for alice.
func connect(t *testing.T, ts *tokenservice.Server, cfg *oauth2.Config) *oauth2.Token {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	tok, err := cfg.Exchange(context.Background(), authorize(t, ts, cfg, verifier), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type claims struct {
	jwt.Claims
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
}

func parse(t *testing.T, ts *tokenservice.Server, raw string) claims {
	t.Helper()
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatalf("not a JWT: %v", err)
	}
	var c claims
	if err := tok.Claims(ts.Keys().Keys[0].Key, &c); err != nil {
		t.Fatalf("signature: %v", err)
	}
	return c
}

func TestAuthorizationCodeFlowWithPKCEIssuesAJWTForTheResource(t *testing.T) {
	ts := startAS(t, tokenservice.Options{})
	cfg := appConfig(ts)
	tok := connect(t, ts, cfg)

	c := parse(t, ts, tok.AccessToken)
	if c.Issuer != ts.URL() || c.Subject != "alice" || !slices.Equal(c.Audience, jwt.Audience{resource}) || c.ClientID != "app" || c.ID == "" {
		t.Fatalf("claims %+v", c)
	}
	if c.Expiry == nil || !c.Expiry.Time().After(time.Now()) || !strings.Contains(c.Scope, "offline_access") {
		t.Fatalf("exp %v, scope %q", c.Expiry, c.Scope)
	}
	if tok.RefreshToken == "" || tok.Extra("id_token") != nil {
		t.Fatalf("refresh token %q, id_token %v", tok.RefreshToken, tok.Extra("id_token"))
	}
	last := ts.LastRequest()
	if ts.CodesIssued() != 1 || ts.Grants("authorization_code") != 1 || last.Subject != "alice" || !slices.Equal(last.Resource, []string{resource}) {
		t.Fatalf("codes %d, code grants %d, last %+v", ts.CodesIssued(), ts.Grants("authorization_code"), last)
	}
	if !slices.Equal(ts.IssuedTokens(), []string{tok.AccessToken}) || !slices.Equal(ts.IssuedRefreshTokens(), []string{tok.RefreshToken}) || len(ts.IssuedCodes()) != 1 {
		t.Fatal("the issued tokens were not recorded")
	}
}

func TestAuthorizationCodeFlowWithOpenIDAddsAnIDToken(t *testing.T) {
	ts := startAS(t, tokenservice.Options{})
	cfg := appConfig(ts)
	cfg.Scopes = []string{"openid", "files:read"}
	tok := connect(t, ts, cfg)
	idToken, _ := tok.Extra("id_token").(string)
	if idToken == "" {
		t.Fatal("no ID token for the openid scope")
	}
	id := parse(t, ts, idToken)
	access := parse(t, ts, tok.AccessToken)
	if id.Subject != "alice" || !id.Audience.Contains("app") || !access.Audience.Contains(resource) || access.Scope != "openid files:read offline_access" {
		t.Fatalf("ID token %+v, access token %+v", id, access)
	}
}

func TestAuthorizationCodeExchangeRefusesAWrongOrMissingVerifier(t *testing.T) {
	ts := startAS(t, tokenservice.Options{})
	cfg := appConfig(ts)
	ctx := context.Background()
	for name, opts := range map[string][]oauth2.AuthCodeOption{
		"wrong verifier": {oauth2.VerifierOption(oauth2.GenerateVerifier())},
		"no verifier":    nil,
	} {
		verifier := oauth2.GenerateVerifier()
		code := authorize(t, ts, cfg, verifier)
		if _, err := cfg.Exchange(ctx, code, opts...); err == nil {
			t.Fatalf("%s: the code was exchanged", name)
		}
		// A refused code is spent: the right verifier comes too late.
		if _, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier)); err == nil {
			t.Fatalf("%s: the code was exchanged after a refused try", name)
		}
	}
	if ts.PKCEFailures() != 2 || ts.Grants("authorization_code") != 0 || len(ts.IssuedTokens()) != 0 {
		t.Fatalf("%d PKCE failures, %d code grants", ts.PKCEFailures(), ts.Grants("authorization_code"))
	}
}

func TestAuthorizationRequiresPKCEWithS256(t *testing.T) {
	ts := startAS(t, tokenservice.Options{})
	cfg := appConfig(ts)
	for name, opts := range map[string][]oauth2.AuthCodeOption{
		"no challenge": nil,
		"plain":        {oauth2.SetAuthURLParam("code_challenge", "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopq"), oauth2.SetAuthURLParam("code_challenge_method", "plain")},
	} {
		cb, err := ts.Authorize(context.Background(), nil, cfg.AuthCodeURL("s", opts...), "alice", "wonderland")
		if err == nil || cb == nil || cb.Query().Get("error") != "invalid_request" || cb.Query().Get("code") != "" {
			t.Fatalf("%s: %v, redirected to %v", name, err, cb)
		}
	}
	if ts.CodesIssued() != 0 {
		t.Fatal("a code was issued")
	}
}

func TestLoginRefusesAWrongPassword(t *testing.T) {
	ts := startAS(t, tokenservice.Options{})
	authURL := appConfig(ts).AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	for _, login := range [][2]string{{"alice", "wrong"}, {"mallory", "wonderland"}, {"", ""}} {
		if _, err := ts.Authorize(context.Background(), nil, authURL, login[0], login[1]); !errors.Is(err, tokenservice.ErrLoginRefused) {
			t.Fatalf("%v: %v", login, err)
		}
	}
	if ts.LoginFailures() != 3 || ts.CodesIssued() != 0 {
		t.Fatalf("%d login failures, %d codes", ts.LoginFailures(), ts.CodesIssued())
	}
}

// refresh posts a refresh_token grant as client app and returns the status and answer.
func refresh(t *testing.T, ts *tokenservice.Server, refreshToken string) (int, map[string]any) {
	t.Helper()
	return post(t, ts, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}}, "app", "app-secret")
}

func TestRefreshAfterExpiryRotatesTheRefreshToken(t *testing.T) {
	ts := startAS(t, tokenservice.Options{TokenLifetime: 2 * time.Second})
	cfg := appConfig(ts)
	first := connect(t, ts, cfg)
	exp := parse(t, ts, first.AccessToken).Expiry.Time()
	// Waits out the access token's real lifetime: x/oauth2 judges expiry by the clock.
	time.Sleep(time.Until(exp) + 100*time.Millisecond)

	// x/oauth2 refreshes an expired token by itself.
	second, err := cfg.TokenSource(context.Background(), first).Token()
	if err != nil {
		t.Fatal(err)
	}
	if second.AccessToken == first.AccessToken || second.RefreshToken == "" || second.RefreshToken == first.RefreshToken {
		t.Fatal("the refresh did not issue a new access token and a new refresh token")
	}
	if c := parse(t, ts, second.AccessToken); c.Subject != "alice" || !slices.Equal(c.Audience, jwt.Audience{resource}) || !c.Expiry.Time().After(time.Now()) {
		t.Fatalf("refreshed claims %+v", c)
	}
	if status, body := refresh(t, ts, first.RefreshToken); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("the spent refresh token: %d %v", status, body)
	}
	if status, body := refresh(t, ts, second.RefreshToken); status != http.StatusOK || body["refresh_token"] == second.RefreshToken {
		t.Fatalf("the current refresh token: %d %v", status, body)
	}
	if ts.Grants("refresh_token") != 2 || ts.RefreshRefused() != 1 || ts.RefreshReuses() != 1 || len(ts.IssuedRefreshTokens()) != 3 {
		t.Fatalf("%d refreshes, %d refused, %d reuses", ts.Grants("refresh_token"), ts.RefreshRefused(), ts.RefreshReuses())
	}
}

func TestRefreshTokenReuseRevokesTheFamilyWhenAsked(t *testing.T) {
	ts := startAS(t, tokenservice.Options{RevokeOnRefreshReuse: true})
	first := connect(t, ts, appConfig(ts))
	_, body := refresh(t, ts, first.RefreshToken)
	current, _ := body["refresh_token"].(string)
	if status, _ := refresh(t, ts, first.RefreshToken); status == http.StatusOK {
		t.Fatal("the spent refresh token was accepted")
	}
	if status, _ := refresh(t, ts, current); status == http.StatusOK {
		t.Fatal("the family survived the reuse")
	}
	if !ts.AccessTokenRevoked(parse(t, ts, body["access_token"].(string)).ID) {
		t.Fatal("the family's access token was not revoked")
	}
}

// revoke posts to the revocation endpoint as client app.
func revoke(t *testing.T, ts *tokenservice.Server, token, hint, id, secret string) int {
	t.Helper()
	form := url.Values{"token": {token}}
	if hint != "" {
		form.Set("token_type_hint", hint)
	}
	req, err := http.NewRequest(http.MethodPost, ts.RevocationEndpoint(), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := ts.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestRevokedTokensStopWorking(t *testing.T) {
	ts := startAS(t, tokenservice.Options{})
	ts.SetClient(tokenservice.Client{ID: "other", Secret: "other-secret", RedirectURIs: []string{callback}})
	cfg := appConfig(ts)

	byRefresh := connect(t, ts, cfg)
	if status := revoke(t, ts, byRefresh.RefreshToken, "", "other", "other-secret"); status == http.StatusOK {
		t.Fatal("another client revoked app's refresh token")
	}
	if status := revoke(t, ts, byRefresh.RefreshToken, "refresh_token", "app", "app-secret"); status != http.StatusOK {
		t.Fatalf("revocation answered %d", status)
	}
	if status, _ := refresh(t, ts, byRefresh.RefreshToken); status == http.StatusOK {
		t.Fatal("a revoked refresh token was accepted")
	}
	if !ts.AccessTokenRevoked(parse(t, ts, byRefresh.AccessToken).ID) {
		t.Fatal("the access token of a revoked refresh token is not revoked")
	}

	byAccess := connect(t, ts, cfg)
	jti := parse(t, ts, byAccess.AccessToken).ID
	if ts.AccessTokenRevoked(jti) {
		t.Fatal("a fresh access token counts as revoked")
	}
	if status := revoke(t, ts, byAccess.AccessToken, "access_token", "app", "app-secret"); status != http.StatusOK || !ts.AccessTokenRevoked(jti) {
		t.Fatalf("revoking the access token: %d", status)
	}
	if status := revoke(t, ts, "never-issued", "", "app", "app-secret"); status != http.StatusOK {
		t.Fatalf("an unknown token: %d (RFC 7009 answers 200)", status)
	}
	if ts.Revocations() != 2 {
		t.Fatalf("%d revocations", ts.Revocations())
	}
}

func TestAuthorizationCodeUsedTwiceRevokesItsTokens(t *testing.T) {
	ts := startAS(t, tokenservice.Options{})
	cfg := appConfig(ts)
	verifier := oauth2.GenerateVerifier()
	code := authorize(t, ts, cfg, verifier)
	tok, err := cfg.Exchange(context.Background(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Exchange(context.Background(), code, oauth2.VerifierOption(verifier)); err == nil {
		t.Fatal("a code was exchanged twice")
	}
	if ts.CodeReuses() != 1 || !ts.AccessTokenRevoked(parse(t, ts, tok.AccessToken).ID) {
		t.Fatal("the reuse did not revoke the first exchange's tokens")
	}
	if status, _ := refresh(t, ts, tok.RefreshToken); status == http.StatusOK {
		t.Fatal("the first exchange's refresh token survived")
	}
}

func TestMetadataAdvertisesTheCodeFlow(t *testing.T) {
	ts := startAS(t, tokenservice.Options{})
	for _, path := range []string{ts.MetadataURL(), ts.URL() + "/.well-known/openid-configuration"} {
		resp, err := http.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Issuer            string   `json:"issuer"`
			Authorization     string   `json:"authorization_endpoint"`
			Token             string   `json:"token_endpoint"`
			Revocation        string   `json:"revocation_endpoint"`
			Registration      string   `json:"registration_endpoint"`
			Challenges        []string `json:"code_challenge_methods_supported"`
			Grants            []string `json:"grant_types_supported"`
			AuthMethods       []string `json:"token_endpoint_auth_methods_supported"`
			MetadataDocuments bool     `json:"client_id_metadata_document_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&m)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if m.Issuer != ts.URL() || m.Authorization != ts.AuthorizationEndpoint() || m.Token != ts.TokenEndpoint() ||
			m.Revocation != ts.RevocationEndpoint() || m.Registration != ts.RegistrationEndpoint() || !m.MetadataDocuments {
			t.Fatalf("%s: %+v", path, m)
		}
		if !slices.Equal(m.Challenges, []string{"S256"}) || !slices.Contains(m.Grants, "authorization_code") || !slices.Contains(m.Grants, "refresh_token") ||
			!slices.Contains(m.AuthMethods, "none") || !slices.Contains(m.AuthMethods, "client_secret_basic") {
			t.Fatalf("%s: %+v", path, m)
		}
	}
}

func TestExpiredRefreshTokenIsRefused(t *testing.T) {
	ts := startAS(t, tokenservice.Options{RefreshTokenLifetime: time.Second})
	tok := connect(t, ts, appConfig(ts))
	// Waits out the refresh token's real 1 s lifetime: the token service judges expiry by
	// the clock.
	time.Sleep(1100 * time.Millisecond)
	if status, body := refresh(t, ts, tok.RefreshToken); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("an expired refresh token: %d %v", status, body)
	}
	if ts.RefreshRefused() != 1 || ts.Grants("refresh_token") != 0 {
		t.Fatalf("%d refused, %d refreshes", ts.RefreshRefused(), ts.Grants("refresh_token"))
	}
}
