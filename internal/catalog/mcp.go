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
		mcp.WithDescription("List the MCP servers you may see (namespace, name, URL, transport, Ready) with the names of their tools, prompts, Agent Skills and resources."),
		readOnly,
	), c.listServersTool)
	s.AddTool(mcp.NewTool("get_server",
		mcp.WithDescription("Get one server with everything it serves you: tools with their schemas, Agent Skills with their frontmatter and manifest digests, prompts with their arguments, resources and resource templates."),
		mcp.WithString("server", mcp.Required(), mcp.Description("The server as namespace/name, as list_servers shows it.")),
		readOnly,
	), c.getServerTool)
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
	out := make([]serverSummary, 0, len(servers))
	for _, s := range servers {
		out = append(out, summarize(s))
	}
	return jsonResult(map[string]any{"servers": out})
}

// serverSummary is a server with the names of what it serves instead of their definitions.
type serverSummary struct {
	Endpoint
	Tools       []string `json:"tools"`
	AgentSkills []string `json:"agentSkills,omitempty"`
	Prompts     []string `json:"prompts,omitempty"`
	// Resources are the static resources' URIs and the templates' uriTemplates.
	Resources []string `json:"resources,omitempty"`
}

func summarize(s Server) serverSummary {
	out := serverSummary{Endpoint: s.Endpoint, Tools: names(s.Tools, func(t Tool) string { return t.Name })}
	out.AgentSkills = names(s.AgentSkills, func(k AgentSkill) string { return k.URI })
	out.Prompts = names(s.Prompts, func(p Prompt) string { return p.Name })
	out.Resources = append(names(s.Resources, func(r Resource) string { return r.URI }),
		names(s.ResourceTemplates, func(r ResourceTemplate) string { return r.URITemplate })...)
	return out
}

func names[T any](items []T, name func(T) string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, name(it))
	}
	return out
}

func (c *Catalog) getServerTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	servers, err := c.visibleServers(ctx)
	if err != nil {
		return mcp.NewToolResultError("catalog_call_failed: " + err.Error()), nil
	}
	s, err := FindServer(servers, req.GetString("server", ""))
	if err != nil {
		return mcp.NewToolResultError("catalog_call_failed: " + err.Error()), nil
	}
	return jsonResult(s)
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
