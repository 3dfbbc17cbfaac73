package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// Protocol versions the tests pin; mcp-go's client unpinned would probe with
// server/discover (2026-07-28) first.
const (
	protocol20250618 = mcp.ProtocolVersion20250618
	protocol20251125 = mcp.ProtocolVersion20251125
)

// testTimeout bounds every network step of a test.
const testTimeout = 10 * time.Second

// running is a Server serving on a real loopback listener.
type running struct {
	*Server
	baseURL string
	stop    func() error // cancels Serve and returns its result; safe to call again
}

// serve starts a Server for cfg with Serve on 127.0.0.1:0. At cleanup it is stopped,
// and a failing Serve fails the test unless the test stopped it and looked itself.
func serve(t *testing.T, cfg *adapterconfig.Config, opts ...Option) *running {
	t.Helper()
	srv, err := NewServer(cfg, opts...)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	stop := sync.OnceValue(func() error {
		cancel()
		return testkit.Receive(t, 30*time.Second, "Serve to return after cancellation", done)
	})
	r := &running{Server: srv, baseURL: "http://" + ln.Addr().String()}
	var stoppedByTest atomic.Bool
	r.stop = func() error {
		stoppedByTest.Store(true)
		return stop()
	}
	t.Cleanup(func() {
		if err := stop(); err != nil && !stoppedByTest.Load() {
			t.Errorf("Serve: %v", err)
		}
	})
	return r
}

// connect opens an initialized mcp-go streamable HTTP client; protocol "" leaves the
// client unpinned (it then negotiates 2026-07-28).
func connect(t *testing.T, baseURL, protocol string, headers map[string]string) *client.Client {
	t.Helper()
	c, err := dial(t, baseURL, protocol, headers)
	if err != nil {
		t.Fatalf("connect to %s: %v", baseURL, err)
	}
	return c
}

func dial(t *testing.T, baseURL, protocol string, headers map[string]string) (*client.Client, error) {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(baseURL+adapterconfig.PathMCP, transport.WithHTTPHeaders(headers))
	if err != nil {
		return nil, err
	}
	var opts []client.ClientOption
	if protocol != "" {
		opts = append(opts, client.WithProtocolVersion(protocol))
	}
	return startClient(t, client.NewClient(tr, opts...), protocol)
}

// connectSSE opens an initialized mcp-go client over the sse transport.
func connectSSE(t *testing.T, baseURL, protocol string) *client.Client {
	t.Helper()
	tr, err := transport.NewSSE(baseURL + adapterconfig.PathSSE)
	if err != nil {
		t.Fatalf("sse transport: %v", err)
	}
	c, err := startClient(t, client.NewClient(tr, client.WithProtocolVersion(protocol)), protocol)
	if err != nil {
		t.Fatalf("connect over sse to %s: %v", baseURL, err)
	}
	return c
}

func startClient(t *testing.T, c *client.Client, protocol string) (*client.Client, error) {
	t.Helper()
	ctx := testkit.Context(t, testTimeout)
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = protocol
	req.Params.ClientInfo = mcp.Implementation{Name: "adapter-test", Version: "0.0.0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		return nil, err
	}
	return c, nil
}

func callTool(t *testing.T, c *client.Client, name string, args any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(testkit.Context(t, testTimeout), req)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func textOf(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// wantSuccess fails unless r is a successful result with text want.
func wantSuccess(t *testing.T, r *mcp.CallToolResult, want string) {
	t.Helper()
	if r.IsError {
		t.Fatalf("result is an error: %q", textOf(r))
	}
	if got := textOf(r); got != want {
		t.Fatalf("result text = %q, want %q", got, want)
	}
}

// wantToolError fails unless r is an error result whose text starts with prefix and
// contains every fragment.
func wantToolError(t *testing.T, r *mcp.CallToolResult, prefix string, fragments ...string) {
	t.Helper()
	got := textOf(r)
	if !r.IsError {
		t.Fatalf("result is not an error: %q", got)
	}
	if !strings.HasPrefix(got, prefix) {
		t.Fatalf("error %q does not start with %q", got, prefix)
	}
	for _, f := range fragments {
		if !strings.Contains(got, f) {
			t.Fatalf("error %q does not mention %q", got, f)
		}
	}
}

// rpcReply is a raw JSON-RPC exchange over HTTP, for what mcp-go's client hides
// (headers, schema keys its types drop).
// answeredError is a JSON-RPC error as answered, with the HTTP status it came with.
type answeredError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
	Status  int             `json:"status"`
}

// answerOf is the result or the error reply holds, the answer to one request sent as
// JSON or as the message event of a stream; it fails t (about what) when there is
// neither.
func answerOf(t *testing.T, what string, reply rpcReply) (json.RawMessage, *answeredError) {
	t.Helper()
	body := reply.body
	if i := bytes.Index(body, []byte("data: ")); i >= 0 && bytes.HasPrefix(bytes.TrimSpace(body), []byte("event:")) {
		body = body[i+len("data: "):]
		if j := bytes.IndexByte(body, '\n'); j >= 0 {
			body = body[:j]
		}
	}
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *answeredError  `json:"error"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || (answer.Result == nil && answer.Error == nil) {
		t.Fatalf("%s: HTTP %d %s: neither a result nor an error", what, reply.status, reply.body)
	}
	if answer.Error != nil {
		answer.Error.Status = reply.status
	}
	return answer.Result, answer.Error
}

type rpcReply struct {
	status int
	header http.Header
	body   []byte
}

func postRPC(t *testing.T, url string, headers map[string]string, message string) rpcReply {
	t.Helper()
	resp := openPost(t, url, headers, message)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	return rpcReply{status: resp.StatusCode, header: resp.Header, body: body}
}

// openPost POSTs the JSON-RPC message to url with headers, as a client of streamable
// HTTP does, and returns the response with its body unread (an event stream may stay
// open); the request ends with the test.
func openPost(t *testing.T, url string, headers map[string]string, message string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(testkit.Context(t, testTimeout), http.MethodPost, url, strings.NewReader(message))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

func initializeMessage(protocol string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocol +
		`","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
}

func getStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testkit.Context(t, testTimeout), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// templateTool is a tool rendering text over arguments matching schema.
func templateTool(name, schema, text string) adapterconfig.Tool {
	return adapterconfig.Tool{Name: name, InputSchema: json.RawMessage(schema), Template: &adapterconfig.TemplateBackend{Text: text}}
}

func httpTool(name, schema, url string, timeout time.Duration, maxBytes int64) adapterconfig.Tool {
	return adapterconfig.Tool{
		Name:        name,
		InputSchema: json.RawMessage(schema),
		HTTP:        &adapterconfig.HTTPBackend{URL: url, Timeout: adapterconfig.Duration{Duration: timeout}, MaxResponseBytes: maxBytes},
	}
}

func configWith(transportName string, stateless bool, tools ...adapterconfig.Tool) *adapterconfig.Config {
	return &adapterconfig.Config{
		Server:    adapterconfig.ServerInfo{Name: "test-server", Version: "1.2.3", Instructions: "test instructions"},
		Transport: transportName,
		Stateless: stateless,
		Tools:     tools,
	}
}

const objectSchema = `{"type":"object"}`

// metricsText is what srv's metrics port answers on /metrics.
func metricsText(t *testing.T, srv *Server) string {
	t.Helper()
	hs := httptest.NewServer(srv.MetricsHandler())
	defer hs.Close()
	status, body := getStatus(t, hs.URL+adapterconfig.PathMetrics)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics on the metrics port = %d, want 200", status)
	}
	return body
}
