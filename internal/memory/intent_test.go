package memory

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// handle calls the tool directly (no MCP transport) and fails the test on an error result.
func handle(t *testing.T, s *Store, a map[string]any) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = adapterconfig.DefaultMemoryToolName
	req.Params.Arguments = a
	res, err := s.Handle(context.Background(), req)
	if err != nil || res.IsError {
		t.Fatalf("%v: %v %+v", a["command"], err, res.Content)
	}
}

func intentSize(t *testing.T, root string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(root, intentName))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// interruptedEdit replaces the content of virt the way str_replace does, and
// stops where a process killed at stage would have stopped: "begun" (intent
// recorded, nothing changed), "trashed" (old content in the trash, file not
// replaced), "replaced" (file replaced, not journaled), "torn" (killed inside
// the journal append), "journaled" (killed before emptying the intent).
func interruptedEdit(t *testing.T, s *Store, virt, content, stage string) *JournalEntry {
	t.Helper()
	p, err := parsePath("path", virt)
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.mem.ReadFile(p.osRel())
	if err != nil {
		t.Fatal(err)
	}
	j := &JournalEntry{
		Command: CmdStrReplace, Path: p.virt, TrashID: s.newTrashID(),
		BytesBefore: int64(len(old)), SHA256Before: sum(old),
		BytesAfter: int64(len(content)), SHA256After: sum([]byte(content)),
	}
	if err := s.beginIntent(j); err != nil {
		t.Fatal(err)
	}
	if stage == "begun" {
		return j
	}
	if err := s.trashKeep(j.TrashID, p, CmdStrReplace, "", kindFile, old, false); err != nil {
		t.Fatal(err)
	}
	if stage == "trashed" {
		return j
	}
	if err := s.writeAtomic(s.mem, p.osRel(), []byte(content)); err != nil {
		t.Fatal(err)
	}
	switch stage {
	case "torn":
		f, err := os.OpenFile(filepath.Join(s.root, journalName), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(s.intent[:len(s.intent)/2]); err != nil {
			t.Fatal(err)
		}
		f.Close()
	case "journaled":
		if err := s.appendLine(s.intent); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// TestIntentSettledAtOpen: a mutation a crash interrupted is journaled by the
// next Open exactly when its change is on disk, and exactly once.
func TestIntentSettledAtOpen(t *testing.T) {
	for _, tc := range []struct {
		stage    string
		applied  bool // the file holds the new content
		wantNew  int  // entries the journal gains (the interrupted edit's)
		wantTorn int  // torn lines skipped
	}{
		{"begun", false, 0, 0},
		{"trashed", false, 0, 0},
		{"replaced", true, 1, 0},
		{"torn", true, 1, 1},
		{"journaled", true, 1, 0},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			root := t.TempDir()
			s, err := Open(Config{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			handle(t, s, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "v1\n"})
			j := interruptedEdit(t, s, "/memories/notes.md", "v2\n", tc.stage)
			s.Close() // the process dies: no commit
			if intentSize(t, root) == 0 {
				t.Fatal("no intent recorded")
			}

			s2, err := Open(Config{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			rep, err := s2.ReadJournal()
			if err != nil {
				t.Fatal(err)
			}
			if got := len(rep.Entries) - 1; got != tc.wantNew || len(rep.Skipped) != tc.wantTorn {
				t.Fatalf("journal gained %d entries with %d torn lines, want %d and %d: %+v %+v", got, len(rep.Skipped), tc.wantNew, tc.wantTorn, rep.Entries, rep.Skipped)
			}
			b, _ := os.ReadFile(s2.hostPath("/memories/notes.md"))
			if (string(b) == "v2\n") != tc.applied {
				t.Fatalf("file holds %q", b)
			}
			last := rep.Entries[len(rep.Entries)-1]
			if last.SHA256After != sum(b) {
				t.Errorf("the journal's last entry %+v is not the file's content %q", last, b)
			}
			if tc.wantNew == 1 && !last.Time.Equal(j.Time) {
				t.Errorf("journaled %+v, want the intent %+v", last, j)
			}
			if n := intentSize(t, root); n != 0 {
				t.Errorf("%s still holds %d bytes", intentName, n)
			}
			if want := int64(len(b)) + entryOverhead; s2.total != want {
				t.Errorf("total %d, want %d", s2.total, want)
			}
		})
	}
}

// TestIntentConsecutiveCrashes: two kills in a row between the rename and the
// journal append, on the same file, leave no gap in its journal (the failure
// TestCrashSafety found: the journal fell two versions behind the file).
func TestIntentConsecutiveCrashes(t *testing.T) {
	root := t.TempDir()
	s, err := Open(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	handle(t, s, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "v1\n"})
	for _, v := range []string{"v2\n", "v3\n"} {
		interruptedEdit(t, s, "/memories/notes.md", v, "replaced")
		s.Close()
		if s, err = Open(Config{Root: root}); err != nil {
			t.Fatal(err)
		}
	}
	defer s.Close()
	entries := journalOf(t, s)
	if len(entries) != 3 {
		t.Fatalf("%d entries, want 3: %+v", len(entries), entries)
	}
	for i := 1; i < len(entries); i++ {
		if entries[i].SHA256Before != entries[i-1].SHA256After {
			t.Errorf("entry %d starts from %s, entry %d ended at %s", i, entries[i].SHA256Before, i-1, entries[i-1].SHA256After)
		}
	}
}

// TestIntentSettledByOtherProcess: a store that stays open (an operator's
// restore beside the server) journals what a crashed store left undone at its
// next mutation, before its own entry, and recounts the total.
func TestIntentSettledByOtherProcess(t *testing.T) {
	root := t.TempDir()
	a, err := Open(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	handle(t, b, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "v1\n"})
	big := strings.Repeat("x", 1000) + "\n"
	interruptedEdit(t, b, "/memories/notes.md", big, "replaced")
	b.Close()

	handle(t, a, map[string]any{"command": "create", "path": "/memories/other.md", "file_text": "o\n"})
	entries := journalOf(t, a)
	if len(entries) != 3 || entries[1].Path != "/memories/notes.md" || entries[1].SHA256After != sum([]byte(big)) || entries[2].Path != "/memories/other.md" {
		t.Fatalf("journal: %+v", entries)
	}
	if want := int64(len(big)+2) + 2*entryOverhead; a.total != want {
		t.Errorf("total %d, want %d", a.total, want)
	}
	if n := intentSize(t, root); n != 0 {
		t.Errorf("%s still holds %d bytes", intentName, n)
	}
}

// TestIntentApplied: for every command, the check recovery relies on says
// "applied" for the entry the command journaled, in the state it left; and an
// intent whose first step did not happen is not applied.
func TestIntentApplied(t *testing.T) {
	s := openStore(t, Guard{ConfirmCommands: []string{}})
	steps := []map[string]any{
		{"command": "create", "path": "/memories/aa/notes.md", "file_text": "one\n"},
		{"command": "create", "path": "/memories/aa/notes.md", "file_text": "two\n"},
		{"command": "str_replace", "path": "/memories/aa/notes.md", "old_str": "two", "new_str": "three"},
		{"command": "insert", "path": "/memories/aa/notes.md", "insert_line": 0, "insert_text": "top"},
		{"command": "rename", "old_path": "/memories/aa/notes.md", "new_path": "/memories/bb/moved.md"},
		{"command": "rename", "old_path": "/memories/aa", "new_path": "/memories/cc"},
		{"command": "delete", "path": "/memories/bb/moved.md"},
		{"command": "delete", "path": "/memories/cc"},
	}
	check := func(e JournalEntry, want bool) {
		t.Helper()
		got, err := s.intentApplied(&e)
		if err != nil || got != want {
			t.Errorf("intentApplied(%+v) = %v, %v; want %v", e, got, err, want)
		}
	}
	for _, a := range steps {
		handle(t, s, a)
		entries := journalOf(t, s)
		check(entries[len(entries)-1], true)
	}
	trash, err := s.Trash()
	if err != nil {
		t.Fatal(err)
	}
	var fileID string
	for _, e := range trash {
		if e.Path == "/memories/bb/moved.md" {
			fileID = e.ID
		}
	}
	if _, err := s.Restore(fileID); err != nil {
		t.Fatal(err)
	}
	entries := journalOf(t, s)
	check(entries[len(entries)-1], true)

	// Intents whose change did not happen.
	handle(t, s, map[string]any{"command": "create", "path": "/memories/dd.md", "file_text": "d\n"})
	check(JournalEntry{Command: CmdDelete, Path: "/memories/dd.md", TrashID: s.newTrashID()}, false)
	check(JournalEntry{Command: CmdRename, Path: "/memories/dd.md", NewPath: "/memories/ee.md", TrashID: s.newTrashID(), SHA256After: sum([]byte("d\n"))}, false)
	check(JournalEntry{Command: CmdCreate, Path: "/memories/ff.md", SHA256After: sum([]byte("f\n"))}, false)
	check(JournalEntry{Command: CmdCreate, Path: "/memories/dd.md", TrashID: s.newTrashID(), SHA256After: sum([]byte("d\n"))}, false)
	e := interruptedEdit(t, s, "/memories/dd.md", "d2\n", "trashed")
	check(*e, false)
	// and nothing recorded by a write the crash tore
	if err := s.clearIntent(); err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(JournalEntry{Command: CmdDelete, Path: "/memories/dd.md"})
	if _, err := s.intentFile.WriteAt(line[:len(line)/2], 0); err != nil {
		t.Fatal(err)
	}
	n := len(journalOf(t, s))
	if err := s.settleIntent(); err != nil {
		t.Fatal(err)
	}
	if got := len(journalOf(t, s)); got != n || intentSize(t, s.root) != 0 {
		t.Errorf("a torn intent: journal went from %d to %d entries, intent %d bytes", n, got, intentSize(t, s.root))
	}
}
