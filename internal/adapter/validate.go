package adapter

import (
	"text/template"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// compiledTool is a Tool with everything that can fail checked and prepared once, so
// that a call never re-parses its template or schema.
type compiledTool struct {
	adapterconfig.Tool
	schema *jsonschema.Schema
	// fast proves most valid arguments valid without the library's validator.
	fast     *fastSchema
	template *template.Template
	// gateway serves a Remote backend (nil for the others); its remote is linked by
	// the gateway's pool, not by compileConfig.
	gateway *gateway.Tool
}

// compileConfig validates cfg and returns its tools ready to serve.
func compileConfig(cfg *adapterconfig.Config) ([]*compiledTool, error) {
	checked, err := adapterconfig.Compile(cfg)
	if err == nil {
		err = adapterconfig.ValidateDiscovery(cfg)
	}
	if err != nil {
		return nil, err
	}
	tools := make([]*compiledTool, len(checked))
	for i, c := range checked {
		tools[i] = &compiledTool{
			Tool:     *c.Tool,
			schema:   c.Schema,
			fast:     newFastSchema(c.Schema),
			template: c.Template,
		}
		if c.Remote != nil {
			tools[i].gateway = gatewayTool(tools[i])
		}
	}
	return tools, nil
}

// gatewayTool is t as the gateway forwards it, with the server's argument check.
func gatewayTool(t *compiledTool) *gateway.Tool {
	return &gateway.Tool{Name: t.Name, Backend: t.Remote, Arguments: func(req mcp.CallToolRequest) ([]byte, *mcp.CallToolResult) {
		args, _, refused := validArguments(t, req)
		return args, refused
	}}
}

// gatewayToolsOf are the tools of the gateway, in config order.
func gatewayToolsOf(tools []*compiledTool) []*gateway.Tool {
	var out []*gateway.Tool
	for _, t := range tools {
		if t.gateway != nil {
			out = append(out, t.gateway)
		}
	}
	return out
}
