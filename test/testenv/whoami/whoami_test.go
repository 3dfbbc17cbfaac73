package whoami_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/callercred"
	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
	"github.com/cantus-dev/cantus-operator/test/testenv/whoami"
)

const audience = "whoami-api"

// session is an mcp-go client whose Authorization header the test sets per request.
type session struct {
	c      *client.Client
	header atomic.Value
}

func open(t *testing.T, url, auth string) (*session, error) {
	t.Helper()
	s := &session{}
	s.header.Store(auth)
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaderFunc(func(context.Context) map[string]string {
		return map[string]string{"Authorization": s.header.Load().(string)}
	}))
	if err != nil {
		t.Fatal(err)
	}
	s.c = client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	ctx := context.Background()
	if err := s.c.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = s.c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "whoami-test", Version: "0"}
	if _, err := s.c.Initialize(ctx, req); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *session) whoami(t *testing.T) (string, error) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = whoami.ToolName
	res, err := s.c.CallTool(context.Background(), req)
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("whoami answered %+v", res)
	}
	return res.Content[0].(mcp.TextContent).Text, nil
}

// world is a token service, a remote that trusts it, and an exchanger for the remote.
type world struct {
	ts      *tokenservice.Server
	remote  *whoami.Server
	cluster *tokenservice.TrustedIssuer
	ex      *callercred.Exchanger
}

