package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A remote of protocol 2026-07-28 may answer prompts/get, as tools/call, with an
// input-required result (SEP-2322). The gateway passes it on as it does a tool's
// (askCaller): the requests it relays for the import, and the remote's state sealed for
// this caller's retry of this prompt, which GetPrompt opens again.

func (it *Item) sealedName() string { return "prompt:" + it.Key }
func (it *Item) importName() string { return it.Backend.Import }

// openAnswers are the answers to send the remote on a retry: the caller's input
// responses, and the remote's state out of the gateway's. A state the gateway cannot
// open is refused as invalid params.
func (it *Item) openAnswers(ctx context.Context, answers mcpclient.InputAnswers) (mcpclient.InputAnswers, error) {
	if answers.RequestState == "" {
		return answers, nil
	}
	remoteState, err := it.remote.relay.states.open(answers.RequestState, callerOf(ctx), it)
	if err != nil {
		message := MarkerInputRefused + err.Error()
		return answers, &ForwardError{RPC: &mcpclient.RPCError{Code: mcp.INVALID_PARAMS, Message: message}, Message: message, Status: http.StatusBadRequest}
	}
	answers.RequestState = remoteState
	return answers, nil
}

// askCallerForPrompt is the gateway's input-required result for the remote's, raw: a
// caller of protocol 2026-07-28 gets the requests the import relays and a sealed state;
// an older caller, who cannot retry with answers, an error that says so.
func (it *Item) askCallerForPrompt(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
	if !server.IsModernRequest(ctx) {
		return nil, &ForwardError{Message: fmt.Sprintf("%sthe remote (import %s) asks for input before it gives prompt %q, which only a client of protocol 2026-07-28 can give",
			MarkerCallFailed, it.Backend.Import, it.Key)}
	}
	asked, refused := passOnInput(ctx, raw, it.Backend.Relay, func(method string) string {
		return fmt.Sprintf("cantus gateway: %s is not passed to the callers of prompt %q: the owner of this gateway has not enabled it for import %s (spec.imports[].relay)",
			method, it.Key, it.Backend.Import)
	}, modernCallerCannotAnswer)
	it.remote.metrics.countInput(it.Backend.Import, asked, refused)
	if refused != nil {
		return nil, &ForwardError{Message: refused.message}
	}
	state, err := it.remote.relay.states.seal(asked.RequestState, callerOf(ctx), it)
	if err != nil {
		return nil, &ForwardError{Message: MarkerRemoteError + err.Error()}
	}
	// Not mcp.GetPromptResult, whose messages member is never left out.
	return marshalKeepingHTML(map[string]any{
		"resultType": mcp.ResultTypeInputRequired, "inputRequests": asked.InputRequests, "requestState": state,
	})
}
