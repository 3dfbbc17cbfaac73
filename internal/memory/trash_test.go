package memory

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func mustCall(t *testing.T, h *harness, a map[string]any) string {
	t.Helper()
	text, isErr := h.call(a)
	if isErr {
		t.Fatalf("%v: %s", a, text)
	}
	return text
}

// TestRestore: delete then Restore brings the content back; Restore refuses to overwrite.
func TestRestore(t *testing.T) {
	t.Run("delete then restore brings the content back", func(t *testing.T) {
		h := newHarness(t, Guard{})
		mustCall(t, h, map[string]any{"command": "create", "path": "/memories/proj/notes.md", "file_text": "precious\n"})
		mustCall(t, h, map[string]any{"command": "delete", "path": "/memories/proj/notes.md", "confirm": true})
		trash, err := h.s.Trash()
		if err != nil || len(trash) != 1 {
			t.Fatalf("trash: %+v %v", trash, err)
		}
		e := trash[0]
		if e.Path != "/memories/proj/notes.md" || e.Command != CmdDelete || e.Kind != kindFile || e.Bytes != 9 || e.SHA256 != sum([]byte("precious\n")) {
			t.Errorf("trash entry: %+v", e)
		}
		got, err := h.s.Restore(e.ID)
		if err != nil || got != "/memories/proj/notes.md" {
			t.Fatalf("Restore = %q, %v", got, err)
		}
		if b, _ := os.ReadFile(h.s.hostPath(got)); string(b) != "precious\n" {
			t.Errorf("restored content %q", b)
		}
		if trash, _ := h.s.Trash(); len(trash) != 0 {
			t.Errorf("trash after restore: %+v", trash)
		}
		j := journalOf(t, h.s)
		last := j[len(j)-1]
		if last.Command != CmdRestore || last.Path != got || last.TrashID != e.ID || last.BytesAfter != 9 || last.SHA256After != e.SHA256 {
			t.Errorf("restore journal entry: %+v", last)
		}
		// the agent sees it again, and the size is counted again
		if text := mustCall(t, h, map[string]any{"command": "view", "path": "/memories/proj/notes.md"}); !strings.Contains(text, "precious") {
			t.Errorf("view after restore: %s", text)
		}
		// The file and its directory /memories/proj.
		if want := int64(9 + 2*entryOverhead); h.s.total != want {
			t.Errorf("total = %d after restore, want %d", h.s.total, want)
		}
	})
	t.Run("restore refuses to overwrite an existing file", func(t *testing.T) {
		h := newHarness(t, Guard{})
		mustCall(t, h, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "old\n"})
		mustCall(t, h, map[string]any{"command": "delete", "path": "/memories/notes.md", "confirm": true})
		mustCall(t, h, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "new\n"})
		trash, _ := h.s.Trash()
		_, err := h.s.Restore(trash[0].ID)
		if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "/memories/notes.md already exists; rename or delete it first") {
			t.Fatalf("Restore over an existing file: %v", err)
		}
		if b, _ := os.ReadFile(h.s.hostPath("/memories/notes.md")); string(b) != "new\n" {
			t.Errorf("existing file changed: %q", b)
		}
		if after, _ := h.s.Trash(); len(after) != 1 {
			t.Errorf("the trash entry was consumed: %+v", after)
		}
	})
	t.Run("an overwritten version comes back after the newer one is moved away", func(t *testing.T) {
		h := newHarness(t, Guard{})
		mustCall(t, h, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "v1\n"})
		mustCall(t, h, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "v2\n", "confirm": true})
		mustCall(t, h, map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "v2", "new_str": "v3", "confirm": true})
		trash, _ := h.s.Trash()
		if len(trash) != 2 || trash[0].SHA256 != sum([]byte("v1\n")) || trash[1].SHA256 != sum([]byte("v2\n")) {
			t.Fatalf("trash: %+v", trash)
		}
		// the trash keeps the old bytes even though the file was replaced twice
		if b, _ := os.ReadFile(filepath.Join(h.s.root, trashDir, trash[0].ID, contentName)); string(b) != "v1\n" {
			t.Errorf("trashed v1 = %q", b)
		}
		mustCall(t, h, map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/notes-v3.md", "confirm": true})
		if _, err := h.s.Restore(trash[0].ID); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(h.s.hostPath("/memories/notes.md")); string(b) != "v1\n" {
			t.Errorf("restored %q, want v1", b)
		}
	})
	t.Run("an empty directory comes back", func(t *testing.T) {
		h := newHarness(t, Guard{})
		if err := os.Mkdir(h.s.hostPath("/memories/old-dir"), 0o700); err != nil {
			t.Fatal(err)
		}
		mustCall(t, h, map[string]any{"command": "delete", "path": "/memories/old-dir", "confirm": true})
		trash, _ := h.s.Trash()
		if len(trash) != 1 || trash[0].Kind != kindDir {
			t.Fatalf("trash: %+v", trash)
		}
		if _, err := h.s.Restore(trash[0].ID); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(h.s.hostPath("/memories/old-dir")); err != nil || !fi.IsDir() {
			t.Errorf("directory not restored: %v", err)
		}
	})
	t.Run("bad ids", func(t *testing.T) {
		h := newHarness(t, Guard{})
		for id, want := range map[string]string{
			"":                                       "is not a trash id",
			"../../etc":                              "is not a trash id",
			"20250102T150405.000000000Z-0a1b2c3d/..": "is not a trash id",
			"20250102T150405.000000000Z-0a1b2c3d":    "not found",
		} {
			if _, err := h.s.Restore(id); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Restore(%q) = %v, want %q", id, err, want)
			}
		}
	})
}

