package content

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

// ServesCompletions says whether cfg imports what completions could be asked about.
func ServesCompletions(cfg *adapterconfig.Config) bool {
	return cfg.Imported != nil && len(cfg.Imported.Prompts)+len(cfg.Imported.ResourceTemplates) > 0
}

// completionOptions are the mcp-go options for completions, when served.
func (cp *Part) completionOptions() []server.ServerOption {
	if !ServesCompletions(cp.cfg) {
		return nil
	}
	c := (*importedCompletions)(cp)
	return []server.ServerOption{server.WithCompletions(), server.WithPromptCompletionProvider(c), server.WithResourceCompletionProvider(c)}
}

// importedCompletions is the part as mcp-go's completion providers.
type importedCompletions Part

// CompletePromptArgument implements server.PromptCompletionProvider.
func (c *importedCompletions) CompletePromptArgument(ctx context.Context, name string, argument mcp.CompleteArgument, resolved mcp.CompleteContext) (*mcp.Completion, error) {
	cp := (*Part)(c)
	p := cp.set.Load().imported.promptByName[name]
	if p == nil || !cp.filter.Allows(ctx, access.ItemPrompt, name) {
		return noCompletion(), nil
	}
	return forwardCompletion(ctx, p.item, argument, resolved)
}

// CompleteResourceArgument implements server.ResourceCompletionProvider.
func (c *importedCompletions) CompleteResourceArgument(ctx context.Context, uri string, argument mcp.CompleteArgument, resolved mcp.CompleteContext) (*mcp.Completion, error) {
	cp := (*Part)(c)
	for _, t := range cp.set.Load().imported.templates {
		if t.item.Key == uri && cp.filter.Allows(ctx, access.ItemResource, uri) {
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