func newWorld(t *testing.T, lifetime time.Duration, actor bool) *world {
	t.Helper()
	cluster := tokenservice.NewTrustedIssuer(t, "https://kubernetes.default.svc")
	ts := tokenservice.Start(t, tokenservice.Options{
		Trusted:       []*tokenservice.TrustedIssuer{cluster},
		Clients:       []tokenservice.Client{{ID: "gw", Secret: "pw", ProbeAudience: []string{audience}}},
		TokenLifetime: lifetime,
	})
	remote := whoami.Start(t, whoami.Options{Issuer: ts.URL(), Keys: ts.Keys(), Audience: audience})
	dir := t.TempDir()
	cfg := &adapterconfig.TokenExchange{
		TokenEndpoint: ts.TokenEndpoint(), Resource: remote.URL(), Audience: audience,
		ClientID: "gw", ClientSecretFile: writeFile(t, dir, "secret", "pw"),
	}
	if actor {
		cfg.ActorTokenFile = writeFile(t, dir, "actor", cluster.ServiceAccountToken(t, "library", "gateway", "gw-uid", "tokens"))
	}
	ex, err := callercred.NewExchanger(cfg, callercred.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &world{ts: ts, remote: remote, cluster: cluster, ex: ex}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := dir + "/" + name
	if err := osWriteFile(path, content); err != nil {
		t.Fatal(err)
	}
	return path
}

func (w *world) exchanged(t *testing.T, name string) string {
	t.Helper()
	uid := "uid-" + name
	tok, err := w.ex.Token(context.Background(), adapterconfig.ServiceAccountCaller("agents/"+name, uid),
		w.cluster.ServiceAccountToken(t, "agents", name, uid, "gateway"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestCallerCredentials_RemoteSeesEachCallersSubject(t *testing.T) {
	w := newWorld(t, 0, true)
	for _, name := range []string{"alice", "bob"} {
		tok := w.exchanged(t, name)
		s, err := open(t, w.remote.URL(), "Bearer "+tok)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.whoami(t)
		if err != nil {
			t.Fatal(err)
		}
		want := "remote saw subject=system:serviceaccount:agents:" + name + " act=system:serviceaccount:library:gateway"
		if got != want {
			t.Fatalf("whoami = %q; want %q", got, want)
		}
		if n := w.remote.Calls("system:serviceaccount:agents:" + name); n != 1 {
			t.Fatalf("%d calls counted", n)
		}
		creds := w.remote.Credentials()
		if creds[len(creds)-1] != tok {
			t.Fatal("the remote did not record the token it was sent")
		}
	}
}

func TestCallerCredentials_RemoteChecksEveryRequest(t *testing.T) {
	w := newWorld(t, 2*time.Second, false)
	tok := w.exchanged(t, "alice")
	s, err := open(t, w.remote.URL(), "Bearer "+tok)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.whoami(t); err != nil || got != "remote saw subject=system:serviceaccount:agents:alice act=-" {
		t.Fatalf("whoami = %q, %v", got, err)
	}

	// In the same session: a token for the same subject but signed by someone else,
	// then the session's own token once it expired.
	s.header.Store("Bearer " + w.cluster.ServiceAccountToken(t, "agents", "alice", "uid-alice", audience))
	if _, err := s.whoami(t); err == nil {
		t.Fatal("a token the token service did not sign was accepted")
	}
	s.header.Store("Bearer " + tok)
	// Waits out the token's real lifetime: the remote judges expiry by the clock.
	time.Sleep(2100 * time.Millisecond)
	if _, err := s.whoami(t); err == nil {
		t.Fatal("an expired token was accepted")
	}
	if w.remote.Rejected() != 2 {
		t.Fatalf("%d requests rejected; want 2", w.remote.Rejected())
	}
}

func TestCallerCredentials_RemoteRefusesOtherAudiencesAndIssuers(t *testing.T) {
	w := newWorld(t, 0, false)
	other := whoami.Start(t, whoami.Options{Issuer: w.ts.URL(), Keys: w.ts.Keys(), Audience: "another-api"})
	if _, err := open(t, other.URL(), "Bearer "+w.exchanged(t, "alice")); err == nil {
		t.Fatal("a token for another audience was accepted")
	}
	elsewhere := whoami.Start(t, whoami.Options{Issuer: "https://elsewhere.example", Keys: w.ts.Keys(), Audience: audience})
	if _, err := open(t, elsewhere.URL(), "Bearer "+w.exchanged(t, "alice")); err == nil {
		t.Fatal("a token of another issuer was accepted")
	}
	if _, err := open(t, w.remote.URL(), ""); err == nil {
		t.Fatal("a request without a credential was accepted")
	}
}

func TestCallerCredentials_RemoteAnswers401WithInvalidToken(t *testing.T) {
	w := newWorld(t, 0, false)
	req, _ := newPost(w.remote.URL(), "Bearer not-a-token")
	resp, err := w.remote.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `Bearer error="invalid_token"`) {
		t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

func TestCallerCredentials_RemoteTakesPerCallerAPIKeys(t *testing.T) {
	for _, mode := range []struct{ header, prefix, send string }{
		{"", "", "Authorization"},
		{"X-Api-Key", "", "X-Api-Key"},
	} {
		remote := whoami.Start(t, whoami.Options{APIKeys: map[string]string{"key-of-alice": "alice", "key-of-bob": "bob"}, APIKeyHeader: mode.header, APIKeyPrefix: mode.prefix})
		for key, sub := range map[string]string{"key-of-alice": "alice", "key-of-bob": "bob"} {
			value := key
			if mode.send == "Authorization" {
				value = "Bearer " + key
			}
			got, err := callWithHeader(t, remote.URL(), mode.send, value)
			if err != nil {
				t.Fatal(err)
			}
			if got != "remote saw subject="+sub+" act=-" {
				t.Fatalf("%s: whoami = %q", mode.send, got)
			}
		}
		if _, err := callWithHeader(t, remote.URL(), mode.send, "unknown"); err == nil {
			t.Fatalf("%s: an unknown key was accepted", mode.send)
		}
		if remote.Requests("alice") == 0 || remote.Requests("bob") == 0 {
			t.Fatal("requests were not counted per subject")
		}
	}
}

func TestCallerCredentials_ProbeIdentityByClientCredentials(t *testing.T) {
	w := newWorld(t, 0, false)
	tok := clientCredentialsToken(t, w.ts, "gw", "pw")
	s, err := open(t, w.remote.URL(), "Bearer "+tok)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.whoami(t); err != nil || got != "remote saw subject=gw act=-" {
		t.Fatalf("whoami = %q, %v", got, err)
	}
	if w.ts.ClientCredentialsGrants("gw") != 1 || w.ts.TotalExchanges() != 0 {
		t.Fatal("the client credentials grant was not counted apart from exchanges")
	}
}