// TestTrashRetention: entries older than the retention are purged on a later mutation, newer ones kept.
func TestTrashRetention(t *testing.T) {
	h := newHarness(t, Guard{TrashRetention: 7 * 24 * time.Hour})
	clock := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	h.s.now = func() time.Time { return clock }
	mustCall(t, h, map[string]any{"command": "create", "path": "/memories/old.md", "file_text": "old"})
	mustCall(t, h, map[string]any{"command": "delete", "path": "/memories/old.md", "confirm": true})
	clock = clock.Add(6 * 24 * time.Hour)
	mustCall(t, h, map[string]any{"command": "create", "path": "/memories/newer.md", "file_text": "newer"})
	mustCall(t, h, map[string]any{"command": "delete", "path": "/memories/newer.md", "confirm": true})
	if trash, _ := h.s.Trash(); len(trash) != 2 {
		t.Fatalf("trash before expiry: %+v", trash)
	}
	clock = clock.Add(2 * 24 * time.Hour) // old is 8 days old, newer 2 days
	mustCall(t, h, map[string]any{"command": "create", "path": "/memories/trigger.md", "file_text": "x"})
	trash, _ := h.s.Trash()
	if len(trash) != 1 || trash[0].Path != "/memories/newer.md" {
		t.Fatalf("trash after expiry: %+v", trash)
	}
	des, _ := os.ReadDir(filepath.Join(h.s.root, trashDir))
	if len(des) != 1 {
		t.Errorf("%d directories left in .trash", len(des))
	}
}

