package adapterconfig

import (
	"errors"
	"fmt"
	"slices"
)

// MemoryCommands are the memory tool's commands, in their documented order: the names
// allowedCommands and confirmCommands may hold. Package memory implements them (its test
// keeps the two lists equal); the contract names them so that the operator can check a
// config without linking the store.
var MemoryCommands = []string{"view", "create", "str_replace", "insert", "delete", "rename"}

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
		if !slices.Contains(MemoryCommands, c) {
			errs = append(errs, fmt.Errorf("memory command %q is unknown: use one of %v", c, MemoryCommands))
		}
	}
	return errs
}
