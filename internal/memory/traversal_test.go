package memory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPathTraversal: every escape shape is refused with memory_refused:, the
// outside file is untouched and nothing new appears outside; nothing is journaled.
func TestPathTraversal(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	const secretText = "top secret\n"
	if err := os.WriteFile(secret, []byte(secretText), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Guard{})
	writeFile(t, h.s, "/memories/notes.md", "inside\n")
	mem := h.s.hostPath(VirtualRoot)
	for name, target := range map[string]string{
		"secret-link.md": secret,                                            // a file symlink out of the root
		"etc-link":       outside,                                           // a directory symlink out of the root
		"rel-link":       filepath.Join("..", "..", filepath.Base(outside)), // relative, still outside
		"dangling-link":  filepath.Join(outside, "not-yet", "dir"),          // dangling, would point outside
		"etc-real":       "/etc",
	} {
		if err := os.Symlink(target, filepath.Join(mem, name)); err != nil {
			t.Fatal(err)
		}
	}
	outsideBefore := snapshot(t, outside)

	tests := []struct {
		name string
		args map[string]any
		want string // substring after "memory_refused: "
	}{
		{"relative dot-dot", map[string]any{"command": "create", "path": "../x", "file_text": "x"}, `contains a ".." segment; path traversal is not allowed`},
		{"dot-dot after root", map[string]any{"command": "view", "path": "/memories/../etc/passwd"}, `contains a ".." segment`},
		{"absolute outside", map[string]any{"command": "view", "path": "/etc/passwd"}, `"/etc/passwd" is outside /memories; every path must start with /memories/`},
		{"relative without slash", map[string]any{"command": "view", "path": "memories/notes.md"}, "is outside /memories"},
		{"prefix lookalike", map[string]any{"command": "view", "path": "/memories-other/x.md"}, "is outside /memories"},
		{"climb out of a subdirectory", map[string]any{"command": "create", "path": "/memories/a/../../x", "file_text": "x"}, `contains a ".." segment`},
		{"dot segment", map[string]any{"command": "view", "path": "/memories/./notes.md"}, `contains a "." segment`},
		{"percent-encoded dots", map[string]any{"command": "view", "path": "%2e%2e/x"}, "contains percent-encoding"},
		{"percent-encoded dots under root", map[string]any{"command": "create", "path": "/memories/%2e%2e/escape.md", "file_text": "x"}, "contains percent-encoding"},
		{"double-encoded dots", map[string]any{"command": "view", "path": "/memories/%252e%252e/x"}, "contains percent-encoding"},
		{"encoded slash", map[string]any{"command": "create", "path": "/memories/..%2fescape.md", "file_text": "x"}, "contains percent-encoding"},
		{"uppercase encoding", map[string]any{"command": "view", "path": "/memories/%2E%2E%2Fetc"}, "contains percent-encoding"},
		{"backslash dot-dot", map[string]any{"command": "create", "path": "..\\x", "file_text": "x"}, "contains a backslash"},
		{"backslash under root", map[string]any{"command": "create", "path": "/memories\\..\\escape.md", "file_text": "x"}, "contains a backslash"},
		{"NUL byte", map[string]any{"command": "view", "path": "/memories/a\x00b"}, "contains a NUL or another control character"},
		{"file symlink out: view", map[string]any{"command": "view", "path": "/memories/secret-link.md"}, "leads outside /memories through a symlink"},
		{"file symlink out: str_replace", map[string]any{"command": "str_replace", "path": "/memories/secret-link.md", "old_str": "top", "new_str": "pwned", "confirm": true}, "leads outside /memories through a symlink"},
		{"file symlink out: overwrite", map[string]any{"command": "create", "path": "/memories/secret-link.md", "file_text": "pwned", "confirm": true}, "leads outside /memories through a symlink"},
		{"file symlink out: insert", map[string]any{"command": "insert", "path": "/memories/secret-link.md", "insert_line": 0, "insert_text": "pwned"}, "leads outside /memories through a symlink"},
		{"file symlink out: delete", map[string]any{"command": "delete", "path": "/memories/secret-link.md", "confirm": true}, "leads outside /memories through a symlink"},
		{"directory symlink out: view file", map[string]any{"command": "view", "path": "/memories/etc-link/secret.txt"}, "leads outside /memories through a symlink"},
		{"directory symlink out: list", map[string]any{"command": "view", "path": "/memories/etc-link"}, "leads outside /memories through a symlink"},
		{"directory symlink out: create inside", map[string]any{"command": "create", "path": "/memories/etc-link/new.md", "file_text": "x"}, "leads outside /memories through a symlink"},
		{"directory symlink out: rename into", map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/etc-link/notes.md", "confirm": true}, "leads outside /memories through a symlink"},
		{"directory symlink out: rename out of", map[string]any{"command": "rename", "old_path": "/memories/etc-link/secret.txt", "new_path": "/memories/stolen.md", "confirm": true}, "leads outside /memories through a symlink"},
		{"relative symlink out", map[string]any{"command": "create", "path": "/memories/rel-link/new.md", "file_text": "x"}, "leads outside /memories through a symlink"},
		{"symlink to /etc", map[string]any{"command": "view", "path": "/memories/etc-real/passwd"}, "leads outside /memories through a symlink"},
		{"dangling symlink", map[string]any{"command": "create", "path": "/memories/dangling-link/x.md", "file_text": "x"}, "passes through a symlink that does not resolve"},
	}
	if len(tests) < 10 {
		t.Fatal("fewer than 10 shapes")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text, isErr := h.call(tc.args)
			if !isErr || !strings.HasPrefix(text, RefusedPrefix) || !strings.Contains(text, tc.want) {
				t.Fatalf("isError=%v text %q, want memory_refused: ... %q", isErr, text, tc.want)
			}
			if strings.Contains(text, outside) {
				t.Errorf("the refusal leaks the host path: %s", text)
			}
			if after := snapshot(t, outside); !equalMaps(outsideBefore, after) {
				t.Fatalf("outside directory changed: %v -> %v", outsideBefore, after)
			}
			if b, _ := os.ReadFile(secret); string(b) != secretText {
				t.Fatalf("outside file changed: %q", b)
			}
		})
	}
	if n := len(journalOf(t, h.s)); n != 0 {
		t.Errorf("%d journal entries after refused calls", n)
	}
	if b, _ := os.ReadFile(h.s.hostPath("/memories/notes.md")); string(b) != "inside\n" {
		t.Errorf("notes.md changed: %q", b)
	}
	// the directory listing does not follow or reveal links out of the root
	text, _ := h.call(map[string]any{"command": "view", "path": "/memories"})
	if strings.Contains(text, "secret") || strings.Contains(text, "etc-link") {
		t.Errorf("listing shows links out of the root:\n%s", text)
	}
}

// TestSymlinkInsideIsFollowed: a symlink that stays inside /memories is followed for view.
func TestSymlinkInsideIsFollowed(t *testing.T) {
	h := newHarness(t, Guard{})
	writeFile(t, h.s, "/memories/real/notes.md", "via link\n")
	if err := os.Symlink("real", h.s.hostPath("/memories/alias")); err != nil {
		t.Fatal(err)
	}
	text, isErr := h.call(map[string]any{"command": "view", "path": "/memories/alias/notes.md"})
	if isErr || !strings.Contains(text, "     1\tvia link") {
		t.Fatalf("isError=%v %s", isErr, text)
	}
	text, isErr = h.call(map[string]any{"command": "create", "path": "/memories/alias/more.md", "file_text": "m"})
	if isErr {
		t.Fatal(text)
	}
	if b, _ := os.ReadFile(h.s.hostPath("/memories/real/more.md")); string(b) != "m" {
		t.Errorf("create through an inside link: %q", b)
	}
}
