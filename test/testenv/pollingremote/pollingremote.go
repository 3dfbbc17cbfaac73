// Package pollingremote is a stateful mcp-go remote whose test_reconnection tool
// answers as a server that polls its client does (SEP-1699, the conformance suite's
// server-sse-polling): the call's event stream gets a priming event (an id, a retry,
// no data) and ends; the answer comes on the stream the client resumes with that id.
package pollingremote

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
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// Tool is the tool that polls.
const Tool = "test_reconnection"

// Remote is a running polling remote.
type Remote struct {
	// URL is its streamable HTTP endpoint.
	URL string

	mu      sync.Mutex
	pending map[string][]byte // answers by priming event id
	primed  atomic.Int32
	resumes atomic.Int32
}

// Resumes counts the streams resumed with Last-Event-ID that got their answer.
func (p *Remote) Resumes() int32 { return p.resumes.Load() }

// Start runs a polling remote whose priming events ask for retry, until the test ends.
func Start(t testing.TB, retry time.Duration) *Remote {
	t.Helper()
	s := server.NewMCPServer("polling-remote", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool(Tool), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("not polled"), nil
	})
	h := server.NewStreamableHTTPServer(s)
	p := &Remote{pending: map[string][]byte{}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if id := req.Header.Get("Last-Event-ID"); req.Method == http.MethodGet && id != "" {
			p.resume(w, id)
			return
		}
		if req.Method == http.MethodPost && p.prime(w, req, retry) {
			return
		}
		h.ServeHTTP(w, req)
	}))
	testkit.CloseAtEnd(t, hs)
	p.URL = hs.URL + "/mcp"
	return p
}

// resume answers the stream resumed from priming event id.
func (p *Remote) resume(w http.ResponseWriter, id string) {
	p.mu.Lock()
	answer, ok := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	if !ok {
		http.Error(w, "unknown event id", http.StatusBadRequest)
		return
	}
	p.resumes.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "id: %s-answer\nevent: message\ndata: %s\n\n", id, answer)
}

// prime ends the stream of a call of Tool after a priming event, keeping its answer
// for the resume, and reports whether req was one.
func (p *Remote) prime(w http.ResponseWriter, req *http.Request, retry time.Duration) bool {
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	var call struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &call) != nil || call.Method != "tools/call" || call.Params.Name != Tool {
		return false
	}
	id := fmt.Sprintf("poll-%d", p.primed.Add(1))
	answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": call.ID,
		"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "resumed"}}}})
	p.mu.Lock()
	p.pending[id] = answer
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "id: %s\nretry: %d\ndata: \n\n", id, retry.Milliseconds())
	return true
}
