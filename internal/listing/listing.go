// Package listing builds the entries an adapter lists (tools/list, prompts/list) from
// its config. The adapter serves what it builds, and the operator builds the same
// entries from the config it rendered to tell whether pods serve that config: one
// code for both, so that the comparison is exact, mcp-go's encoding included (it
// always writes "annotations", for one). It is a leaf of the data plane that the control
// plane may link: it holds no server, gateway or store.
package listing

import (
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Tool describes a configured tool to clients. The schema is passed as raw bytes so
// that it reaches them exactly as the user wrote it.
func Tool(t *adapterconfig.Tool) mcp.Tool {
	tool := mcp.Tool{
		Name:           t.Name,
		Description:    t.Description,
		RawInputSchema: t.InputSchema,
	}
	if a := t.Annotations; a != nil {
		tool.Annotations = mcp.ToolAnnotation{
			Title:           a.Title,
			ReadOnlyHint:    a.ReadOnlyHint,
			DestructiveHint: a.DestructiveHint,
			IdempotentHint:  a.IdempotentHint,
			OpenWorldHint:   a.OpenWorldHint,
		}
	}
	return tool
}

// RemoteEntry is the tools/list entry of an imported tool: its remote's definition
// (the member set the remote sent, mcp-go's types would drop some) under the served
// name. It is false for a definition that is not a JSON object, whose tool is then
// listed as Tool describes it.
func RemoteEntry(served string, definition json.RawMessage) (json.RawMessage, bool) {
	if len(definition) == 0 {
		return nil, false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(definition, &members) != nil || members == nil {
		return nil, false
	}
	members["name"], _ = json.Marshal(served)
	entry, err := json.Marshal(members)
	if err != nil {
		return nil, false
	}
	return entry, true
}

// Prompt describes a configured prompt to clients.
func Prompt(p *adapterconfig.Prompt) mcp.Prompt {
	out := mcp.Prompt{Name: p.Name, Title: p.Title, Description: p.Description}
	for _, a := range p.Arguments {
		out.Arguments = append(out.Arguments, mcp.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
	}
	return out
}

// Tools are the tools/list entries an adapter serving cfg lists to a caller that may
// see every tool, by name: each configured tool, an imported one as its remote defined
// it, and the memory tool. cfg is not compiled: its schemas and templates do not change
// what is listed.
func Tools(cfg *adapterconfig.Config) (map[string]json.RawMessage, error) {
	listed := make(map[string]json.RawMessage, len(cfg.Tools)+1)
	for i := range cfg.Tools {
		t := &cfg.Tools[i]
		if t.Remote != nil {
			if entry, ok := RemoteEntry(t.Name, t.Remote.Definition); ok {
				listed[t.Name] = entry
				continue
			}
		}
		entry, err := json.Marshal(Tool(t))
		if err != nil {
			return nil, fmt.Errorf("encode the tools/list entry of tool %q: %w", t.Name, err)
		}
		listed[t.Name] = entry
	}
	if cfg.Memory != nil {
		memoryTool, err := adapterconfig.NewMemoryTool(*cfg.Memory)
		if err != nil {
			return nil, fmt.Errorf("describe the memory tool: %w", err)
		}
		tool := memoryTool.Definition()
		if listed[tool.Name], err = json.Marshal(tool); err != nil {
			return nil, fmt.Errorf("encode the tools/list entry of the memory tool: %w", err)
		}
	}
	return listed, nil
}

// Prompts are the prompts/list entries an adapter serving cfg lists to a caller that
// may see every prompt, by name.
func Prompts(cfg *adapterconfig.Config) (map[string]json.RawMessage, error) {
	listed := make(map[string]json.RawMessage, len(cfg.Prompts))
	for i := range cfg.Prompts {
		p := &cfg.Prompts[i]
		entry, err := json.Marshal(Prompt(p))
		if err != nil {
			return nil, fmt.Errorf("encode the prompts/list entry of prompt %q: %w", p.Name, err)
		}
		listed[p.Name] = entry
	}
	return listed, nil
}
