package adapter

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// remoteDefinition is a remote's definition without annotations (mcp-go would list {})
// and with members mcp-go's types do not carry as sent.
const remoteDefinition = `{
	"title": "Forecast",
	"description": "Tomorrow's weather.",
	"inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
	"outputSchema": {"type": "object", "properties": {"celsius": {"type": "number", "maximum": 1.50}}},
	"icons": [{"src": "https://example.com/sun.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "light"}],
	"_meta": {"vendor/trace": {"nested": [1, 2]}},
	"execution": {"taskSupport": "optional"},
	"x-future-member": {"kept": true}
}`

// An imported tool is listed exactly as its remote defined it, under the served name,
// on both transports; a tool without a definition is listed as before.
func TestToolsList_ServesTheRemotesDefinition(t *testing.T) {
	forecast := remoteTool("w_forecast", `{"type":"object","properties":{"city":{"type":"string"}}}`, "http://127.0.0.1:1/mcp", adapterconfig.TransportStreamableHTTP, "forecast")
	forecast.Remote.Definition = json.RawMessage(remoteDefinition)
	plain := remoteTool("w_plain", objectSchema, "http://127.0.0.1:1/mcp", adapterconfig.TransportStreamableHTTP, "plain")
	var want map[string]any
	if err := json.Unmarshal([]byte(remoteDefinition), &want); err != nil {
		t.Fatal(err)
	}
	want["name"] = "w_forecast"

	check := func(t *testing.T, tools []json.RawMessage) {
		t.Helper()
		byName := map[string]map[string]any{}
		for _, raw := range tools {
			var entry map[string]any
			if err := json.Unmarshal(raw, &entry); err != nil {
				t.Fatal(err)
			}
			byName[entry["name"].(string)] = entry
		}
		if got, w := canonical(t, byName["w_forecast"]), canonical(t, want); got != w {
			t.Errorf("imported tool\n got %s\nwant %s", got, w)
		}
		if byName["w_plain"] == nil || byName["w_plain"]["description"] != "re-exported plain" {
			t.Errorf("the tool without a definition is listed as mcp-go builds it: %v", byName["w_plain"])
		}
	}

	t.Run("streamable-http", func(t *testing.T) {
		gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, forecast, plain))
		reply := postRPC(t, gw.baseURL+adapterconfig.PathMCP, map[string]string{"MCP-Protocol-Version": protocol20251125},
			`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(reply.body, &msg); err != nil || msg.ID != 7 {
			t.Fatalf("tools/list answer %s: %v", reply.body, err)
		}
		check(t, msg.Result.Tools)
	})
	t.Run("sse", func(t *testing.T) {
		gw := serve(t, configWith(adapterconfig.TransportSSE, false, forecast, plain))
		c := connectSSE(t, gw.baseURL, protocol20251125)
		resp, err := c.GetTransport().SendRequest(testkit.Context(t, testTimeout), transport.JSONRPCRequest{
			JSONRPC: "2.0", ID: mcp.NewRequestId(int64(9)), Method: "tools/list"})
		if err != nil {
			t.Fatal(err)
		}
		var result struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(resp.Result, &result); err != nil {
			t.Fatalf("tools/list result %s: %v", resp.Result, err)
		}
		check(t, result.Tools)
	})
}
