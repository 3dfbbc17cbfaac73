package adapter

import (
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// authSettings are what the config and options say about callers: WithBearerToken's
// tokens replace the config's token file.
func authSettings(cfg *adapterconfig.Config, o options) access.Settings {
	s := access.Settings{BearerTokenFile: cfg.BearerTokenFile, Auth: cfg.Auth}
	if o.bearerToken != nil {
		s.BearerTokens = []string{*o.bearerToken}
	}
	return s
}

// notAllowed is the answer to a call the rules do not allow. It names neither the
// rules nor any other caller.
func notAllowed(tool string) *mcp.CallToolResult {
	return mcp.NewToolResultError(fmt.Sprintf("not_allowed: tool %q is not allowed for this caller; ask the owner of the server for access", tool))
}
