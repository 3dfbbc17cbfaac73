package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"text/template"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The adapter comparison: the adapter (internal/adapter) against a bare mcp-go server
// that renders the same text with the same text/template.

// adapterTargets bound adapter/bare.
var adapterTargets = targets{minThroughput: 0.9, maxP99: 1.2}

// adapterComparison measures the adapter against a bare mcp-go server serving the same
// template skill.
func adapterComparison(token string, newTarget func(name, url, tool string) target) (comparison, func(), error) {
	adapterURL, stopAdapter, err := startTemplateAdapter(nameAdapter, token)
	if err != nil {
		return comparison{}, nil, err
	}
	bareURL, stopBare, err := startBare()
	if err != nil {
		stopAdapter()
		return comparison{}, nil, err
	}
	return comparison{
		name:    onlyAdapter,
		title:   fmt.Sprintf("adapter/bare: tools/call %s on the adapter and on a bare mcp-go server", toolName),
		a:       newTarget(nameAdapter, adapterURL, toolName),
		b:       newTarget(nameBare, bareURL, toolName),
		targets: adapterTargets,
	}, stops{stopAdapter, stopBare}.run, nil
}

// startBare serves the same tool with mcp-go alone: one AddTool whose handler renders
// the same text with the same text/template (parsed once, missingkey=error as the
// adapter does), over the arguments mcp-go already decoded.
func startBare() (string, func(), error) {
	tmpl, err := template.New(toolName).Option("missingkey=error").Parse(toolTemplate)
	if err != nil {
		return "", nil, fmt.Errorf("bare: parse template: %w", err)
	}
	m := server.NewMCPServer("bare-bench", "0.0.0", server.WithToolCapabilities(false))
	m.AddTool(mcp.NewToolWithRawSchema(toolName, toolDesc, json.RawMessage(toolSchema)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var sb strings.Builder
			if err := tmpl.Execute(&sb, req.GetArguments()); err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(sb.String()), nil
		})
	return serveBare(m)
}

// serveBare serves a bare mcp-go server as the adapter serves: streamable HTTP,
// stateless, at the same path.
func serveBare(m *server.MCPServer) (string, func(), error) {
	streamable := server.NewStreamableHTTPServer(m,
		server.WithEndpointPath(adapterconfig.PathMCP),
		server.WithStateLess(true),
	)
	mux := http.NewServeMux()
	mux.Handle(adapterconfig.PathMCP, streamable)
	base, stop, err := serveLabelled(nameBare, mux)
	if err != nil {
		return "", nil, err
	}
	return base + adapterconfig.PathMCP, stop, nil
}
