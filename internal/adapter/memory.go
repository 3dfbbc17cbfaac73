package adapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/memory"
)

// validateMemory checks the memory tool's config; tools are the other tool names.
func validateMemory(m *MemoryConfig, tools []string) []error {
	if m == nil {
		return nil
	}
	var errs []error
	if m.Root == "" {
		errs = append(errs, errors.New("memory.root is empty: name the directory that holds the memory files"))
	}
	if !toolNamePattern.MatchString(m.ToolName) {
		errs = append(errs, fmt.Errorf("memory.toolName %q is not a valid MCP tool name: use 1-128 of A-Z a-z 0-9 _ - .", m.ToolName))
	}
	if slices.Contains(tools, m.ToolName) {
		errs = append(errs, fmt.Errorf("memory.toolName %q is also the name of a tool: rename one of them", m.ToolName))
	}
	for _, c := range append(slices.Clone(m.AllowedCommands), m.ConfirmCommands...) {
		if !slices.Contains(memory.AllCommands, c) {
			errs = append(errs, fmt.Errorf("memory command %q is unknown: use one of %v", c, memory.AllCommands))
		}
	}
	return errs
}

// openMemory opens the store the memory tool serves.
func openMemory(m *MemoryConfig) (*memory.Store, error) {
	store, err := memory.Open(MemoryStoreConfig(m))
	if err != nil {
		return nil, fmt.Errorf("open memory at %s: %w", m.Root, err)
	}
	return store, nil
}

// MemoryStoreConfig turns the adapter's memory config into the store's; `adapter memory`
// uses it to open the same store the server does.
func MemoryStoreConfig(m *MemoryConfig) memory.Config {
	return memory.Config{
		Root:     m.Root,
		ToolName: m.ToolName,
		Guard: memory.Guard{
			AllowedCommands: m.AllowedCommands,
			ConfirmCommands: m.ConfirmCommands,
			ReadOnly:        m.ReadOnly,
			MaxFileBytes:    m.MaxFileBytes,
			MaxTotalBytes:   m.MaxTotalBytes,
			TrashRetention:  m.TrashRetention.Duration,
		},
	}
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
