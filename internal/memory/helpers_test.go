package memory

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// pinnedProtocol keeps mcp-go v1.2.1's client on the initialize handshake
// (unpinned, it first probes with server/discover).
const pinnedProtocol = "2025-06-18"

func openStore(t testing.TB, g Guard) *Store {
	t.Helper()
	s, err := Open(Config{Root: t.TempDir(), Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newMCPServer(s *Store) *server.MCPServer {
	srv := server.NewMCPServer("memory-test", "0.0.1", server.WithToolCapabilities(false))
	srv.AddTool(s.Tool(), s.Handle)
	return srv
}

// connect starts an in-process MCP client against srv.
func connect(t testing.TB, srv *server.MCPServer) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClientWithOptions(srv, client.WithProtocolVersion(pinnedProtocol))
	if err != nil {
		t.Fatal(err)
	}
	initClient(t, c)
	return c
}

func initClient(t testing.TB, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = pinnedProtocol
	req.Params.ClientInfo = mcp.Implementation{Name: "memory-test-client", Version: "0.0.1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
}

// harness is a store behind a real MCP server and client.
type harness struct {
	t testing.TB
	s *Store
	c *client.Client
}

func newHarness(t testing.TB, g Guard) *harness {
	s := openStore(t, g)
	return &harness{t: t, s: s, c: connect(t, newMCPServer(s))}
}

// call runs the memory tool through the MCP client and returns its text and isError.
func (h *harness) call(a map[string]any) (string, bool) {
	h.t.Helper()
	return callTool(h.t, h.c, h.s.ToolName(), a)
}

func callTool(t testing.TB, c *client.Client, name string, a map[string]any) (string, bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = a
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("CallTool(%v): transport error %v", a, err)
	}
	var texts []string
	for _, ct := range res.Content {
		if tc, ok := mcp.AsTextContent(ct); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n"), res.IsError
}

// memPath is the host path of a virtual /memories path.
func (s *Store) hostPath(virt string) string {
	return filepath.Join(s.root, memoriesDir, filepath.FromSlash(strings.TrimPrefix(virt, VirtualRoot)))
}

func writeFile(t testing.TB, s *Store, virt, content string) {
	t.Helper()
	p := s.hostPath(virt)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	// files written behind the store's back: measure again
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refreshTotal(true); err != nil {
		t.Fatal(err)
	}
}

// snapshot maps every entry under memories/ (relative slash path) to its content ("<dir>" for directories, "-> target" for symlinks).
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case d.IsDir():
			out[rel] = "<dir>"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func journalOf(t testing.TB, s *Store) []JournalEntry {
	t.Helper()
	es, err := s.Journal()
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func ptr[T any](v T) *T { return &v }
