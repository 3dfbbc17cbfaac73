package adapter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

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
