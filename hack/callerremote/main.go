// Command callerremote serves, for `make demo`, a remote MCP server that knows who calls
// it and an OAuth token service in front of it, both on loopback: the token service
// (zitadel's op, internal/testenv/tokenservice) exchanges the cluster's service-account
// tokens (RFC 8693) for tokens for the remote, and the remote (internal/testenv/whoami)
// checks every token and answers its whoami tool with the subject (and actor) it saw.
// It also takes static API keys, for the per-caller Secret import and the operator's
// probe. It writes where it serves to -out as shell assignments (TOKEN_ENDPOINT=…,
// REMOTE=…) and serves until it is stopped.
//
//	callerremote -cluster-issuer URL -cluster-jwks FILE -client-secret-file FILE \
//	             -api-keys probe-key=cantus-probe,carol-key=carol -out FILE
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cantus-dev/cantus-operator/internal/testenv/tokenservice"
	"github.com/cantus-dev/cantus-operator/internal/testenv/whoami"
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
	ts, err := tokenservice.New(tokenservice.Options{Trusted: []*tokenservice.TrustedIssuer{cluster},
		Clients: []tokenservice.Client{{ID: *clientID, Secret: strings.TrimSpace(string(secret))}}})
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
