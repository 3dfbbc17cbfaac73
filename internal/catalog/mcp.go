package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/catalog/formats"
)

// newMCPServer offers the catalog to agents that discover with MCP itself.
func newMCPServer(c *Catalog) *server.MCPServer {
	s := server.NewMCPServer("cantus-catalog", "v1alpha1",
		server.WithToolCapabilities(false),
		server.WithInstructions("Discover the MCP servers of this cluster and their tools: list_servers, then search_tools, then get_tool in the shape your framework needs."))
	readOnly := mcp.WithReadOnlyHintAnnotation(true)
	s.AddTool(mcp.NewTool("list_servers",
		mcp.WithDescription("List the MCP servers you may see (namespace, name, URL, transport, Ready) with their tool names."),
		readOnly,
	), c.listServersTool)
	s.AddTool(mcp.NewTool("search_tools",
		mcp.WithDescription("Find tools whose name or description contains every word of the query."),
		mcp.WithString("query", mcp.Required(), mcp.Description("Words to look for, e.g. \"book search\".")),
		readOnly,
	), c.searchToolsTool)
	s.AddTool(mcp.NewTool("get_tool",
		mcp.WithDescription("Get one tool's definition in a framework's shape."),
		mcp.WithString("server", mcp.Required(), mcp.Description("The server as namespace/name, as list_servers shows it.")),
		mcp.WithString("name", mcp.Required(), mcp.Description("The tool name.")),
		mcp.WithString("format", mcp.Enum(formats.Formats...), mcp.Description("The shape: "+strings.Join(formats.Formats, ", ")+" (default mcp).")),
		readOnly,
	), c.getToolTool)
	return s
}

func (c *Catalog) visibleServers(ctx context.Context) ([]Server, error) {
	v := viewerFrom(ctx)
	if v == nil {
		return nil, fmt.Errorf("unauthenticated")
	}
	return c.Servers(ctx, v)
}

func (c *Catalog) listServersTool(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	servers, err := c.visibleServers(ctx)
	if err != nil {
		return mcp.NewToolResultError("catalog_call_failed: " + err.Error()), nil
	}
	type summary struct {
		Server
		Tools []string `json:"tools"`
	}
	out := make([]summary, 0, len(servers))
	for _, s := range servers {
		names := make([]string, 0, len(s.Tools))
		for _, t := range s.Tools {
			names = append(names, t.Name)
		}
		s.Tools = nil
		out = append(out, summary{Server: s, Tools: names})
	}
	return jsonResult(map[string]any{"servers": out})
}

func (c *Catalog) searchToolsTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	servers, err := c.visibleServers(ctx)
	if err != nil {
		return mcp.NewToolResultError("catalog_call_failed: " + err.Error()), nil
	}
	return jsonResult(map[string]any{"tools": nonNil(Search(servers, req.GetString("query", "")))})
}

func (c *Catalog) getToolTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	servers, err := c.visibleServers(ctx)
	if err != nil {
		return mcp.NewToolResultError("catalog_call_failed: " + err.Error()), nil
	}
	rendered, err := RenderTool(servers, req.GetString("server", ""), req.GetString("name", ""), req.GetString("format", "mcp"))
	if err != nil {
		return mcp.NewToolResultError("catalog_call_failed: " + err.Error()), nil
	}
	return jsonResult(rendered)
}

func jsonResult(v any) (*mcp.CallToolResult, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return mcp.NewToolResultError("catalog_call_failed: " + err.Error()), nil
	}
	return mcp.NewToolResultText(string(data)), nil
}
