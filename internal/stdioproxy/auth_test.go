package stdioproxy

import (
	"net/http"
	"strings"
	"testing"
)

const testToken = "Zk3v9Qm1xW7pL2sN8bT4yR6uE0aH5cJ1dF3gK9oP2iM"

// With a token, /mcp answers 401 to a request without it or with another one, before
// anything reaches the stdio server, and serves the one that carries it; /healthz and
// /readyz stay open for the kubelet (R8).
func TestBridgeRefusesRequestsWithoutItsToken(t *testing.T) {
	tb := startBridge(t, fakeServerArgv("serve"), Options{Token: testToken})
	tb.waitRunning(t)

	body := request(1, "echo", map[string]any{"k": "v"})
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "Bearer " + testToken[1:], "Bearer " + testToken + "x",
		"Basic " + testToken, testToken, "Bearer " + strings.ToUpper(testToken)} {
		var headers []string
		if auth != "" {
			headers = []string{"Authorization", auth}
		}
		a := post(t, tb.url, body, headers...)
		if a.Status != http.StatusUnauthorized {
			t.Errorf("Authorization %q: HTTP %d %s, want 401", auth, a.Status, a.Raw)
		}
		if strings.Contains(string(a.Raw), testToken) {
			t.Errorf("the refusal shows the token: %s", a.Raw)
		}
		if a.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: a 401 without WWW-Authenticate", auth)
		}
	}
	// Nothing of the refused requests reached the child.
	seen := post(t, tb.url, request("seen", "seen", nil), "Authorization", "Bearer "+testToken)
	if strings.Contains(string(seen.Raw), `"k"`) {
		t.Errorf("a refused request reached the stdio server: %s", seen.Raw)
	}

	for _, auth := range []string{"Bearer " + testToken, "bearer " + testToken} {
		a := post(t, tb.url, body, "Authorization", auth)
		if params, _ := echoOf(t, a); params["k"] != "v" {
			t.Errorf("Authorization %q: answer %s", auth, a.Raw)
		}
	}
	for _, path := range []string{PathHealthz, PathReadyz} {
		resp, err := http.Get(tb.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without the token: HTTP %d, want 200", path, resp.StatusCode)
		}
	}
}

func TestTakeTokenFromEnv(t *testing.T) {
	t.Setenv(TokenEnv, "  "+testToken+"\n")
	token, set, err := TakeTokenFromEnv()
	if err != nil || !set || token != testToken {
		t.Fatalf("TakeTokenFromEnv = %q, %v, %v", token, set, err)
	}
	if _, still := lookupEnv(TokenEnv); still {
		t.Errorf("%s is still in the environment the stdio command would inherit", TokenEnv)
	}
	for _, bad := range []string{"", "   ", "short"} {
		t.Setenv(TokenEnv, bad)
		if _, set, err := TakeTokenFromEnv(); !set || err == nil {
			t.Errorf("token %q: set %v, err %v; want an error", bad, set, err)
		}
	}
}
