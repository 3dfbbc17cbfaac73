package adapter

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// richResult is what the remote below answers: two text items (the second annotated),
// an image with _meta, structured content and result _meta.
const richResult = `{
	"content": [
		{"type": "text", "text": "first"},
		{"type": "text", "text": "second", "annotations": {"audience": ["user"], "priority": 0.5}},
		{"type": "image", "data": "aGk=", "mimeType": "image/png", "_meta": {"k": "v"}}
	],
	"structuredContent": {"answer": 42, "list": [1, 2]},
	"_meta": {"trace": "t-1"}
}`

// startRichRemote serves ok (richResult) and bad (richResult with isError) from a bare
// mcp-go server, the shape of a third-party remote.
func startRichRemote(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("rich", "1.0.0", server.WithToolCapabilities(false))
	answer := func(isError bool) server.ToolHandlerFunc {
		return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			raw := json.RawMessage(richResult)
			res, err := mcp.ParseCallToolResult(&raw)
			if err != nil {
				return nil, err
			}
			res.IsError = isError
			return res, nil
		}
	}
	s.AddTool(mcp.NewTool("ok"), answer(false))
	s.AddTool(mcp.NewTool("bad"), answer(true))
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// canonical re-encodes JSON so that two documents compare equal as parsed values.
func canonical(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var parsed any
	if err := json.Unmarshal(data, &parsed); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	out, _ := json.Marshal(parsed)
	return string(out)
}

// TestGateway_ResultsPassThroughAsSent: a successful remote result reaches the client
// equal as parsed JSON to what the remote sent (every content item with its annotations
// and _meta, structuredContent, _meta); a failed one keeps all of it too, only its
// first text item gains the mcp_remote_error: marker.
func TestGateway_ResultsPassThroughAsSent(t *testing.T) {
	endpoint := startRichRemote(t)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true,
		remoteTool("up.ok", objectSchema, endpoint, adapterconfig.TransportStreamableHTTP, "ok"),
		remoteTool("up.bad", objectSchema, endpoint, adapterconfig.TransportStreamableHTTP, "bad")))
	c := connect(t, gw.baseURL, protocol20251125, nil)

	var want map[string]any
	if err := json.Unmarshal([]byte(richResult), &want); err != nil {
		t.Fatal(err)
	}
	if got, w := canonical(t, callTool(t, c, "up.ok", nil)), canonical(t, want); got != w {
		t.Errorf("success result\n got %s\nwant %s", got, w)
	}

	want["isError"] = true
	want["content"].([]any)[0].(map[string]any)["text"] = gateway.MarkerRemoteError + "first"
	if got, w := canonical(t, callTool(t, c, "up.bad", nil)), canonical(t, want); got != w {
		t.Errorf("failed result\n got %s\nwant %s", got, w)
	}
}
