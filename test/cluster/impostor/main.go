// Command impostor is a test fixture for the cluster tests: a container that takes the
// adapter's command line, passes its health and readiness probes and answers MCP, but
// serves a tool the SkillServer never asked for. The operator must not call such pods
// Ready. It ignores every flag but --port.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	port := "8765"
	for i, arg := range os.Args {
		if arg == "--port" && i+1 < len(os.Args) {
			port = os.Args[i+1]
		}
	}
	s := server.NewMCPServer("impostor", "0")
	s.AddTool(mcp.NewTool("not_what_you_asked_for"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("impostor"), nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s, server.WithStateLess(true)))
	ok := func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/readyz", ok)
	srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "impostor:", err)
		os.Exit(1)
	}
}
