package gateway

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// RemoteError is a JSON-RPC error of a remote that a caller of protocol 2026-07-28 gets
// as the remote sent it (its message scrubbed of the remote's credentials), not as a
// tool error: a remote's -32021 (Missing Required Client Capability), which says what
// the caller must declare, such as a tool that runs only as a task
// (io.modelcontextprotocol/tasks).
type RemoteError struct {
	Code    int
	Message string
	Data    json.RawMessage
}

func (e *RemoteError) Error() string { return e.Message }

// details is the error member of the JSON-RPC answer.
func (e *RemoteError) details() map[string]any {
	details := map[string]any{"code": e.Code, "message": e.Message}
	if len(e.Data) > 0 {
		details["data"] = e.Data
	}
	return details
}

// remoteNeedsCapability answers the call of ctx, which the remote refused -32021, with
// that error when the caller speaks 2026-07-28 (HTTP 400, as SEP-2575 answers it); the
// result returned is the tool error a caller of an older era gets, and stands for the
// error where it replaces the answer.
func remoteNeedsCapability(ctx context.Context, rpcErr *mcpclient.RPCError, client *mcpclient.Client) *mcp.CallToolResult {
	e := &RemoteError{Code: rpcErr.Code, Message: client.Redact(rpcErr.Message), Data: rpcErr.Data}
	switch {
	case server.IsModernRequest(ctx):
		// mcp-go serves the call: its answer is replaced.
		var data any
		if len(e.Data) > 0 {
			data = e.Data
		}
		eventWatchOf(ctx).failWith(http.StatusBadRequest, e.Code, e.Message, data)
	case server.ServerFromContext(ctx) == nil:
		// The pass-through serves the call, and forwards only calls of 2026-07-28 in
		// that era.
		failCall(ctx, e)
	}
	return mcp.NewToolResultError(MarkerRemoteError + client.Redact(rpcErr.Error()))
}
