package memory

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestGuardRefusals: every refusal is a tool error starting with memory_refused:,
// says how to fix the call, and changes nothing (files, trash, journal).
func TestGuardRefusals(t *testing.T) {
	quota := Guard{MaxFileBytes: 16, MaxTotalBytes: 40}
	tests := []commandCase{
		{
			name: "empty path", args: map[string]any{"command": "view", "path": ""},
			want: "memory_refused: path is empty; give a path under /memories, e.g. /memories/notes.md",
		},
		{
			name: "blank path", args: map[string]any{"command": "create", "path": "   ", "file_text": "x"},
			want: "memory_refused: path is empty; give a path under /memories, e.g. /memories/notes.md",
		},
		{
			name: "missing path", args: map[string]any{"command": "delete", "confirm": true},
			want: "memory_refused: path is empty; give a path under /memories, e.g. /memories/notes.md",
		},
		{
			name: "empty new_path", setup: map[string]string{"/memories/notes.md": "x"},
			args: map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "", "confirm": true},
			want: "memory_refused: new_path is empty; give a path under /memories, e.g. /memories/notes.md",
		},
		{
			name: "root as delete target", setup: map[string]string{"/memories/notes.md": "x"},
			args: map[string]any{"command": "delete", "path": "/memories", "confirm": true},
			want: "memory_refused: path is /memories itself, which delete never targets; name a file or directory under it, e.g. /memories/notes.md",
		},
		{
			name: "root with slash as delete target", args: map[string]any{"command": "delete", "path": "/memories/", "confirm": true},
			want: "memory_refused: path is /memories itself, which delete never targets; name a file or directory under it, e.g. /memories/notes.md",
		},
		{
			name: "root as rename source", args: map[string]any{"command": "rename", "old_path": "/memories", "new_path": "/memories/all", "confirm": true},
			want: "memory_refused: old_path is /memories itself, which rename never targets; name a file or directory under it, e.g. /memories/notes.md",
		},
		{
			name: "root as rename target", setup: map[string]string{"/memories/notes.md": "x"},
			args: map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories", "confirm": true},
			want: "memory_refused: new_path is /memories itself, which rename never targets; name a file or directory under it, e.g. /memories/notes.md",
		},
		{
			name: "root as create target", args: map[string]any{"command": "create", "path": "/memories", "file_text": "x", "confirm": true},
			want: "memory_refused: path is /memories itself, which create never targets; name a file or directory under it, e.g. /memories/notes.md",
		},
		{
			name: "wildcard star", setup: map[string]string{"/memories/notes.md": "x"},
			args: map[string]any{"command": "delete", "path": "/memories/*", "confirm": true},
			want: `memory_refused: path "/memories/*" contains a wildcard (*, ? or [); wildcards are not expanded, name exactly one file or directory`,
		},
		{
			name: "wildcard question mark", args: map[string]any{"command": "delete", "path": "/memories/note?.md", "confirm": true},
			want: `memory_refused: path "/memories/note?.md" contains a wildcard (*, ? or [); wildcards are not expanded, name exactly one file or directory`,
		},
		{
			name: "wildcard bracket", args: map[string]any{"command": "view", "path": "/memories/[a-z]*"},
			want: `memory_refused: path "/memories/[a-z]*" contains a wildcard (*, ? or [); wildcards are not expanded, name exactly one file or directory`,
		},
		{
			name: "one-character delete target", setup: map[string]string{"/memories/a": "x"},
			args: map[string]any{"command": "delete", "path": "/memories/a", "confirm": true},
			want: `memory_refused: path /memories/a: the name "a" is shorter than 2 characters; very short targets are refused to prevent accidental mass changes, use a descriptive name such as /memories/notes.md`,
		},
		{
			name: "one-character create target", args: map[string]any{"command": "create", "path": "/memories/x", "file_text": "x"},
			want: `memory_refused: path /memories/x: the name "x" is shorter than 2 characters; very short targets are refused to prevent accidental mass changes, use a descriptive name such as /memories/notes.md`,
		},
		{
			name: "one-character rename target", setup: map[string]string{"/memories/notes.md": "x"},
			args: map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/n", "confirm": true},
			want: `memory_refused: new_path /memories/n: the name "n" is shorter than 2 characters; very short targets are refused to prevent accidental mass changes, use a descriptive name such as /memories/notes.md`,
		},
		{
			name: "hidden name", args: map[string]any{"command": "create", "path": "/memories/.env", "file_text": "x"},
			want: `memory_refused: path "/memories/.env" names a hidden entry (".env" starts with a dot); hidden names are reserved for the store, pick a name without the leading dot`,
		},
		{
			name: "empty segment", args: map[string]any{"command": "create", "path": "/memories//notes.md", "file_text": "x"},
			want: `memory_refused: path "/memories//notes.md" has an empty segment (//); write each directory name once, e.g. /memories/project/notes.md`,
		},
		{
			name: "control character", args: map[string]any{"command": "create", "path": "/memories/no\ttes.md", "file_text": "x"},
			want: "memory_refused: path contains a NUL or another control character; send a plain path such as /memories/notes.md",
		},
		{
			name: "non-empty directory delete", setup: map[string]string{"/memories/proj/a1.md": "x", "/memories/proj/b2.md": "y"},
			args: map[string]any{"command": "delete", "path": "/memories/proj", "confirm": true},
			want: "memory_refused: /memories/proj is a directory with 2 entries; delete refuses non-empty directories to prevent mass deletion: delete the files in it one by one (each with confirm: true), then the directory",
		},
		{
			name: "rename onto an existing file", setup: map[string]string{"/memories/aa.md": "a", "/memories/bb.md": "b"},
			args: map[string]any{"command": "rename", "old_path": "/memories/aa.md", "new_path": "/memories/bb.md", "confirm": true},
			want: "memory_refused: the destination /memories/bb.md already exists; rename never overwrites: choose another new_path, or delete the destination first (with confirm: true)",
		},
		{
			name: "command not allowed", guard: Guard{AllowedCommands: []string{CmdView, CmdCreate}}, setup: map[string]string{"/memories/notes.md": "x"},
			args: map[string]any{"command": "delete", "path": "/memories/notes.md", "confirm": true},
			want: "memory_refused: command delete is not allowed on this memory; allowed commands: view, create",
		},
		{
			name: "read-only create", guard: Guard{ReadOnly: true},
			args: map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "x"},
			want: "memory_refused: this memory is read-only: only view is allowed and create was refused; nothing was changed. Tell the user that the memory cannot be modified here",
		},
		{
			name: "per-file quota on create", guard: quota,
			args: map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": strings.Repeat("x", 17)},
			want: "memory_refused: /memories/notes.md would be 17 bytes, over the per-file limit of 16 bytes; nothing was changed: split the content into several smaller files",
		},
		{
			name: "per-file quota on str_replace", guard: quota, setup: map[string]string{"/memories/notes.md": "0123456789"},
			args: map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "9", "new_str": "9abcdefgh", "confirm": true},
			want: "memory_refused: /memories/notes.md would be 18 bytes, over the per-file limit of 16 bytes; nothing was changed: split the content into several smaller files",
		},
		{
			name: "per-file quota on insert", guard: quota, setup: map[string]string{"/memories/notes.md": "0123456789\n"},
			args: map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 1, "insert_text": "abcdef"},
			want: "memory_refused: /memories/notes.md would be 18 bytes, over the per-file limit of 16 bytes; nothing was changed: split the content into several smaller files",
		},
	}
	for _, tc := range tests {
		tc.wantErr = true
		t.Run(tc.name, func(t *testing.T) { runCommandCase(t, tc) })
	}
}

