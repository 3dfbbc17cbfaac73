package memory

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// TestConcurrentClients: 20 MCP clients create and edit different files at once;
// every write is present and the journal has every entry.
func TestConcurrentClients(t *testing.T) {
	const clients, edits = 20, 5
	s := openStore(t, Guard{})
	srv := newMCPServer(s)
	cs := make([]*client.Client, clients)
	for i := range cs {
		cs[i] = connect(t, srv)
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := fmt.Sprintf("/memories/client-%02d/notes.md", i)
			do := func(a map[string]any) error {
				req := mcp.CallToolRequest{}
				req.Params.Name = adapterconfig.DefaultMemoryToolName
				req.Params.Arguments = a
				res, err := c.CallTool(context.Background(), req)
				if err != nil {
					return err
				}
				if res.IsError {
					return fmt.Errorf("%s %v: %v", path, a["command"], res.Content)
				}
				return nil
			}
			if err := do(map[string]any{"command": "create", "path": path, "file_text": "step 0\n"}); err != nil {
				errs <- err
				return
			}
			for k := range edits {
				if err := do(map[string]any{"command": "str_replace", "path": path, "old_str": fmt.Sprintf("step %d", k), "new_str": fmt.Sprintf("step %d", k+1), "confirm": true}); err != nil {
					errs <- err
					return
				}
				if err := do(map[string]any{"command": "insert", "path": path, "insert_line": k + 1, "insert_text": fmt.Sprintf("client %d edit %d", i, k)}); err != nil {
					errs <- err
					return
				}
				if err := do(map[string]any{"command": "view", "path": path}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	perPath := map[string]int{}
	for _, e := range journalOf(t, s) {
		perPath[e.Path]++
	}
	for i := range clients {
		path := fmt.Sprintf("/memories/client-%02d/notes.md", i)
		var want strings.Builder
		fmt.Fprintf(&want, "step %d\n", edits)
		for k := range edits {
			fmt.Fprintf(&want, "client %d edit %d\n", i, k)
		}
		b, err := os.ReadFile(s.hostPath(path))
		if err != nil || string(b) != want.String() {
			t.Errorf("%s = %q (%v), want %q", path, b, err, want.String())
		}
		if perPath[path] != 1+2*edits {
			t.Errorf("%s has %d journal entries, want %d", path, perPath[path], 1+2*edits)
		}
	}
	if n := len(journalOf(t, s)); n != clients*(1+2*edits) {
		t.Errorf("journal has %d entries, want %d", n, clients*(1+2*edits))
	}
	// the running total matches a fresh measurement
	counted := s.total
	s.mu.Lock()
	err := s.refreshTotal(true)
	s.mu.Unlock()
	if err != nil || s.total != counted {
		t.Errorf("running total %d, measured %d (%v)", counted, s.total, err)
	}
}

// TestStreamableHTTP: the tool works over mcp-go's streamable HTTP transport with a client pinned to 2025-06-18.
func TestStreamableHTTP(t *testing.T) {
	s := openStore(t, Guard{})
	srv := server.NewMCPServer("memory-http", "0.0.1", server.WithToolCapabilities(false))
	srv.AddTool(s.Tool(), s.Handle)
	ts := servertest.NewTestStreamableHTTPServer(srv)
	t.Cleanup(ts.Close) // after the client's Close (cleanups run last-in first-out)
	tr, err := transport.NewStreamableHTTP(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(pinnedProtocol))
	initClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "memory" {
		t.Fatalf("tools/list: %+v %v", tools, err)
	}
	if text, isErr := callTool(t, c, "memory", map[string]any{"command": "create", "path": "/memories/http.md", "file_text": "over http\n"}); isErr {
		t.Fatal(text)
	}
	text, isErr := callTool(t, c, "memory", map[string]any{"command": "view", "path": "/memories/http.md"})
	if isErr || text != "Here's the content of /memories/http.md with line numbers:\n     1\tover http" {
		t.Fatalf("view: %v %q", isErr, text)
	}
	text, isErr = callTool(t, c, "memory", map[string]any{"command": "delete", "path": "/memories/http.md"})
	if !isErr || !strings.HasPrefix(text, RefusedPrefix+"delete of /memories/http.md is destructive") {
		t.Fatalf("delete without confirm: %v %q", isErr, text)
	}
}
