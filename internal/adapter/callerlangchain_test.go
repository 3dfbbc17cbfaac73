package adapter

import (
	"context"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// An agent framework on the caller side: LangChain.js (@langchain/mcp-adapters), run
// by two agents with their own service-account tokens, loads a gateway's tools, finds
// the imported whoami tool and calls it; the remote sees each agent's own subject,
// through the token exchange, and never the other's.
func TestCallerCredentials_LangChainAgentsActAsTheirUsers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs LangChain.js on Node")
	}
	w := startExchangeWorldWith(t, remoteAudience, func(cfg *adapterconfig.Config) {
		cfg.Discovery = &adapterconfig.Discovery{Mode: adapterconfig.DiscoverySearch, FindToolName: "find_tools",
			CallToolName: "call_tool", DefaultLimit: 5, MaxLimit: 20}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, name := range []string{"ada", "bo"} {
		token := w.cluster.ServiceAccountToken(t, "team", name, "uid-"+name, "room")
		out := peers.LangChainAgent(t, ctx, peers.LangChainAgentOptions{
			URL: w.gateway.baseURL + adapterconfig.PathMCP, Headers: map[string]string{"Authorization": "Bearer " + token},
			ExpectTools: []string{"call_tool", "find_tools"},
			Task:        "whoami: which user the remote service sees me as", Args: map[string]any{},
		})
		if out.Chosen != "team.whoami" {
			t.Fatalf("agent %s chose %q among %v, want team.whoami", name, out.Chosen, out.FoundNames())
		}
		if want := "remote saw subject=system:serviceaccount:team:" + name + " act=-"; out.Result != want {
			t.Errorf("agent %s got %q, want %q", name, out.Result, want)
		}
	}
}
