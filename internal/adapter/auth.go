package adapter

import (
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
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

// logCall writes the audit line of a call when callers authenticate — caller, tool,
// outcome and latency, never arguments or tokens — and otherwise the call's debug line.
func (s *Server) logCall(caller *access.Caller, tool, outcome string, result *mcp.CallToolResult, took time.Duration) {
	if s.auth.Enabled() {
		s.log.Info("tool call", "caller", caller.String(), "tool", tool, "outcome", outcome, "latencyMs", took.Milliseconds())
		return
	}
	// Guarded: the arguments would be built even for a disabled level.
	if outcome == jsonrpc.OutcomeError {
		if l := s.log.V(1); l.Enabled() {
			l.Info("tool call failed", "tool", tool, "duration", took.String(), "error", strings.TrimSpace(jsonrpc.ResultText(result)))
		}
	} else if l := s.log.V(2); l.Enabled() {
		l.Info("tool call succeeded", "tool", tool, "duration", took.String())
	}
}
