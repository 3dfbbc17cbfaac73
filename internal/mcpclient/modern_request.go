package mcpclient

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// The methods of the Tasks extension (io.modelcontextprotocol/tasks, SEP-2663) of
// protocol 2026-07-28. Their Mcp-Name header is params.taskId.
const (
	MethodTasksGet    mcp.MCPMethod = "tasks/get"
	MethodTasksUpdate mcp.MCPMethod = "tasks/update"
	MethodTasksCancel mcp.MCPMethod = "tasks/cancel"
)

// Request sends one request of protocol 2026-07-28 that this package has no method
// of its own for (an extension's, such as tasks/get) and returns its result as sent.
// params is a JSON object or nil; its _meta gets the era's members, from meta when
// set, else from the session's. A JSON-RPC error comes back as an *RPCError.
func (s *Session) Request(ctx context.Context, method string, params any, meta *RequestMeta) (json.RawMessage, error) {
	if s.modern == nil {
		return nil, &Error{Reason: ReasonInvalidConfig, Detail: method + " is sent in protocol " + EraModern + " only", NotProcessed: true}
	}
	return s.requestAsking(ctx, method, params, nil, nil, meta)
}
