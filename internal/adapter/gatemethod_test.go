package adapter

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// mcpGoDispatches says whether mcp-go's server dispatches body as a request, and of
// which method: it decodes the message as server.MCPServer.HandleMessage does (its
// baseMessage), and dispatches one of JSON-RPC 2.0 with an id and no result.
func mcpGoDispatches(body []byte) (mcp.MCPMethod, bool) {
	var baseMessage struct {
		JSONRPC string        `json:"jsonrpc"`
		Method  mcp.MCPMethod `json:"method"`
		ID      any           `json:"id,omitempty"`
		Result  any           `json:"result,omitempty"`
	}
	if err := json.Unmarshal(body, &baseMessage); err != nil {
		return "", false
	}
	return baseMessage.Method, baseMessage.JSONRPC == mcp.JSONRPC_VERSION && baseMessage.ID != nil && baseMessage.Result == nil
}

// FuzzGateMethodEveryDispatchedRequestReachesTheLimiter: behind a per-caller budget
// that is always spent, every body mcp-go would dispatch as a request, of any method
// and however it is spelled (escapes, key case, duplicate keys), is refused with 429
// by the gate before mcp-go sees it.
func FuzzGateMethodEveryDispatchedRequestReachesTheLimiter(f *testing.F) {
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x"))
	cfg.Limits = &adapterconfig.Limits{ConcurrentCalls: 64, QueueLength: 64, QueueWait: adapterconfig.Duration{Duration: 1e9},
		PerCaller: &adapterconfig.CallerRate{CallsPerSecond: 0, Burst: 0}}
	s, err := NewServer(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })
	reached := false
	h := s.gateMCP(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools\/call"}`,
		`{"jsonrpc":"2.0","id":1,"method":"\u0074ools/call"}`,
		`{"jsonrpc":"2.0","ID":1,"Method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"resources/read"}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{},"method":"subscriptions/listen","params":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		method, dispatched := mcpGoDispatches(body)
		reached = false
		w := gateRequest(h, "192.0.2.1:4000", string(body))
		if dispatched && (reached || w.Code != http.StatusTooManyRequests) {
			t.Fatalf("mcp-go dispatches %q as %q, and the gate answered %d (passed on: %v), want 429 from the limiter", body, method, w.Code, reached)
		}
	})
}
