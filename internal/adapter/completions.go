package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// completion/complete about an imported prompt or resource template goes to the remote
// that serves it; about anything else it answers no values. A gateway declares the
// completions capability when its config (at start) imports prompts or templates: the
// capability cannot change on a running server, so a change of that restarts the pods
// (see the rollout hash) or the local adapter.

// maxCompletionValues is MCP's limit on the values of one completion; a remote that
// sends more is cut to it (hasMore then says there are more).
const maxCompletionValues = 100

// servesCompletions says whether cfg imports what completions could be asked about.
func servesCompletions(cfg *adapterconfig.Config) bool {
	return cfg.Imported != nil && len(cfg.Imported.Prompts)+len(cfg.Imported.ResourceTemplates) > 0
}

// completionOptions are the mcp-go options for completions, when served.
func (s *Server) completionOptions() []server.ServerOption {
	if !servesCompletions(&s.cfg) {
		return nil
	}
	c := (*importedCompletions)(s)
	return []server.ServerOption{server.WithCompletions(), server.WithPromptCompletionProvider(c), server.WithResourceCompletionProvider(c)}
}

// importedCompletions is the server as mcp-go's completion providers.
type importedCompletions Server

// CompletePromptArgument implements server.PromptCompletionProvider.
func (c *importedCompletions) CompletePromptArgument(ctx context.Context, name string, argument mcp.CompleteArgument, resolved mcp.CompleteContext) (*mcp.Completion, error) {
	s := (*Server)(c)
	p := s.content.Load().imported.promptByName[name]
	if p == nil || !s.filter.Allows(ctx, access.ItemPrompt, name) {
		return noCompletion(), nil
	}
	return forwardCompletion(ctx, p.item, argument, resolved)
}

// CompleteResourceArgument implements server.ResourceCompletionProvider.
func (c *importedCompletions) CompleteResourceArgument(ctx context.Context, uri string, argument mcp.CompleteArgument, resolved mcp.CompleteContext) (*mcp.Completion, error) {
	s := (*Server)(c)
	for _, t := range s.content.Load().imported.templates {
		if t.item.Key == uri && s.filter.Allows(ctx, access.ItemResource, uri) {
			return forwardCompletion(ctx, t.item, argument, resolved)
		}
	}
	return noCompletion(), nil
}

func noCompletion() *mcp.Completion { return &mcp.Completion{Values: []string{}} }

// forwardCompletion asks the item's remote; a remote that does not serve completions
// (method not found) has none to give.
func forwardCompletion(ctx context.Context, it *gateway.Item, argument mcp.CompleteArgument, resolved mcp.CompleteContext) (*mcp.Completion, error) {
	var chosen any
	if len(resolved.Arguments) > 0 {
		chosen = resolved
	}
	raw, err := it.Complete(ctx, argument, chosen)
	var fe *gateway.ForwardError
	if errors.As(err, &fe) && fe.RPC != nil && fe.RPC.Code == mcp.METHOD_NOT_FOUND {
		return noCompletion(), nil
	}
	if err != nil {
		return nil, err
	}
	var result struct {
		Completion mcp.Completion `json:"completion"`
	}
	if err := json.Unmarshal(raw, &result); err != nil {
		return nil, fmt.Errorf("%sthe remote's answer to completion/complete is not a completion: %w", gateway.MarkerRemoteError, err)
	}
	out := result.Completion
	if out.Values == nil {
		out.Values = []string{}
	}
	if len(out.Values) > maxCompletionValues {
		out.Values, out.HasMore = out.Values[:maxCompletionValues], true
	}
	return &out, nil
}
