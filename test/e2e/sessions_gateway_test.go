package e2e

import (
	"testing"

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
