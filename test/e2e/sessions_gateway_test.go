package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/peers"
	"github.com/cantus-dev/cantus-operator/test/testenv/pollingremote"
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
	remote := &remoteSpec{Import: "e2e/polling", URL: pollingremote.Start(t, 200*time.Millisecond).URL, Transport: peers.TransportStreamableHTTP, RemoteName: "test_reconnection", Timeout: "20s"}
	gateway := startAskingGateway(t, ctx, false, []gatewayTool{{Name: "test_reconnection", Description: "Re-exported test_reconnection.",
		InputSchema: json.RawMessage(`{"type":"object"}`), Remote: remote}})
	checks := peers.RunConformance(t, ctx, gateway, "server-sse-polling")
	for _, c := range checks {
		t.Logf("%s %s %s", c.ID, c.Status, c.Description)
	}
	peers.RequireChecksPassed(t, "server-sse-polling", checks, sseEventChecks...)
}