// TestJournal: each mutation appends one line with time (RFC 3339 nano), command,
// paths, sizes, hashes and trash id; views are not journaled.
func TestJournal(t *testing.T) {
	h := newHarness(t, Guard{})
	mustCall(t, h, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "a\n"})
	mustCall(t, h, map[string]any{"command": "view", "path": "/memories/notes.md"})
	mustCall(t, h, map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 1, "insert_text": "b"})
	mustCall(t, h, map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "b", "new_str": "cc", "confirm": true})
	mustCall(t, h, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "dddd", "confirm": true})
	mustCall(t, h, map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/moved.md", "confirm": true})
	mustCall(t, h, map[string]any{"command": "delete", "path": "/memories/moved.md", "confirm": true})

	s := func(v string) string { return sum([]byte(v)) }
	want := []JournalEntry{
		{Command: CmdCreate, Path: "/memories/notes.md", BytesAfter: 2, SHA256After: s("a\n")},
		{Command: CmdInsert, Path: "/memories/notes.md", BytesBefore: 2, SHA256Before: s("a\n"), BytesAfter: 4, SHA256After: s("a\nb\n")},
		{Command: CmdStrReplace, Path: "/memories/notes.md", BytesBefore: 4, SHA256Before: s("a\nb\n"), BytesAfter: 5, SHA256After: s("a\ncc\n")},
		{Command: CmdCreate, Path: "/memories/notes.md", BytesBefore: 5, SHA256Before: s("a\ncc\n"), BytesAfter: 4, SHA256After: s("dddd")},
		{Command: CmdRename, Path: "/memories/notes.md", NewPath: "/memories/moved.md", BytesBefore: 4, SHA256Before: s("dddd"), BytesAfter: 4, SHA256After: s("dddd")},
		{Command: CmdDelete, Path: "/memories/moved.md", BytesBefore: 4, SHA256Before: s("dddd")},
	}
	got := journalOf(t, h.s)
	if len(got) != len(want) {
		t.Fatalf("journal has %d entries, want %d: %+v", len(got), len(want), got)
	}
	trash, _ := h.s.Trash()
	trashIDs := map[string]bool{}
	for _, e := range trash {
		trashIDs[e.ID] = true
	}
	for i, w := range want {
		g := got[i]
		if g.Time.IsZero() || time.Since(g.Time) > time.Minute {
			t.Errorf("entry %d time %v", i, g.Time)
		}
		if (i == 0) != (g.TrashID == "") || (g.TrashID != "" && !trashIDs[g.TrashID]) {
			t.Errorf("entry %d trash id %q (trash %v)", i, g.TrashID, trashIDs)
		}
		g.Time, g.TrashID = time.Time{}, ""
		if g != w {
			t.Errorf("entry %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	// raw lines: one JSON object per line, time in RFC 3339 with nanoseconds
	f, err := os.Open(filepath.Join(h.s.root, journalName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if _, err := time.Parse(time.RFC3339Nano, raw["time"].(string)); err != nil {
			t.Errorf("time %v: %v", raw["time"], err)
		}
	}
}

// TestJournalTornLastLine: a line torn by a crash is skipped and reported, the
// entries before it parse, and appends after a reopen start on a fresh line.
func TestJournalTornLastLine(t *testing.T) {
	root := t.TempDir()
	s, err := Open(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, s: s, c: connect(t, newMCPServer(s))}
	mustCall(t, h, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "a"})
	mustCall(t, h, map[string]any{"command": "create", "path": "/memories/other.md", "file_text": "b"})
	s.Close()
	jf, err := os.OpenFile(filepath.Join(root, journalName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jf.WriteString(`{"time":"2025-03-01T12:00:00.1Z","command":"cre`); err != nil {
		t.Fatal(err)
	}
	jf.Close()

	s2, err := Open(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	entries, err := s2.Journal()
	if err != nil || len(entries) != 2 {
		t.Fatalf("Journal() = %d entries, %v; want 2, nil", len(entries), err)
	}
	rep, err := s2.ReadJournal()
	if err != nil || len(rep.Skipped) != 1 || rep.Skipped[0].Line != 3 || !strings.HasPrefix(rep.Skipped[0].Text, `{"time":"2025-03-01T12:00:00.1Z"`) {
		t.Fatalf("report: %+v %v", rep.Skipped, err)
	}
	h2 := &harness{t: t, s: s2, c: connect(t, newMCPServer(s2))}
	mustCall(t, h2, map[string]any{"command": "create", "path": "/memories/third.md", "file_text": "c"})
	rep, _ = s2.ReadJournal()
	if len(rep.Entries) != 3 || rep.Entries[2].Path != "/memories/third.md" || len(rep.Skipped) != 1 {
		t.Fatalf("after the append: %d entries %+v, skipped %+v", len(rep.Entries), rep.Entries, rep.Skipped)
	}
}
