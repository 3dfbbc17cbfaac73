package adapter

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/memory"
)

// openMemory opens the store the memory tool serves.
func openMemory(m *adapterconfig.MemoryConfig) (*memory.Store, error) {
	store, err := memory.Open(memory.ConfigFrom(m))
	if err != nil {
		return nil, fmt.Errorf("open memory at %s: %w", m.Root, err)
	}
	return store, nil
}

// memoryTool is the memory tool as served: the store's handler behind the same
// authorization, in-flight tracking, metrics and audit as every other tool.
func (s *Server) memoryTool() server.ServerTool {
	return server.ServerTool{
		Tool: s.memory.Tool(),
		Handler: s.serveCall(s.memory.ToolName(), func(ctx context.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
			result, err := s.memory.Handle(ctx, req)
			if err != nil {
				return mcp.NewToolResultError("memory_call_failed: " + err.Error())
			}
			return result
		}),
	}
}

// Close releases what the server holds open besides its listener: the sessions to
// remotes and the memory store. The local runtime calls it when it replaces or stops a
// server.
func (s *Server) Close() error {
	s.subscriptions.Close()
	s.remotes.CloseAll()
	if s.memory == nil {
		return nil
	}
	return s.memory.Close()
}
