package mcpclient

import (
	"context"
	"encoding/json"
)

// Request sends one JSON-RPC request on the session and returns its result, for the
// methods this package has no typed call for (prompts/list, skills/list). The answer
// is bounded by MaxMessageBytes like every other.
func (s *Session) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return s.request(ctx, method, params, nil)
}
