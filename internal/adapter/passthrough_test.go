package adapter

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// vendorResult is a tool result with a member mcp-go's types do not know: decoding it
// into them and encoding it again would drop "vendorTrace".
const vendorResult = `{"content":[{"type":"text","text":"as sent"}],"vendorTrace":{"hops":[1,2]},"structuredContent":{"n":1.50}}`

// rawRemote is a minimal MCP server over streamable HTTP that answers every tools/call
// with result, byte for byte.
func rawRemote(t *testing.T, result string) string {
	t.Helper()
	return rawMethodsRemote(t, map[string]string{"tools/call": result}, nil)
}

// rawMethodsRemote is a minimal MCP server over streamable HTTP that answers each
// method of results with its result, byte for byte, and every other request with {}.
// seen, when set, gets each request's method and params.
func rawMethodsRemote(t *testing.T, results map[string]string, seen func(method string, params json.RawMessage)) string {
	t.Helper()
	return rawScriptedRemote(t, results, nil, seen)
}

// rawScriptedRemote is rawMethodsRemote whose answer to a method of notesFirst is an
// event stream: those notifications, in order, then the answer. Unlike a remote that
// sends them from a goroutine, it never loses one to a race with the answer.
func rawScriptedRemote(t *testing.T, results map[string]string, notesFirst map[string][]string, seen func(method string, params json.RawMessage)) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || json.Unmarshal(body, &msg) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if len(msg.ID) == 0 { // a notification
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if seen != nil {
			seen(msg.Method, msg.Params)
		}
		answer := `{}`
		if msg.Method == "initialize" {
			answer = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"resources":{},"prompts":{}},"serverInfo":{"name":"raw","version":"0"}}`
		} else if result, ok := results[msg.Method]; ok {
			answer = result
		}
		response := `{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":` + answer + `}`
		notes, streamed := notesFirst[msg.Method]
		if !streamed {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, response)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, event := range append(notes, response) {
			_, _ = io.WriteString(w, "event: message\ndata: "+event+"\n\n")
		}
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// A forwarded call's result reaches the client as the remote sent it, members the
// gateway does not know and the spelling of numbers included: the gateway passes the
// bytes on instead of decoding and encoding them.
func TestPassThrough_TheRemotesResultBytesReachTheClient(t *testing.T) {
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true,
		remoteTool("up.vendor", objectSchema, rawRemote(t, vendorResult), adapterconfig.TransportStreamableHTTP, "vendor")))

	reply := postRPC(t, gw.baseURL+adapterconfig.PathMCP, map[string]string{"MCP-Protocol-Version": protocol20251125},
		`{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"up.vendor","arguments":{}}}`)
	if reply.status != http.StatusOK || !strings.HasPrefix(reply.header.Get("Content-Type"), "application/json") {
		t.Fatalf("reply %d %s: %s", reply.status, reply.header.Get("Content-Type"), reply.body)
	}
	if want := `{"jsonrpc":"2.0","id":"call-7","result":` + vendorResult + `}`; string(reply.body) != want {
		t.Errorf("reply\n got %s\nwant %s", reply.body, want)
	}
}

// What the pass-through does not take is still answered, by mcp-go: a call with _meta
// (here a progress token) and arguments the schema refuses.
func TestPassThrough_OtherCallsAreStillAnswered(t *testing.T) {
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true,
		remoteTool("up.vendor", `{"type":"object","properties":{"n":{"type":"integer"}}}`, rawRemote(t, vendorResult), adapterconfig.TransportStreamableHTTP, "vendor")))
	headers := map[string]string{"MCP-Protocol-Version": protocol20251125}

	withMeta := postRPC(t, gw.baseURL+adapterconfig.PathMCP, headers,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up.vendor","arguments":{},"_meta":{"progressToken":"p"}}}`)
	if !strings.Contains(string(withMeta.body), `"as sent"`) || strings.Contains(string(withMeta.body), "vendorTrace") {
		t.Errorf("a call with _meta is mcp-go's, which keeps the content and drops unknown members: %s", withMeta.body)
	}
	invalid := postRPC(t, gw.baseURL+adapterconfig.PathMCP, headers,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up.vendor","arguments":{"n":"one"}}}`)
	if !strings.Contains(string(invalid.body), markerInvalidArgs) || !strings.Contains(string(invalid.body), `"isError":true`) {
		t.Errorf("invalid arguments are refused before forwarding: %s", invalid.body)
	}
}

// workUntilCancelled is a remote (mcp-go, stateless streamable HTTP) whose tool "work"
// works until its caller goes away, and records that on cancelled.
func workUntilCancelled(t *testing.T) (url string, cancelled <-chan struct{}) {
	t.Helper()
	seen := make(chan struct{}, 1)
	s := server.NewMCPServer("working", "1.0.0")
	s.AddTool(mcp.NewTool("work"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		seen <- struct{}{}
		return nil, ctx.Err()
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStateLess(true)))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", seen
}

// A log message the remote sends during a passed-through call reaches the client before
// the answer (the response becomes an event stream, as mcp-go's would).
func TestPassThrough_LogMessagesReachTheClient(t *testing.T) {
	url := rawScriptedRemote(t,
		map[string]string{"tools/call": `{"content":[{"type":"text","text":"finished"}]}`},
		map[string][]string{"tools/call": {`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"work","data":"started working"}}`}},
		nil)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, remoteTool("up.work", objectSchema, url, adapterconfig.TransportStreamableHTTP, "work")))
	c := connect(t, gw.baseURL, protocol20251125, nil)
	var mu sync.Mutex
	var logs []mcp.JSONRPCNotification
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, n)
	})

	res := callTool(t, c, "up.work", nil)
	if res.IsError || textOf(res) != "finished" {
		t.Fatalf("result %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 || logs[0].Method != "notifications/message" || logs[0].Params.AdditionalFields["data"] != "started working" {
		t.Errorf("log messages = %+v, want the remote's one", logs)
	}
}

// A client that gives up on a passed-through call ends it on the remote too.
func TestPassThrough_AnAbandonedCallIsCancelledOnTheRemote(t *testing.T) {
	url, cancelled := workUntilCancelled(t)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, remoteTool("up.work", objectSchema, url, adapterconfig.TransportStreamableHTTP, "work")))
	c := connect(t, gw.baseURL, protocol20251125, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "up.work"
	if _, err := c.CallTool(ctx, req); err == nil {
		t.Fatal("the call answered, want it abandoned")
	}
	testkit.Receive(t, testTimeout, "the remote to be told that the call ended", cancelled)
}
