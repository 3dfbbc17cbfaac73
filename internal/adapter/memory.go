package adapter

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/memory"
)

// openMemory opens the store the memory tool serves.
func openMemory(m *MemoryConfig) (*memory.Store, error) {
	store, err := memory.Open(adapterconfig.MemoryStoreConfig(m))
	if err != nil {
		return nil, fmt.Errorf("open memory at %s: %w", m.Root, err)
	}
	return store, nil
}

// memoryTool is the memory tool as served: the store's handler behind the same in-flight
// tracking and metrics as every other tool.
func (s *Server) memoryTool() server.ServerTool {
	name := s.memory.ToolName()
	return server.ServerTool{
		Tool: s.memory.Tool(),
		Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			defer s.holdCall(ctx).release()
			if refused := s.calls.acquire(ctx); refused != nil {
				return refused, nil
			}
			defer s.calls.release()
			start := time.Now()
			result, err := s.memory.Handle(ctx, req)
			if err != nil {
				result, err = mcp.NewToolResultError("memory_call_failed: "+err.Error()), nil
			}
			s.metrics.observeCall(name, result.IsError, time.Since(start))
			return result, err
		},
	}
}

// Close releases what the server holds open besides its listener: the sessions to
// remotes and the memory store. The local runtime calls it when it replaces or stops a
// server.
func (s *Server) Close() error {
	s.remotes.closeAll()
	if s.memory == nil {
		return nil
	}
	return s.memory.Close()
}
