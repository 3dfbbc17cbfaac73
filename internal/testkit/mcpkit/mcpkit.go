// Package mcpkit holds the test helpers that call an MCP server with mcp-go's client,
// for the tests of the control plane (envtest) and the integration tests alike.
//
// Only tests import it (depguard refuses it in production code).
package mcpkit

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// TransportSSE names the sse transport for WithClient; any other name is streamable
// HTTP.
const TransportSSE = "sse"

// clientTimeout bounds one use of a client, its initialize included.
const clientTimeout = 15 * time.Second

// WithClient runs use with an initialized mcp-go client of the server at url, pinned to
// a protocol version that initializes the classic way (the unpinned client probes
// server/discover first).
func WithClient(ctx context.Context, url, transportName string, headers map[string]string, use func(context.Context, *client.Client) error) error {
	var trans transport.Interface
	var err error
	if transportName == TransportSSE {
		trans, err = transport.NewSSE(url, transport.WithHeaders(headers))
	} else {
		trans, err = transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers))
	}
	if err != nil {
		return fmt.Errorf("transport: %w", err)
	}
	c := client.NewClient(trans, client.WithProtocolVersion("2025-06-18"))
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("start client: %w", err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-06-18",
		ClientInfo:      mcp.Implementation{Name: "cantus-test", Version: "0"},
	}}); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	return use(ctx, c)
}

// CallTool calls tool with args at url, sending headers with every request.
func CallTool(ctx context.Context, url, transportName, tool string, args map[string]any, headers map[string]string) (*mcp.CallToolResult, error) {
	var res *mcp.CallToolResult
	err := WithClient(ctx, url, transportName, headers, func(ctx context.Context, c *client.Client) (err error) {
		res, err = c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
		return err
	})
	return res, err
}

// ResultText is the text of r's text blocks, joined.
func ResultText(r *mcp.CallToolResult) string {
	var text string
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	return text
}
