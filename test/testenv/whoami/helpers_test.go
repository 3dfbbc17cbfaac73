package whoami_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
	"github.com/cantus-dev/cantus-operator/test/testenv/whoami"
)

func osWriteFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

func newPost(url, auth string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return req, nil
}

// callWithHeader opens a session sending header: value and calls whoami.
func callWithHeader(t *testing.T, url, header, value string) (string, error) {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{header: value}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		return "", err
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "whoami-test", Version: "0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return "", err
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = whoami.ToolName
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	return res.Content[0].(mcp.TextContent).Text, nil
}

// clientCredentialsToken gets a token with golang.org/x/oauth2's client credentials
// client (client_secret_basic), as the operator's probe would.
func clientCredentialsToken(t *testing.T, ts *tokenservice.Server, id, secret string) string {
	t.Helper()
	cfg := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: ts.TokenEndpoint(), AuthStyle: oauth2.AuthStyleInHeader}
	tok, err := cfg.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}
