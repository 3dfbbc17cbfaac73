package adapter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// listsRemote is an mcp-go remote whose tool list the test grows, which tells every
// client listening that it changed.
type listsRemote struct {
	*testkit.CountingServer
	srv   *server.MCPServer
	added atomic.Int64
}

func startListsRemote(t *testing.T) *listsRemote {
	t.Helper()
	r := &listsRemote{srv: server.NewMCPServer("lists-remote", "1.0.0", server.WithToolCapabilities(true))}
	r.grow()
	r.CountingServer = testkit.NewCountingServer(t, server.NewStreamableHTTPServer(r.srv))
	return r
}

// grow adds a tool, which sends notifications/tools/list_changed to every listener.
func (r *listsRemote) grow() {
	name := fmt.Sprintf("tool_%d", r.added.Add(1))
	r.srv.AddTool(mcp.NewTool(name), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(name), nil
	})
}

// listChangesTool re-exports the remote's first tool as the operator renders an import
// that serves eras, with ListChanges as given.
func listChangesTool(name, url string, eras []string, listChanges bool) adapterconfig.Tool {
	tool := remoteTool(name, objectSchema, url, adapterconfig.TransportStreamableHTTP, "tool_1")
	tool.Remote.Import = "team/" + name
	tool.Remote.Eras, tool.Remote.RemoteEras = eras, eras
	tool.Remote.ListChanges = listChanges
	return tool
}

// modernToolChanges opens a subscriptions/listen of protocol 2026-07-28 on the server
// at baseURL asking for tool list changes, waits for its acknowledgement, and returns
// the methods of the notifications that follow on it.
func modernToolChanges(t *testing.T, baseURL string) <-chan string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}},` +
		`"notifications":{"toolsListChanged":true}}}`
	resp := openPost(t, baseURL+adapterconfig.PathMCP, modernHeaders, body)
	t.Cleanup(func() { resp.Body.Close() })
	methods := make(chan string, 64)
	go func() {
		defer close(methods)
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			data, ok := strings.CutPrefix(lines.Text(), "data: ")
			var m struct {
				Method string `json:"method"`
			}
			if ok && json.Unmarshal([]byte(data), &m) == nil && m.Method != "" {
				methods <- m.Method
			}
		}
	}()
	if first := testkit.Receive(t, testTimeout, "the listen stream's acknowledgement", methods); first != "notifications/subscriptions/acknowledged" {
		t.Fatalf("the listen stream began with %q, want its acknowledgement", first)
	}
	return methods
}

// A gateway passes a remote's notifications/tools/list_changed on to its callers at
// once, without waiting for the operator to rewrite its config: to a 2025-11-25 session
// on its GET stream and to a 2026-07-28 listen stream, whether it listens to the remote
// on a session of 2025-11-25 or with a listen of 2026-07-28. A remote telling it of
// changes in a loop is passed on a few times, not once per notification.
func TestGatewayPassesARemotesListChangesToItsCallers(t *testing.T) {
	for _, tc := range []struct {
		name string
		eras []string
	}{
		{"remote of 2025-11-25", []string{adapterconfig.EraLegacy}},
		{"dual-era remote", []string{adapterconfig.EraLegacy, adapterconfig.EraModern}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remote := startListsRemote(t)
			srv, err := NewServer(configWith(adapterconfig.TransportStreamableHTTP, false, listChangesTool("team.first", remote.URL+"/mcp", tc.eras, true)))
			if err != nil {
				t.Fatal(err)
			}
			baseURL, streams := servedWithStreams(t, srv)
			_, legacy := listening(t, baseURL, adapterconfig.TransportStreamableHTTP, streams)
			modern := modernToolChanges(t, baseURL)
			remote.WaitStreamsOpen(t, 1)

			remote.grow()
			testkit.Receive(t, testTimeout, "notifications/tools/list_changed on the 2025-11-25 session", legacy)
			if got := testkit.Receive(t, testTimeout, "a notification on the 2026-07-28 listen stream", modern); got != string(mcp.MethodNotificationToolsListChanged) {
				t.Fatalf("the listen stream got %q, want notifications/tools/list_changed", got)
			}

			const burst = 200
			for range burst {
				remote.grow()
			}
			testkit.Receive(t, testTimeout, "notifications/tools/list_changed after the burst", legacy)
			passed := 1 + drainWithin(legacy, 4*gateway.ListChangedGap)
			if passed >= burst/10 {
				t.Errorf("a burst of %d list changes reached the caller as %d notifications, want a few", burst, passed)
			}
			t.Logf("figures: a burst of %d list changes reached the caller as %d notifications", burst, passed)
			heard := regexp.MustCompile(`cantus_adapter_remote_list_changes_total\{remote="[^"]+"\} (\d+)`).FindStringSubmatch(metricsText(t, srv))
			if heard == nil || heard[1] == "0" {
				t.Errorf("the metrics count no list change heard from the remote: %v", heard)
			} else {
				t.Logf("figures: the gateway heard %s list changes from the remote", heard[1])
			}
		})
	}
}

// An import whose changes are held for approval (ListChanges unset, as render leaves it
// for Manual mode) is not listened to: its callers hear of a change when the approved
// config brings it. The remote beside it, which is listened to, shows that the
// gateway's list watches are up.
func TestGatewayDoesNotListenToAnImportHeldForApproval(t *testing.T) {
	held, live := startListsRemote(t), startListsRemote(t)
	srv, err := NewServer(configWith(adapterconfig.TransportStreamableHTTP, false,
		listChangesTool("team.held", held.URL+"/mcp", []string{adapterconfig.EraLegacy}, false),
		listChangesTool("team.live", live.URL+"/mcp", []string{adapterconfig.EraLegacy}, true)))
	if err != nil {
		t.Fatal(err)
	}
	baseURL, streams := servedWithStreams(t, srv)
	_, changed := listening(t, baseURL, adapterconfig.TransportStreamableHTTP, streams)
	live.WaitStreamsOpen(t, 1)
	held.grow()
	live.grow()
	testkit.Receive(t, testTimeout, "the change of the import that is listened to", changed)
	if n := held.Requests.Load(); n != 0 {
		t.Errorf("the remote held for approval got %d requests from a gateway no caller called, want none", n)
	}
}

// drainWithin counts what arrives on ch until nothing has for quiet: the gateway spaces
// the notifications it passes on by its gap, so a quiet longer than that means the
// burst is all through.
func drainWithin(ch <-chan struct{}, quiet time.Duration) int {
	n := 0
	for {
		select {
		case <-ch:
			n++
		case <-time.After(quiet):
			return n
		}
	}
}
