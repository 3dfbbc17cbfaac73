package adapter

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/testenv/pollingremote"
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

// pollingRetry is the retry the polling remote's priming events ask for.
const pollingRetry = 50 * time.Millisecond

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
	remote := pollingremote.Start(t, pollingRetry)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, false,
		remoteTool("test_reconnection", objectSchema, remote.URL, adapterconfig.TransportStreamableHTTP, "test_reconnection")))
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
	if got := remote.Resumes(); got != 1 {
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

// On a stateful gateway the log level a session asks for (logging/setLevel) reaches
// that session's upstream session, whether it is open already or opens later, and no
// other session's: each remote session logs at its own caller's level.
func TestGateway_StatefulSessionLogLevelReachesOnlyItsUpstreamSession(t *testing.T) {
	s := server.NewMCPServer("levels-remote", "1.0.0", server.WithToolCapabilities(false), server.WithLogging())
	s.AddTool(mcp.NewTool("level"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		session, _ := server.ClientSessionFromContext(ctx).(server.SessionWithLogging)
		if session == nil {
			return mcp.NewToolResultError("no session with a log level"), nil
		}
		return mcp.NewToolResultText(string(session.GetLogLevel())), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, false,
		remoteTool("team.level", objectSchema, hs.URL+"/mcp", adapterconfig.TransportStreamableHTTP, "level")))
	setLevel := func(c *client.Client, level mcp.LoggingLevel) {
		t.Helper()
		req := mcp.SetLevelRequest{}
		req.Params.Level = level
		//nolint:staticcheck // logging/setLevel of 2025-11-25 is what the gateway passes on
		if err := c.SetLevel(testkit.Context(t, testTimeout), req); err != nil {
			t.Fatal(err)
		}
	}
	open, later, quiet := connect(t, gw.baseURL, protocol20251125, nil), connect(t, gw.baseURL, protocol20251125, nil), connect(t, gw.baseURL, protocol20251125, nil)
	before := textOf(callTool(t, quiet, "team.level", nil))
	if before == string(mcp.LoggingLevelDebug) || before == string(mcp.LoggingLevelWarning) {
		t.Fatalf("the remote's sessions start at %q, a level the test asks for", before)
	}
	callTool(t, open, "team.level", nil) // its upstream session is open
	setLevel(open, mcp.LoggingLevelDebug)
	setLevel(later, mcp.LoggingLevelWarning) // its upstream session opens with its first call
	if got := textOf(callTool(t, open, "team.level", nil)); got != string(mcp.LoggingLevelDebug) {
		t.Errorf("the session that asked for debug after its first call logs at %q upstream", got)
	}
	if got := textOf(callTool(t, later, "team.level", nil)); got != string(mcp.LoggingLevelWarning) {
		t.Errorf("the session that asked for warning before its first call logs at %q upstream", got)
	}
	if got := textOf(callTool(t, quiet, "team.level", nil)); got != before {
		t.Errorf("a session that asked for no level logs at %q upstream, %q before the others asked", got, before)
	}
}
