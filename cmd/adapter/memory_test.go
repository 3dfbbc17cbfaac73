package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/memory"
)

// An operator undoes an agent's delete with `adapter memory trash` and `restore`, given
// the same adapter config the server runs with.
func TestMemoryCommandRestoresATrashedFile(t *testing.T) {
	root := t.TempDir()
	cfg := &adapterconfig.Config{Server: adapterconfig.ServerInfo{Name: "m", Version: "1"}, Transport: adapterconfig.TransportStreamableHTTP,
		Memory: &adapterconfig.MemoryConfig{Root: root, ToolName: "memory", MaxFileBytes: 1 << 20, MaxTotalBytes: 1 << 26,
			TrashRetention: adapterconfig.Duration{Duration: 24 * 3600e9}}}
	data, _ := json.Marshal(cfg)
	configPath := filepath.Join(t.TempDir(), "adapter.json")
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		t.Fatal(err)
	}

	store, err := memory.Open(memory.ConfigFrom(cfg.Memory))
	if err != nil {
		t.Fatal(err)
	}
	call := func(args map[string]any) {
		t.Helper()
		res, err := store.Handle(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "memory", Arguments: args}})
		if err != nil || res.IsError {
			t.Fatalf("%v: %v %+v", args, err, res)
		}
	}
	call(map[string]any{"command": "create", "path": "/memories/plan.md", "file_text": "keep me\n"})
	call(map[string]any{"command": "delete", "path": "/memories/plan.md", "confirm": true})
	store.Close()

	var out, errOut bytes.Buffer
	if code := run([]string{"memory", "trash", "--config", configPath}, &out, &errOut); code != exitOK {
		t.Fatalf("trash: exit %d: %s", code, errOut.String())
	}
	var entry memory.TrashEntry
	if err := json.Unmarshal(bytes.SplitN(out.Bytes(), []byte("\n"), 2)[0], &entry); err != nil {
		t.Fatalf("trash output %q: %v", out.String(), err)
	}
	if entry.Path != "/memories/plan.md" {
		t.Fatalf("trash lists %q, want /memories/plan.md", entry.Path)
	}

	out.Reset()
	if code := run([]string{"memory", "restore", "--config", configPath, entry.ID}, &out, &errOut); code != exitOK {
		t.Fatalf("restore: exit %d: %s", code, errOut.String())
	}
	got, err := os.ReadFile(filepath.Join(root, "memories", "plan.md"))
	if err != nil || string(got) != "keep me\n" {
		t.Fatalf("restored file: %q, %v", got, err)
	}

	out.Reset()
	if code := run([]string{"memory", "journal", "--config", configPath}, &out, &errOut); code != exitOK {
		t.Fatalf("journal: exit %d: %s", code, errOut.String())
	}
	if n := strings.Count(out.String(), "\n"); n != 3 {
		t.Fatalf("journal has %d entries (create, delete, restore expected):\n%s", n, out.String())
	}
}