// TestConfirmFlow: a destructive call without confirm is refused with the way to
// confirm and changes nothing; the same call with confirm: true succeeds.
func TestConfirmFlow(t *testing.T) {
	tests := []struct {
		name    string
		guard   Guard
		setup   map[string]string
		args    map[string]any
		refusal string // "" = no confirmation needed
		after   map[string]*string
	}{
		{
			name: "delete", setup: map[string]string{"/memories/notes.md": "keep me\n"},
			args:    map[string]any{"command": "delete", "path": "/memories/notes.md"},
			refusal: `memory_refused: delete of /memories/notes.md is destructive and needs confirmation: check with the user, then repeat the same call with "confirm": true (the previous content is kept in the trash for 7 days)`,
			after:   map[string]*string{"/memories/notes.md": nil},
		},
		{
			name: "rename", setup: map[string]string{"/memories/notes.md": "n\n"},
			args:    map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/renamed.md"},
			refusal: `memory_refused: rename of /memories/notes.md to /memories/renamed.md is destructive and needs confirmation: check with the user, then repeat the same call with "confirm": true (the previous content is kept in the trash for 7 days)`,
			after:   map[string]*string{"/memories/notes.md": nil, "/memories/renamed.md": ptr("n\n")},
		},
		{
			name: "str_replace", setup: map[string]string{"/memories/notes.md": "color: blue\n"},
			args:    map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "blue", "new_str": "green"},
			refusal: `memory_refused: str_replace in /memories/notes.md is destructive and needs confirmation: check with the user, then repeat the same call with "confirm": true (the previous content is kept in the trash for 7 days)`,
			after:   map[string]*string{"/memories/notes.md": ptr("color: green\n")},
		},
		{
			name: "create over an existing file", setup: map[string]string{"/memories/notes.md": "v1\n"},
			args:    map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "v2\n"},
			refusal: `memory_refused: create over the existing file /memories/notes.md (it replaces the whole file; use str_replace or insert for a targeted edit) is destructive and needs confirmation: check with the user, then repeat the same call with "confirm": true (the previous content is kept in the trash for 7 days)`,
			after:   map[string]*string{"/memories/notes.md": ptr("v2\n")},
		},
		{
			name: "insert when listed in ConfirmCommands", guard: Guard{ConfirmCommands: []string{CmdInsert}, TrashRetention: 36 * 3600e9},
			setup:   map[string]string{"/memories/notes.md": "a1\n"},
			args:    map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 1, "insert_text": "b2"},
			refusal: `memory_refused: insert into /memories/notes.md is destructive and needs confirmation: check with the user, then repeat the same call with "confirm": true (the previous content is kept in the trash for 36 hours)`,
			after:   map[string]*string{"/memories/notes.md": ptr("a1\nb2\n")},
		},
		{
			name: "delete needs no confirmation with an empty ConfirmCommands", guard: Guard{ConfirmCommands: []string{}},
			setup: map[string]string{"/memories/notes.md": "x"},
			args:  map[string]any{"command": "delete", "path": "/memories/notes.md"},
			after: map[string]*string{"/memories/notes.md": nil},
		},
		{
			name: "overwrite needs no confirmation when neither create nor str_replace is listed", guard: Guard{ConfirmCommands: []string{CmdDelete}},
			setup: map[string]string{"/memories/notes.md": "v1"},
			args:  map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "v2"},
			after: map[string]*string{"/memories/notes.md": ptr("v2")},
		},
		{
			name:  "create of a new file needs no confirmation",
			args:  map[string]any{"command": "create", "path": "/memories/fresh.md", "file_text": "new"},
			after: map[string]*string{"/memories/fresh.md": ptr("new")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.guard)
			for p, c := range tc.setup {
				writeFile(t, h.s, p, c)
			}
			if tc.refusal != "" {
				before := snapshot(t, h.s.hostPath(VirtualRoot))
				text, isErr := h.call(tc.args)
				if !isErr || text != tc.refusal {
					t.Fatalf("without confirm: isError=%v text:\n%s\nwant:\n%s", isErr, text, tc.refusal)
				}
				if after := snapshot(t, h.s.hostPath(VirtualRoot)); !equalMaps(before, after) {
					t.Fatalf("the refused call changed the memories")
				}
				if n := len(journalOf(t, h.s)); n != 0 {
					t.Fatalf("the refused call was journaled (%d entries)", n)
				}
				confirmed := map[string]any{"confirm": true}
				for k, v := range tc.args {
					confirmed[k] = v
				}
				tc.args = confirmed
			}
			text, isErr := h.call(tc.args)
			if isErr {
				t.Fatalf("confirmed call failed: %s", text)
			}
			for p, want := range tc.after {
				b, err := os.ReadFile(h.s.hostPath(p))
				if want == nil {
					if !os.IsNotExist(err) {
						t.Errorf("%s still exists", p)
					}
				} else if string(b) != *want {
					t.Errorf("%s = %q, want %q", p, b, *want)
				}
			}
			if n := len(journalOf(t, h.s)); n != 1 {
				t.Errorf("journal has %d entries, want 1", n)
			}
		})
	}
}

