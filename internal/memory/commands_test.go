package memory

import (
	"os"
	"strings"
	"testing"
)

type commandCase struct {
	name    string
	guard   Guard
	setup   map[string]string // virtual path -> content; "<dir>" makes a directory
	args    map[string]any
	wantErr bool
	// want is the exact text when set; contains/absent are substrings.
	want     string
	contains []string
	absent   []string
	// after: virtual path -> content that must be there; nil = must not exist.
	after map[string]*string
	// trashed: number of trash entries after the call.
	trashed int
}

func runCommandCase(t *testing.T, tc commandCase) {
	t.Helper()
	h := newHarness(t, tc.guard)
	for p, content := range tc.setup {
		if content == "<dir>" {
			if err := os.MkdirAll(h.s.hostPath(p), 0o700); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeFile(t, h.s, p, content)
	}
	before := snapshot(t, h.s.hostPath(VirtualRoot))
	journalBefore := len(journalOf(t, h.s))
	text, isErr := h.call(tc.args)
	if isErr != tc.wantErr {
		t.Fatalf("isError = %v, want %v; text:\n%s", isErr, tc.wantErr, text)
	}
	if tc.want != "" && text != tc.want {
		t.Errorf("text:\n%q\nwant:\n%q", text, tc.want)
	}
	for _, c := range tc.contains {
		if !strings.Contains(text, c) {
			t.Errorf("text %q does not contain %q", text, c)
		}
	}
	for _, c := range tc.absent {
		if strings.Contains(text, c) {
			t.Errorf("text %q contains %q", text, c)
		}
	}
	for p, want := range tc.after {
		b, err := os.ReadFile(h.s.hostPath(p))
		switch {
		case want == nil && !os.IsNotExist(err):
			t.Errorf("%s exists (err %v), want it gone", p, err)
		case want != nil && err != nil:
			t.Errorf("%s: %v", p, err)
		case want != nil && string(b) != *want:
			t.Errorf("%s = %q, want %q", p, b, *want)
		}
	}
	trash, err := h.s.Trash()
	if err != nil {
		t.Fatal(err)
	}
	if len(trash) != tc.trashed {
		t.Errorf("trash has %d entries, want %d: %+v", len(trash), tc.trashed, trash)
	}
	journalAfter := len(journalOf(t, h.s))
	if tc.wantErr {
		// a failed or refused call changes nothing
		if after := snapshot(t, h.s.hostPath(VirtualRoot)); !equalMaps(before, after) {
			t.Errorf("a failed call changed the memories: before %v after %v", keys(before), keys(after))
		}
		if journalAfter != journalBefore {
			t.Errorf("a failed call was journaled")
		}
	} else if tc.args["command"] != CmdView && journalAfter != journalBefore+1 {
		t.Errorf("journal grew by %d entries, want 1", journalAfter-journalBefore)
	}
}

// TestCommands runs every command's happy paths and documented errors through a real MCP client.
func TestCommands(t *testing.T) {
	three := "one\ntwo\nthree\n"
	tests := []commandCase{
		// ---- view ----
		{
			name: "view/directory lists two levels with sizes, hides dot entries",
			setup: map[string]string{
				"/memories/notes.md":                    "hello\n",
				"/memories/proj/a1.md":                  "x",
				"/memories/proj/deep/d1.md":             "deep",
				"/memories/proj/deep/deeper/d2.md":      "deeper",
				"/memories/proj/deep/deeper/more/d3.md": "more",
				"/memories/.hidden.md":                  "secret",
			},
			args: map[string]any{"command": "view", "path": "/memories"},
			contains: []string{
				"Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n",
				"\t/memories\n",
				"\n6B\t/memories/notes.md",
				"\t/memories/proj/\n",
				"\n1B\t/memories/proj/a1.md",
				"\t/memories/proj/deep/",
			},
			absent: []string{"d1.md", "deeper", ".hidden", ".trash", ".journal"},
		},
		{
			name:  "view/subdirectory with trailing slash",
			setup: map[string]string{"/memories/proj/a1.md": "abc"},
			args:  map[string]any{"command": "view", "path": "/memories/proj/"},
			contains: []string{
				"up to 2 levels deep in /memories/proj, excluding hidden items:",
				"\n3B\t/memories/proj/a1.md",
			},
		},
		{
			name:  "view/file shows numbered lines",
			setup: map[string]string{"/memories/notes.md": three},
			args:  map[string]any{"command": "view", "path": "/memories/notes.md"},
			want:  "Here's the content of /memories/notes.md with line numbers:\n     1\tone\n     2\ttwo\n     3\tthree",
		},
		{
			name:  "view/view_range start to end",
			setup: map[string]string{"/memories/notes.md": three},
			args:  map[string]any{"command": "view", "path": "/memories/notes.md", "view_range": []int{2, 3}},
			want:  "Here's the content of /memories/notes.md with line numbers:\n     2\ttwo\n     3\tthree",
		},
		{
			name:  "view/view_range end -1 reads to the end",
			setup: map[string]string{"/memories/notes.md": three},
			args:  map[string]any{"command": "view", "path": "/memories/notes.md", "view_range": []int{2, -1}},
			want:  "Here's the content of /memories/notes.md with line numbers:\n     2\ttwo\n     3\tthree",
		},
		{
			name:  "view/view_range single line",
			setup: map[string]string{"/memories/notes.md": three},
			args:  map[string]any{"command": "view", "path": "/memories/notes.md", "view_range": []int{1, 1}},
			want:  "Here's the content of /memories/notes.md with line numbers:\n     1\tone",
		},
		{
			name:    "view/missing path",
			args:    map[string]any{"command": "view", "path": "/memories/nope.md"},
			wantErr: true,
			want:    "memory_error: the path /memories/nope.md does not exist. Please provide a valid path (view /memories lists the files)",
		},
		{
			name:    "view/view_range start beyond the file",
			setup:   map[string]string{"/memories/notes.md": three},
			args:    map[string]any{"command": "view", "path": "/memories/notes.md", "view_range": []int{5, 6}},
			wantErr: true,
			want:    "memory_error: invalid view_range [5, 6]: start must be between 1 and 3 (the number of lines in /memories/notes.md)",
		},
		{
			name:    "view/view_range end before start",
			setup:   map[string]string{"/memories/notes.md": three},
			args:    map[string]any{"command": "view", "path": "/memories/notes.md", "view_range": []int{3, 2}},
			wantErr: true,
			want:    "memory_error: invalid view_range [3, 2]: end must be -1 (to the end) or at least start",
		},
		{
			name:     "view/view_range needs two numbers",
			setup:    map[string]string{"/memories/notes.md": three},
			args:     map[string]any{"command": "view", "path": "/memories/notes.md", "view_range": []int{1}},
			wantErr:  true,
			contains: []string{"memory_error: view_range must be two integers [start, end], got 1"},
		},
		{
			name:     "view/view_range on a directory",
			setup:    map[string]string{"/memories/proj/a1.md": "x"},
			args:     map[string]any{"command": "view", "path": "/memories/proj", "view_range": []int{1, 2}},
			wantErr:  true,
			contains: []string{"memory_error: view_range applies to files; /memories/proj is a directory"},
		},
		// ---- create ----
		{
			name:    "create/new file with parent directories",
			args:    map[string]any{"command": "create", "path": "/memories/projects/alpha/notes.md", "file_text": "# Alpha\n- started\n"},
			want:    "File created successfully at: /memories/projects/alpha/notes.md",
			after:   map[string]*string{"/memories/projects/alpha/notes.md": ptr("# Alpha\n- started\n")},
			trashed: 0,
		},
		{
			name:  "create/empty file",
			args:  map[string]any{"command": "create", "path": "/memories/empty.md", "file_text": ""},
			want:  "File created successfully at: /memories/empty.md",
			after: map[string]*string{"/memories/empty.md": ptr("")},
		},
		{
			name:     "create/overwrite with confirm keeps the old version in the trash",
			setup:    map[string]string{"/memories/notes.md": "old\n"},
			args:     map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "new\n", "confirm": true},
			contains: []string{"File /memories/notes.md overwritten (4 bytes); the previous version is kept in the trash as "},
			after:    map[string]*string{"/memories/notes.md": ptr("new\n")},
			trashed:  1,
		},
		{
			name:     "create/without file_text",
			args:     map[string]any{"command": "create", "path": "/memories/notes.md"},
			wantErr:  true,
			want:     `memory_error: create needs file_text, the full content of the file ("" for an empty file)`,
			after:    map[string]*string{"/memories/notes.md": nil},
			contains: nil,
		},
		{
			name:    "create/on a directory",
			setup:   map[string]string{"/memories/proj": "<dir>"},
			args:    map[string]any{"command": "create", "path": "/memories/proj", "file_text": "x"},
			wantErr: true,
			want:    "memory_error: /memories/proj is a directory; create writes files, choose a file name inside it such as /memories/proj/notes.md",
		},
		{
			name:    "create/below a file",
			setup:   map[string]string{"/memories/notes.md": "x"},
			args:    map[string]any{"command": "create", "path": "/memories/notes.md/child.md", "file_text": "x"},
			wantErr: true,
			want:    "memory_error: /memories/notes.md is a file, not a directory, so nothing can be created below it; choose another path",
		},
		// ---- str_replace ----
		{
			name:    "str_replace/unique match replaced, snippet returned",
			setup:   map[string]string{"/memories/notes.md": "l1\nl2\nl3 target\nl4\nl5\nl6\n"},
			args:    map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "target", "new_str": "done", "confirm": true},
			want:    "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tl1\n     2\tl2\n     3\tl3 done\n     4\tl4\n     5\tl5",
			after:   map[string]*string{"/memories/notes.md": ptr("l1\nl2\nl3 done\nl4\nl5\nl6\n")},
			trashed: 1,
		},
		{
			name:    "str_replace/new_str omitted deletes old_str",
			setup:   map[string]string{"/memories/notes.md": "keep drop more\n"},
			args:    map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": " drop", "confirm": true},
			after:   map[string]*string{"/memories/notes.md": ptr("keep more\n")},
			trashed: 1,
		},
		{
			name:    "str_replace/no match",
			setup:   map[string]string{"/memories/notes.md": three},
			args:    map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "four", "new_str": "4", "confirm": true},
			wantErr: true,
			want:    "memory_error: no match: old_str did not appear verbatim in /memories/notes.md; no replacement was performed. View the file and copy the exact text, including whitespace and line breaks",
			after:   map[string]*string{"/memories/notes.md": ptr(three)},
		},
		{
			name:    "str_replace/occurs 3 times",
			setup:   map[string]string{"/memories/notes.md": "todo a\ntodo b\nx\ntodo c\n"},
			args:    map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "todo", "new_str": "done", "confirm": true},
			wantErr: true,
			want:    "memory_error: old_str occurs 3 times in /memories/notes.md (lines 1, 2, 4); make old_str unique by including more of the surrounding text. No replacement was performed",
		},
		{
			name:    "str_replace/empty old_str",
			setup:   map[string]string{"/memories/notes.md": three},
			args:    map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "", "new_str": "x", "confirm": true},
			wantErr: true,
			want:    "memory_error: str_replace needs old_str, the exact non-empty text to replace (view the file to copy it)",
		},
		{
			name:     "str_replace/missing file",
			args:     map[string]any{"command": "str_replace", "path": "/memories/nope.md", "old_str": "a", "new_str": "b", "confirm": true},
			wantErr:  true,
			contains: []string{"memory_error: the path /memories/nope.md does not exist"},
		},
		{
			name:     "str_replace/on a directory",
			setup:    map[string]string{"/memories/proj/a1.md": "x"},
			args:     map[string]any{"command": "str_replace", "path": "/memories/proj", "old_str": "a", "new_str": "b", "confirm": true},
			wantErr:  true,
			contains: []string{"memory_error: /memories/proj is a directory, not a file"},
		},
		// ---- insert ----
		{
			name:    "insert/at the top (0)",
			setup:   map[string]string{"/memories/notes.md": three},
			args:    map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "zero\n"},
			want:    "The file /memories/notes.md has been edited: 1 line(s) inserted after line 0.",
			after:   map[string]*string{"/memories/notes.md": ptr("zero\none\ntwo\nthree\n")},
			trashed: 1,
		},
		{
			name:    "insert/after a middle line, several lines",
			setup:   map[string]string{"/memories/notes.md": three},
			args:    map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 2, "insert_text": "a\nb"},
			want:    "The file /memories/notes.md has been edited: 2 line(s) inserted after line 2.",
			after:   map[string]*string{"/memories/notes.md": ptr("one\ntwo\na\nb\nthree\n")},
			trashed: 1,
		},
		{
			name:    "insert/after the last line",
			setup:   map[string]string{"/memories/notes.md": "one\ntwo"},
			args:    map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 2, "insert_text": "end"},
			after:   map[string]*string{"/memories/notes.md": ptr("one\ntwo\nend\n")},
			trashed: 1,
		},
		{
			name:    "insert/into an empty file",
			setup:   map[string]string{"/memories/notes.md": ""},
			args:    map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "first"},
			after:   map[string]*string{"/memories/notes.md": ptr("first\n")},
			trashed: 1,
		},
		{
			name:    "insert/insert_line beyond the file",
			setup:   map[string]string{"/memories/notes.md": three},
			args:    map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 4, "insert_text": "x"},
			wantErr: true,
			want:    "memory_error: invalid insert_line 4: it must be between 0 and 3 (/memories/notes.md has 3 lines); 0 inserts at the top",
		},
		{
			name:     "insert/negative insert_line",
			setup:    map[string]string{"/memories/notes.md": three},
			args:     map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": -1, "insert_text": "x"},
			wantErr:  true,
			contains: []string{"memory_error: invalid insert_line -1"},
		},
		{
			name:    "insert/without insert_line",
			setup:   map[string]string{"/memories/notes.md": three},
			args:    map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_text": "x"},
			wantErr: true,
			want:    "memory_error: insert needs insert_line: 0 inserts at the top, N inserts after line N",
		},
		{
			name:    "insert/without insert_text",
			setup:   map[string]string{"/memories/notes.md": three},
			args:    map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 1},
			wantErr: true,
			want:    "memory_error: insert needs insert_text, the text to insert",
		},
		{
			name:     "insert/missing file",
			args:     map[string]any{"command": "insert", "path": "/memories/nope.md", "insert_line": 0, "insert_text": "x"},
			wantErr:  true,
			contains: []string{"memory_error: the path /memories/nope.md does not exist"},
		},
		// ---- delete ----
		{
			name:     "delete/file goes to the trash",
			setup:    map[string]string{"/memories/notes.md": three},
			args:     map[string]any{"command": "delete", "path": "/memories/notes.md", "confirm": true},
			contains: []string{"Successfully deleted /memories/notes.md (kept in the trash as ", " for 7 days)."},
			after:    map[string]*string{"/memories/notes.md": nil},
			trashed:  1,
		},
		{
			name:     "delete/empty directory",
			setup:    map[string]string{"/memories/old": "<dir>"},
			args:     map[string]any{"command": "delete", "path": "/memories/old", "confirm": true},
			contains: []string{"Successfully deleted /memories/old"},
			after:    map[string]*string{"/memories/old": nil},
			trashed:  1,
		},
		{
			name:    "delete/missing path",
			args:    map[string]any{"command": "delete", "path": "/memories/nope.md", "confirm": true},
			wantErr: true,
			want:    "memory_error: the path /memories/nope.md does not exist; nothing was deleted (view /memories lists the files)",
		},
		// ---- rename ----
		{
			name:    "rename/file into a new directory",
			setup:   map[string]string{"/memories/notes.md": three},
			args:    map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/archive/2025/notes.md", "confirm": true},
			want:    "Successfully renamed /memories/notes.md to /memories/archive/2025/notes.md",
			after:   map[string]*string{"/memories/notes.md": nil, "/memories/archive/2025/notes.md": ptr(three)},
			trashed: 1,
		},
		{
			name:    "rename/directory",
			setup:   map[string]string{"/memories/proj/a1.md": "x"},
			args:    map[string]any{"command": "rename", "old_path": "/memories/proj", "new_path": "/memories/project", "confirm": true},
			want:    "Successfully renamed /memories/proj to /memories/project",
			after:   map[string]*string{"/memories/proj/a1.md": nil, "/memories/project/a1.md": ptr("x")},
			trashed: 0,
		},
		{
			name:    "rename/missing source",
			args:    map[string]any{"command": "rename", "old_path": "/memories/nope.md", "new_path": "/memories/new.md", "confirm": true},
			wantErr: true,
			want:    "memory_error: the path /memories/nope.md does not exist; nothing was renamed (view /memories lists the files)",
		},
		{
			name:    "rename/into itself",
			setup:   map[string]string{"/memories/proj/a1.md": "x"},
			args:    map[string]any{"command": "rename", "old_path": "/memories/proj", "new_path": "/memories/proj/sub", "confirm": true},
			wantErr: true,
			want:    "memory_error: cannot move /memories/proj into itself (/memories/proj/sub)",
		},
		{
			name:    "rename/same path",
			setup:   map[string]string{"/memories/notes.md": "x"},
			args:    map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/notes.md/", "confirm": true},
			wantErr: true,
			want:    "memory_error: old_path and new_path are both /memories/notes.md; nothing to rename",
		},
		// ---- the call itself ----
		{
			name:    "call/unknown command",
			args:    map[string]any{"command": "undo", "path": "/memories/notes.md"},
			wantErr: true,
			want:    "memory_error: unknown command \"undo\"; use one of: view, create, str_replace, insert, delete, rename",
		},
		{
			name:    "call/missing command",
			args:    map[string]any{"path": "/memories/notes.md"},
			wantErr: true,
			want:    "memory_error: command is missing; use one of: view, create, str_replace, insert, delete, rename",
		},
		{
			name:     "call/argument of the wrong type",
			setup:    map[string]string{"/memories/notes.md": three},
			args:     map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": "two", "insert_text": "x"},
			wantErr:  true,
			contains: []string{"memory_error: invalid arguments: ", "insert_line (integer)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runCommandCase(t, tc) })
	}
}
