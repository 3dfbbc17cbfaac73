package tokenservice_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
)

// post sends a token request form as any OAuth client would, and decodes the answer.
func post(t *testing.T, ts *tokenservice.Server, form url.Values, id, secret string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.TokenEndpoint(), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := ts.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func exchangeForm(subject string) url.Values {
	return url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":      {subject},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:jwt"},
		"resource":           {"https://remote.example/mcp"},
		"audience":           {"remote"},
	}
}

func start(t *testing.T, o tokenservice.Options) (*tokenservice.Server, *tokenservice.TrustedIssuer) {
	cluster := tokenservice.NewTrustedIssuer(t, "https://kubernetes.default.svc")
	o.Trusted = append(o.Trusted, cluster)
	o.Clients = append(o.Clients, tokenservice.Client{ID: "c", Secret: "s"})
	return tokenservice.Start(t, o), cluster
}

func TestCallerCredentials_TokenServiceDefaultsTheRequestedTokenType(t *testing.T) {
	ts, cluster := start(t, tokenservice.Options{TLS: true})
	status, body := post(t, ts, exchangeForm(cluster.ServiceAccountToken(t, "agents", "alice", "u1", "gw")), "c", "s")
	if status != http.StatusOK || body["issued_token_type"] != "urn:ietf:params:oauth:token-type:access_token" || body["token_type"] != "Bearer" {
		t.Fatalf("status %d, body %v", status, body)
	}
	if ts.Exchanges("system:serviceaccount:agents:alice") != 1 || len(ts.IssuedTokens()) != 1 || ts.IssuedTokens()[0] != body["access_token"] {
		t.Fatal("the exchange was not counted or its token not recorded")
	}
	if !strings.HasPrefix(ts.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL = %s", ts.URL())
	}
}

func TestCallerCredentials_TokenServiceRefusesUntrustedTokens(t *testing.T) {
	ts, cluster := start(t, tokenservice.Options{})
	cluster.Audiences = []string{"gw"}
	stranger := tokenservice.NewTrustedIssuer(t, "https://elsewhere.example")
	cases := map[string]string{
		"expired":        cluster.Mint(t, map[string]any{"sub": "x", "aud": "gw", "exp": time.Now().Add(-time.Second).Unix()}),
		"other audience": cluster.ServiceAccountToken(t, "agents", "alice", "u1", "other"),
		"other issuer":   stranger.ServiceAccountToken(t, "agents", "alice", "u1", "gw"),
		"not a JWT":      "opaque",
		"no subject":     cluster.Mint(t, map[string]any{"aud": "gw"}),
		"forged issuer":  stranger.Mint(t, map[string]any{"sub": "x", "aud": "gw", "iss": cluster.URL}),
	}
	for name, tok := range cases {
		if status, body := post(t, ts, exchangeForm(tok), "c", "s"); status == http.StatusOK {
			t.Errorf("%s: accepted (%v)", name, body)
		}
	}
	if ts.TotalExchanges() != 0 || ts.RefusedTokens() != len(cases) {
		t.Fatalf("%d exchanges, %d refused", ts.TotalExchanges(), ts.RefusedTokens())
	}
	if status, _ := post(t, ts, exchangeForm(cluster.ServiceAccountToken(t, "agents", "alice", "u1", "gw")), "c", "wrong"); status == http.StatusOK {
		t.Fatal("a wrong client secret was accepted")
	}
	if ts.ClientAuthFailures() != 1 {
		t.Fatalf("%d client authentication failures", ts.ClientAuthFailures())
	}
}

func TestCallerCredentials_TokenServiceServesItsKeys(t *testing.T) {
	ts, _ := start(t, tokenservice.Options{})
	resp, err := http.Get(ts.JWKSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 1 || set.Keys[0].KeyID != ts.Keys().Keys[0].KeyID {
		t.Fatalf("keys = %+v", set.Keys)
	}
}
