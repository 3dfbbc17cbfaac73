package adapterconfig

import (
	"errors"
	"fmt"
	"slices"

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
		errs = append(errs, fmt.Errorf("memory.toolName %q is not a valid MCP tool name: use 1-128 of the characters A-Z a-z 0-9 . _ -", m.ToolName))
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
