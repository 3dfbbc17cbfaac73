package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A remote's sampling/createMessage reaches the caller with includeContext "none",
// however the remote asked for context from the caller's other servers (any spelling
// of the key), so that no host sends it what the caller's other servers gave it.
func TestRelayedSamplingNeverIncludesOtherContext(t *testing.T) {
	tool := &Tool{Name: "ask", Backend: &adapterconfig.RemoteBackend{Import: "ns/remote", Relay: []string{adapterconfig.RelaySampling}}}
	for _, params := range []string{
		`{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10,"includeContext":"allServers"}`,
		`{"messages":[],"maxTokens":10,"IncludeContext":"thisServer"}`,
		`{"messages":[],"maxTokens":10,"includeContext":"none","INCLUDECONTEXT":"allServers"}`,
		`{"messages":[],"maxTokens":10}`,
	} {
		wc := &waitingCall{tool: tool, asked: make(chan *remoteRequest, 1)}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		go func() {
			_, _ = wc.ask(ctx, mcpclient.Message{Method: string(mcp.MethodSamplingCreateMessage), Params: json.RawMessage(params)})
		}()
		select {
		case q := <-wc.asked:
			if q.input.Sampling == nil || q.input.Sampling.IncludeContext != "none" {
				t.Errorf("params %s reached the caller as %+v, want includeContext none", params, q.input.Sampling)
			}
			out, _ := json.Marshal(q.input)
			t.Logf("asked the caller: %s", out)
		case <-ctx.Done():
			t.Errorf("params %s: the request never reached the caller", params)
		}
		cancel()
	}
}
