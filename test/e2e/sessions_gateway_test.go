package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// TestSessionsThroughStatefulGateway runs the conformance suite's session and stream
// scenarios of protocol 2025-11-25 against a stateful gateway in front of an mcp-go
// remote: a request on a session ended with DELETE is answered 404
// (server-session-lifecycle), and several POSTs on one session are several working
// event streams (server-sse-multiple-streams). Every check is SUCCESS: the INFO the
// suite gives a server that answers POSTs with JSON does not count as a pass here, as
// the reference server answers with event streams.
func TestSessionsThroughStatefulGateway(t *testing.T) {
	ctx := testkit.Context(t, conformanceTimeout)
	remoteURL := startAskingRemote(t)
	gateway := startAskingGateway(t, ctx, false, askingGatewayTools(remoteURL, "", adapterconfig.RelayElicitation, adapterconfig.RelaySampling), askingImported(remoteURL))
	for _, scenario := range []string{"server-session-lifecycle", "server-sse-multiple-streams"} {
		t.Run(scenario, func(t *testing.T) {
			peers.RequireChecksPassed(t, scenario, peers.RunConformance(t, ctx, gateway, scenario))
		})
	}
}

// pollingRemote is a stateful mcp-go remote whose test_reconnection tool answers as a
// server that polls its client does (SEP-1699, the conformance suite's
// server-sse-polling): the call's event stream gets a priming event (an id, retry, no
// data) and ends; the answer comes on the stream the client resumes with that id.
func startPollingRemote(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("polling-remote", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("test_reconnection"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("not polled"), nil
	})
	h := server.NewStreamableHTTPServer(s)
	var mu sync.Mutex
	pending := map[string][]byte{} // answers by priming event id
	var primed atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if id := req.Header.Get("Last-Event-ID"); req.Method == http.MethodGet && id != "" {
			mu.Lock()
			answer, ok := pending[id]
			delete(pending, id)
			mu.Unlock()
			if !ok {
				http.Error(w, "unknown event id", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: %s-answer\nevent: message\ndata: %s\n\n", id, answer)
			return
		}
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			var call struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &call) == nil && call.Method == "tools/call" && call.Params.Name == "test_reconnection" {
				id := fmt.Sprintf("poll-%d", primed.Add(1))
				answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": call.ID,
					"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "resumed"}}}})
				mu.Lock()
				pending[id] = answer
				mu.Unlock()
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "id: %s\nretry: 200\ndata: \n\n", id)
				return
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// sseEventChecks are the INFO records server-sse-polling makes of what it sent and
// received; they are no verdict.
var sseEventChecks = []string{"outgoing-request", "incoming-response", "incoming-sse-event", "stream-closed"}

// TestSSEPollingThroughStatefulGateway runs the conformance suite's server-sse-polling
// against a stateful gateway in front of a remote that polls: the gateway's POST
// stream starts with a priming event with the remote's retry, ends before the answer,
// and the answer comes on the stream resumed with Last-Event-ID; every verdict is
// SUCCESS, as against a polling server directly.
func TestSSEPollingThroughStatefulGateway(t *testing.T) {
	ctx := testkit.Context(t, conformanceTimeout)
	remote := &remoteSpec{Import: "e2e/polling", URL: startPollingRemote(t), Transport: peers.TransportStreamableHTTP, RemoteName: "test_reconnection", Timeout: "20s"}
	gateway := startAskingGateway(t, ctx, false, []gatewayTool{{Name: "test_reconnection", Description: "Re-exported test_reconnection.",
		InputSchema: json.RawMessage(`{"type":"object"}`), Remote: remote}})
	checks := peers.RunConformance(t, ctx, gateway, "server-sse-polling")
	for _, c := range checks {
		t.Logf("%s %s %s", c.ID, c.Status, c.Description)
	}
	peers.RequireChecksPassed(t, "server-sse-polling", checks, sseEventChecks...)
}
