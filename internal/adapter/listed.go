package adapter

import (
	"encoding/json"
	"fmt"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/memory"
)

// ListedTools are the tools/list entries a server with cfg lists to a caller that may
// see every tool, by name. They are built by the code that builds the served entries
// (mcpTool and mcp-go's encoding of it, the memory store's definition, and the
// gateway's replacement of each imported tool's entry by its remote's definition), so
// that the operator can tell whether pods serve this very config by comparing what they
// list with these. cfg is not compiled: its schemas and templates do not change what is
// listed.
func ListedTools(cfg *Config) (map[string]json.RawMessage, error) {
	listed := make(map[string]json.RawMessage, len(cfg.Tools)+1)
	var remotes []*gateway.Tool
	for i := range cfg.Tools {
		t := &cfg.Tools[i]
		entry, err := json.Marshal(mcpTool(t))
		if err != nil {
			return nil, fmt.Errorf("encode the tools/list entry of tool %q: %w", t.Name, err)
		}
		listed[t.Name] = entry
		if t.Remote != nil {
			remotes = append(remotes, &gateway.Tool{Name: t.Name, Backend: t.Remote})
		}
	}
	for name, def := range gateway.DefinitionsOf(remotes) {
		listed[name] = def
	}
	if cfg.Memory != nil {
		tool, err := memory.ToolDefinition(memory.ConfigFrom(cfg.Memory))
		if err != nil {
			return nil, fmt.Errorf("describe the memory tool: %w", err)
		}
		if listed[tool.Name], err = json.Marshal(tool); err != nil {
			return nil, fmt.Errorf("encode the tools/list entry of the memory tool: %w", err)
		}
	}
	return listed, nil
}

// ListedPrompts are the prompts/list entries a server with cfg lists to a caller that
// may see every prompt, by name, built by the code that builds the served ones.
func ListedPrompts(cfg *Config) (map[string]json.RawMessage, error) {
	listed := make(map[string]json.RawMessage, len(cfg.Prompts))
	for _, p := range cfg.Prompts {
		entry, err := json.Marshal(mcpPrompt(&servedPrompt{Prompt: p}))
		if err != nil {
			return nil, fmt.Errorf("encode the prompts/list entry of prompt %q: %w", p.Name, err)
		}
		listed[p.Name] = entry
	}
	return listed, nil
}