// TestReadOnly: view works, every other command is refused, nothing changes, the tool advertises view only.
func TestReadOnly(t *testing.T) {
	h := newHarness(t, Guard{ReadOnly: true})
	writeFile(t, h.s, "/memories/notes.md", "ro\n")
	if text, isErr := h.call(map[string]any{"command": "view", "path": "/memories/notes.md"}); isErr || !strings.Contains(text, "     1\tro") {
		t.Fatalf("view in read-only mode: isError=%v %s", isErr, text)
	}
	calls := []map[string]any{
		{"command": "create", "path": "/memories/new.md", "file_text": "x", "confirm": true},
		{"command": "str_replace", "path": "/memories/notes.md", "old_str": "ro", "new_str": "rw", "confirm": true},
		{"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "x", "confirm": true},
		{"command": "delete", "path": "/memories/notes.md", "confirm": true},
		{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/moved.md", "confirm": true},
	}
	before := snapshot(t, h.s.root)
	for _, a := range calls {
		text, isErr := h.call(a)
		want := "memory_refused: this memory is read-only: only view is allowed and " + a["command"].(string) + " was refused; nothing was changed. Tell the user that the memory cannot be modified here"
		if !isErr || text != want {
			t.Errorf("%s: isError=%v %q", a["command"], isErr, text)
		}
	}
	if after := snapshot(t, h.s.root); !equalMaps(before, after) {
		t.Errorf("read-only store changed: %v -> %v", keys(before), keys(after))
	}
	tool := h.s.Tool()
	enum := tool.InputSchema.Properties["command"].(map[string]any)["enum"].([]string)
	if !slices.Equal(enum, []string{CmdView}) {
		t.Errorf("read-only enum = %v", enum)
	}
	if !*tool.Annotations.ReadOnlyHint || *tool.Annotations.DestructiveHint {
		t.Errorf("read-only annotations: %+v", tool.Annotations)
	}
	if !strings.Contains(tool.Description, "READ-ONLY") {
		t.Errorf("description does not say read-only: %s", tool.Description)
	}
}

// TestToolDefinition: tools/list over MCP shows the Anthropic memory tool fields, the enum,
// destructiveHint and a description that explains confirm and the refusals.
func TestToolDefinition(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		wantName   string
		wantEnum   []string
		wantInDesc []string
	}{
		{
			name: "defaults", wantName: "memory", wantEnum: AllCommands,
			wantInDesc: []string{`"confirm": true`, "str_replace, delete, rename, create over an existing file", "Refused: paths outside /memories", "files over 1 MiB", "a total over 64 MiB", "trash for 7 days"},
		},
		{
			name:     "custom name and allowed commands",
			cfg:      Config{ToolName: "team_memory", Guard: Guard{AllowedCommands: []string{CmdCreate, CmdView, CmdDelete}, MaxFileBytes: 4096}},
			wantName: "team_memory", wantEnum: []string{CmdView, CmdCreate, CmdDelete},
			wantInDesc: []string{"Allowed commands here: view, create, delete", "Destructive commands (delete, create over an existing file)", "files over 4 KiB"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Root = t.TempDir()
			s, err := Open(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c := connect(t, newMCPServer(s))
			res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tools) != 1 {
				t.Fatalf("tools: %+v", res.Tools)
			}
			raw, _ := json.Marshal(res.Tools[0])
			var tool struct {
				Name        string
				Description string
				InputSchema struct {
					Type       string
					Required   []string
					Properties map[string]struct {
						Type string
						Enum []string
					}
				}
				Annotations map[string]any
			}
			if err := json.Unmarshal(raw, &tool); err != nil {
				t.Fatal(err)
			}
			if tool.Name != tc.wantName {
				t.Errorf("name = %q", tool.Name)
			}
			for field, typ := range map[string]string{"command": "string", "path": "string", "file_text": "string", "old_str": "string", "new_str": "string",
				"insert_line": "integer", "insert_text": "string", "view_range": "array", "old_path": "string", "new_path": "string", "confirm": "boolean"} {
				if got := tool.InputSchema.Properties[field].Type; got != typ {
					t.Errorf("inputSchema.properties.%s.type = %q, want %q", field, got, typ)
				}
			}
			if !slices.Equal(tool.InputSchema.Properties["command"].Enum, tc.wantEnum) {
				t.Errorf("command enum = %v, want %v", tool.InputSchema.Properties["command"].Enum, tc.wantEnum)
			}
			if !slices.Equal(tool.InputSchema.Required, []string{"command"}) || tool.InputSchema.Type != "object" {
				t.Errorf("schema: %s", raw)
			}
			if tool.Annotations["destructiveHint"] != true || tool.Annotations["readOnlyHint"] != false {
				t.Errorf("annotations = %v", tool.Annotations)
			}
			for _, s := range tc.wantInDesc {
				if !strings.Contains(tool.Description, s) {
					t.Errorf("description lacks %q:\n%s", s, tool.Description)
				}
			}
		})
	}
}

// TestOpenRefusesBadConfig: Open validates the guard and the layout.
func TestOpenRefusesBadConfig(t *testing.T) {
	fileRoot := t.TempDir()
	if err := os.WriteFile(filepath.Join(fileRoot, "memories"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no root", Config{}, "Config.Root is empty"},
		{"unknown allowed command", Config{Root: t.TempDir(), Guard: Guard{AllowedCommands: []string{"purge"}}}, `unknown command "purge" in AllowedCommands`},
		{"unknown confirm command", Config{Root: t.TempDir(), Guard: Guard{ConfirmCommands: []string{"drop"}}}, `unknown command "drop" in ConfirmCommands`},
		{"negative limit", Config{Root: t.TempDir(), Guard: Guard{MaxFileBytes: -1}}, "must not be negative"},
		{"memories is a file", Config{Root: fileRoot}, "must be a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.cfg)
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
	// and the layout it creates
	root := t.TempDir()
	s, err := Open(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{"memories", ".trash", ".journal.jsonl"} {
		if _, err := os.Stat(filepath.Join(root, name)); err != nil {
			t.Errorf("Open did not create %s: %v", name, err)
		}
	}
}
