package adapter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// sessionsRemote is a stateful mcp-go remote whose tool whoami answers the id of the
// session it was called on, and which reports every session ended with DELETE.
type sessionsRemote struct {
	url     string
	deleted chan string
}

func startSessionsRemote(t *testing.T) *sessionsRemote {
	t.Helper()
	s := server.NewMCPServer("sessions-remote", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(server.ClientSessionFromContext(ctx).SessionID()), nil
	})
	h := server.NewStreamableHTTPServer(s)
	r := &sessionsRemote{deleted: make(chan string, 16)}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.ServeHTTP(w, req)
		if req.Method == http.MethodDelete {
			r.deleted <- req.Header.Get("Mcp-Session-Id")
		}
	}))
	t.Cleanup(hs.Close)
	r.url = hs.URL + "/mcp"
	return r
}

// On a stateful gateway each downstream session calls the remote on an upstream
// session of its own, kept across its calls; a downstream DELETE deletes that upstream
// session and no other, and the ended session is answered 404 afterwards.
func TestGateway_StatefulDownstreamSessionsHaveTheirOwnUpstreamSessions(t *testing.T) {
	remote := startSessionsRemote(t)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, false,
		remoteTool("team.whoami", objectSchema, remote.url, adapterconfig.TransportStreamableHTTP, "whoami")))
	a := connect(t, gw.baseURL, protocol20251125, nil)
	b := connect(t, gw.baseURL, protocol20251125, nil)
	upstreamA := textOf(callTool(t, a, "team.whoami", nil))
	upstreamB := textOf(callTool(t, b, "team.whoami", nil))
	if upstreamA == "" || upstreamB == "" || upstreamA == upstreamB {
		t.Fatalf("the two downstream sessions called on upstream sessions %q and %q, want two of their own", upstreamA, upstreamB)
	}
	if again := textOf(callTool(t, a, "team.whoami", nil)); again != upstreamA {
		t.Errorf("a's second call went on upstream session %q, want its own %q again", again, upstreamA)
	}
	downstreamA := a.GetSessionId()
	if err := a.Close(); err != nil { // mcp-go's client sends DELETE
		t.Fatal(err)
	}
	if got := testkit.Receive(t, testTimeout, "the remote to see a DELETE", remote.deleted); got != upstreamA {
		t.Errorf("the remote saw DELETE of session %q, want a's upstream session %q", got, upstreamA)
	}
	if again := textOf(callTool(t, b, "team.whoami", nil)); again != upstreamB {
		t.Errorf("b's call after a's DELETE went on upstream session %q, want its own %q", again, upstreamB)
	}
	select {
	case got := <-remote.deleted:
		t.Errorf("the remote saw another DELETE, of %q", got)
	default:
	}
	reply := postRPC(t, gw.baseURL+adapterconfig.PathMCP, map[string]string{"Mcp-Session-Id": downstreamA, "MCP-Protocol-Version": protocol20251125},
		`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	if reply.status != http.StatusNotFound {
		t.Errorf("a request on the deleted session got HTTP %d, want 404", reply.status)
	}
}

// pollingRemote is a stateful mcp-go remote in front of which tools/call of
// test_reconnection is answered as a server that polls its client does (SEP-1699): the
// POST's event stream gets a priming event (an id, a retry of 50 ms, no data) and ends;
// the answer comes on the stream resumed with that id.
type pollingRemote struct {
	url     string
	mu      sync.Mutex
	pending map[string][]byte // answers by priming event id
	resumes atomic.Int32
}

const pollingRetry = 50 * time.Millisecond

func startPollingRemote(t *testing.T) *pollingRemote {
	t.Helper()
	s := server.NewMCPServer("polling-remote", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("test_reconnection"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("not polled"), nil
	})
	h := server.NewStreamableHTTPServer(s)
	p := &pollingRemote{pending: map[string][]byte{}}
	var primed atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if id := req.Header.Get("Last-Event-ID"); req.Method == http.MethodGet && id != "" {
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
				p.mu.Lock()
				p.pending[id] = answer
				p.mu.Unlock()
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "id: %s\nretry: %d\ndata: \n\n", id, pollingRetry.Milliseconds())
				return
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(hs.Close)
	p.url = hs.URL + "/mcp"
	return p
}

// streamEvent is one event of an event stream, with its retry field.
type streamEvent struct{ id, retry, data string }

// readStreamEvents reads the events of an event stream until it ends.
func readStreamEvents(t *testing.T, body io.Reader) []streamEvent {
	t.Helper()
	var events []streamEvent
	var ev streamEvent
	seen := false
	scanner := bufio.NewScanner(body)
	for scanner.Scan() {
		line := scanner.Text()
		if line == "" {
			if seen {
				events = append(events, ev)
			}
			ev, seen = streamEvent{}, false
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		seen = true
		switch field {
		case "id":
			ev.id = value
		case "retry":
			ev.retry = value
		case "data":
			ev.data += value
		}
	}
	return events
}

// A stateful gateway mirrors a remote that polls: the caller's POST stream ends after
// a priming event carrying the remote's retry and no answer, and the answer comes on
// the stream the caller resumes with Last-Event-ID from that priming event, once the
// gateway has resumed upstream itself.
func TestGateway_StatefulMirrorsARemoteThatPolls(t *testing.T) {
	remote := startPollingRemote(t)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, false,
		remoteTool("test_reconnection", objectSchema, remote.url, adapterconfig.TransportStreamableHTTP, "test_reconnection")))
	c := connect(t, gw.baseURL, protocol20251125, nil)
	session := c.GetSessionId()
	headers := map[string]string{"Mcp-Session-Id": session, "MCP-Protocol-Version": protocol20251125}

	post := sseRequest(t, http.MethodPost, gw.baseURL, headers, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_reconnection","arguments":{}}}`)
	events := readStreamEvents(t, post.Body)
	post.Body.Close()
	if len(events) != 1 || events[0].id == "" || events[0].data != "" || events[0].retry != fmt.Sprint(pollingRetry.Milliseconds()) {
		t.Fatalf("the POST's stream held %+v, want one priming event (an id, retry %d, no data) and no answer", events, pollingRetry.Milliseconds())
	}

	headers["Last-Event-ID"] = events[0].id
	get := sseRequest(t, http.MethodGet, gw.baseURL, headers, "")
	resumed := readStreamEvents(t, get.Body)
	get.Body.Close()
	if len(resumed) != 1 || !strings.Contains(resumed[0].data, `"id":7`) || !strings.Contains(resumed[0].data, "resumed") {
		t.Errorf("the resumed stream held %+v, want the remote's answer to request 7", resumed)
	}
	if got := remote.resumes.Load(); got != 1 {
		t.Errorf("the gateway resumed the remote's stream %d times, want 1", got)
	}
}

// sseRequest sends a request to the gateway's MCP endpoint that accepts event streams.
func sseRequest(t *testing.T, method, baseURL string, headers map[string]string, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(testkit.Context(t, testTimeout), method, baseURL+adapterconfig.PathMCP, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s: HTTP %d %s %s, want an event stream", method, resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	return resp
}
