// Command callerremote serves, for `make demo`, a remote MCP server that knows who calls
// it and an OAuth token service in front of it, both on loopback: the token service
// (zitadel's op, test/testenv/tokenservice) exchanges the cluster's service-account
// tokens (RFC 8693) for tokens for the remote, and the remote (test/testenv/whoami)
// checks every token and answers its whoami tool with the subject (and actor) it saw.
// It also takes static API keys, for the per-caller Secret import and the operator's
// probe. With -connect-redirect it also serves a second remote, an RFC 9728 protected
// resource that names the token service as its authorization server, for connect mode:
// the token service then signs in -users at its login page and registers the operator
// as a client with that redirect URI; and POST /login?url=…&user=… on the -control
// address plays the user's browser, opening a connect link and signing in. It writes
// where it serves to -out as shell assignments (TOKEN_ENDPOINT=…, REMOTE=…,
// CONNECT_REMOTE=…, CONTROL=…) and serves until it is stopped.
//
//	callerremote -cluster-issuer URL -cluster-jwks FILE -client-secret-file FILE \
//	             -api-keys probe-key=cantus-probe,carol-key=carol -out FILE \
//	             [-connect-redirect URL -connect-secret-file FILE -users dave=pw]
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
	"github.com/cantus-dev/cantus-operator/test/testenv/whoami"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "callerremote:", err)
		os.Exit(1)
	}
}

func run() error {
	issuer := flag.String("cluster-issuer", "", "the cluster's service-account issuer (iss of its tokens)")
	jwksFile := flag.String("cluster-jwks", "", "file of the cluster's service-account keys (kubectl get --raw /openid/v1/jwks)")
	secretFile := flag.String("client-secret-file", "", "file of the gateway client's secret at the token service")
	clientID := flag.String("client-id", "cantus-gateway", "the gateway's client at the token service")
	audience := flag.String("audience", "whoami-remote", "the remote's audience: tokens for it are accepted")
	apiKeys := flag.String("api-keys", "", "static API keys the remote also accepts, key=subject,...")
	out := flag.String("out", "", "file to write where it serves (shell assignments)")
	redirect := flag.String("connect-redirect", "", "the operator's connect callback: the redirect URI of its client at the token service (connect mode)")
	connectSecretFile := flag.String("connect-secret-file", "", "file of the operator's connect client's secret at the token service")
	users := flag.String("users", "", "users the login page signs in, name=password,...")
	flag.Parse()
	if *issuer == "" || *jwksFile == "" || *secretFile == "" || *out == "" {
		return fmt.Errorf("-cluster-issuer, -cluster-jwks, -client-secret-file and -out are required")
	}
	cluster := &tokenservice.TrustedIssuer{URL: *issuer}
	raw, err := os.ReadFile(*jwksFile)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &cluster.Keys); err != nil {
		return fmt.Errorf("cluster keys: %w", err)
	}
	secret, err := os.ReadFile(*secretFile)
	if err != nil {
		return err
	}
	clients := []tokenservice.Client{{ID: *clientID, Secret: strings.TrimSpace(string(secret))}}
	if *redirect != "" {
		connectSecret, err := os.ReadFile(*connectSecretFile)
		if err != nil {
			return fmt.Errorf("-connect-secret-file: %w", err)
		}
		clients = append(clients, tokenservice.Client{ID: connectClientID, Secret: strings.TrimSpace(string(connectSecret)), RedirectURIs: []string{*redirect}})
	}
	ts, err := tokenservice.New(tokenservice.Options{Trusted: []*tokenservice.TrustedIssuer{cluster}, Clients: clients, Users: parseKeys(*users)})
	if err != nil {
		return err
	}
	defer ts.Close()
	remote, err := whoami.New(whoami.Options{Issuer: ts.URL(), Keys: ts.Keys(), Audience: *audience, APIKeys: parseKeys(*apiKeys)})
	if err != nil {
		return err
	}
	defer remote.Close()
	where := fmt.Sprintf("TOKEN_ENDPOINT=%s\nTOKEN_ISSUER=%s\nREMOTE=%s\n", ts.TokenEndpoint(), ts.URL(), remote.URL())
	if *redirect != "" {
		connectRemote, err := whoami.New(whoami.Options{Issuer: ts.URL(), Keys: ts.Keys(), AuthorizationServers: []string{ts.URL()}, APIKeys: parseKeys(*apiKeys)})
		if err != nil {
			return err
		}
		defer connectRemote.Close()
		control, err := serveBrowser(ts)
		if err != nil {
			return err
		}
		defer control.Close()
		where += fmt.Sprintf("CONNECT_REMOTE=%s\nCONNECT_CLIENT_ID=%s\nCONTROL=http://%s\n", connectRemote.URL(), connectClientID, control.Addr())
	}
	if err := os.WriteFile(*out, []byte(where), 0o600); err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	return nil
}

func parseKeys(list string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(list, ",") {
		if key, subject, ok := strings.Cut(pair, "="); ok {
			out[key] = subject
		}
	}
	return out
}

// connectClientID is the operator's client at the token service, for connect mode.
const connectClientID = "cantus-connect"

// browser is what the demo opens a connect link with: it plays a user's browser.
type browser struct {
	ts  *tokenservice.Server
	srv *http.Server
	ln  net.Listener
}

func (b *browser) Addr() string { return b.ln.Addr().String() }

func (b *browser) Close() { _ = b.srv.Close() }

// serveBrowser serves POST /login?url=…&user=… on loopback: it opens the connect link,
// signs in at the token service's login page as user (password from -users), and
// follows the redirect back to the operator's callback, as a user's browser would.
func serveBrowser(ts *tokenservice.Server) (*browser, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &browser{ts: ts, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login", b.login)
	b.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

func (b *browser) login(w http.ResponseWriter, r *http.Request) {
	link, user, password := r.URL.Query().Get("url"), r.URL.Query().Get("user"), r.URL.Query().Get("password")
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	operatorCA, err := peerCertificate(ctx, link)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	resp, err := b.ts.Login(ctx, b.ts.BrowserClient(operatorCA), link, user, password)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	// The operator's callback's status is the answer: the demo's curl -f fails on an error.
	w.WriteHeader(resp.StatusCode)
}

// peerCertificate returns, as PEM, the certificate the HTTPS server of link presents.
// The demo's operator serves a self-signed certificate made at its start, which the
// demo's browser trusts on first use, as the demo's curl -k does.
func peerCertificate(ctx context.Context, link string) ([]byte, error) {
	u, err := url.Parse(link)
	if err != nil || u.Scheme != "https" {
		return nil, errors.New("the connect link is not an https URL")
	}
	dialer := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // G402: trust on first use, for the demo's self-signed operator
	conn, err := dialer.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("reach the operator at %s: %w", u.Host, err)
	}
	defer conn.Close()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, errors.New("the operator presented no certificate")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certs[0].Raw}), nil
}
