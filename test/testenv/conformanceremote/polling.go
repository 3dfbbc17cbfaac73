package conformanceremote

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// The test_reconnection tool of server-sse-polling (SEP-1699): a 2025-11-25 call of it
// is answered with an event stream that carries only a priming event (an event id,
// a retry interval and no data) and then closes; the client resumes with a GET
// bearing that id as Last-Event-ID and gets the result there. mcp-go has event ids
// and replay but no priming event, retry field or server-side close, so the fixture
// answers this call itself, before mcp-go.

const (
	reconnectionTool = "test_reconnection"
	// reconnectionText is what the resumed stream answers.
	reconnectionText = "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."
	reconnectPrefix  = "reconnect-"
	// retryMillis is the reconnection delay the priming event asks for.
	retryMillis = 500
)

// reconnections are the calls of test_reconnection whose stream was closed, by the
// event id the client resumes after, with the JSON-RPC id their result answers.
type reconnections struct {
	mu      sync.Mutex
	next    int
	pending map[string]json.RawMessage
}

// closeMidCall answers a session's call of test_reconnection with a priming event and
// closes the stream; false for any other request.
func (rc *reconnections) closeMidCall(w http.ResponseWriter, req *http.Request, c call) bool {
	if c.Method != string(mcp.MethodToolsCall) || c.Params.Name != reconnectionTool || c.Params.Meta.ProtocolVersion != "" || req.Header.Get("Mcp-Session-Id") == "" {
		return false
	}
	rc.mu.Lock()
	rc.next++
	id := fmt.Sprintf("%s%d", reconnectPrefix, rc.next)
	if rc.pending == nil {
		rc.pending = map[string]json.RawMessage{}
	}
	rc.pending[id] = c.ID
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "id: %s\nretry: %d\ndata: \n\n", id, retryMillis)
	return true
}

// resume answers a GET that resumes after a closed call's priming event with the
// call's result; false for any other GET.
func (rc *reconnections) resume(w http.ResponseWriter, req *http.Request) bool {
	last := req.Header.Get("Last-Event-ID")
	if req.Method != http.MethodGet || !strings.HasPrefix(last, reconnectPrefix) {
		return false
	}
	rc.mu.Lock()
	id, ok := rc.pending[last]
	delete(rc.pending, last)
	rc.mu.Unlock()
	if !ok {
		http.Error(w, "no stream to resume after "+last, http.StatusNotFound)
		return true
	}
	result, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": mcp.NewToolResultText(reconnectionText)})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "id: %s-result\nevent: message\ndata: %s\n\n", last, result)
	return true
}
