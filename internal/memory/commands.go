package memory

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

const maxLines = 999_999

func notExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// splitLines splits content into lines; a final newline does not start another line.
func splitLines(content string) []string {
	if content == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(content, "\n"), "\n")
}

func numbered(lines []string, first int) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%6d\t%s", first+i, l)
	}
	return b.String()
}

func humanSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	f := float64(n)
	for _, unit := range []string{"K", "M", "G", "T"} {
		f /= 1024
		if f < 1024 || unit == "T" {
			return strconv.FormatFloat(f, 'f', 1, 64) + unit
		}
	}
	return "" // unreachable
}

func (s *Store) confirmation(what string) error {
	return refusef("%s is destructive and needs confirmation: check with the user, then repeat the same call with \"confirm\": true (the previous content is kept in the trash for %s)",
		what, adapterconfig.MemoryDuration(s.cfg.Guard.TrashRetention))
}

func (s *Store) checkFileSize(p vpath, size int) error {
	if int64(size) > s.cfg.Guard.MaxFileBytes {
		return refusef("%s would be %d bytes, over the per-file limit of %s; nothing was changed: split the content into several smaller files",
			p.virt, size, adapterconfig.MemoryBytes(s.cfg.Guard.MaxFileBytes))
	}
	return nil
}

// writeCost is what writing content of size bytes adds to the footprint at most: the
// content, the previous version kept in the trash (a hard link costs no bytes, a copy
// does), a new file or trash entry, and the journal line.
func writeCost(size, previous int) int64 {
	return int64(size+previous) + 4*entryOverhead
}

// checkTotal refuses a change that would make the store keep more than MaxTotalBytes;
// it runs with the locks held.
func (s *Store) checkTotal(cost int64) error {
	if used := s.footprint(); used+cost > s.cfg.Guard.MaxTotalBytes {
		return refusef("the memory would keep %d bytes, over its limit of %s (in use: %d bytes of files, %d bytes of trash kept for restore for %s, %d bytes of journal); nothing was changed: delete files that are no longer needed (with confirm: true) or write less; trashed content counts until it expires",
			used+cost, adapterconfig.MemoryBytes(s.cfg.Guard.MaxTotalBytes), s.total, s.trashBytes, adapterconfig.MemoryDuration(s.cfg.Guard.TrashRetention), s.journalSize)
	}
	return nil
}

// admitWrite refuses a write that makes p updated bytes long in place of previous ones
// when it breaks the per-file or total limit, or when unconfirmed (the command needs a
// confirmation the call did not give; what names the change in the refusal). The limits
// come first, so that no one is asked to confirm a change that could not be made. It
// runs with the locks held.
func (s *Store) admitWrite(p vpath, updated, previous int, unconfirmed bool, what string) error {
	if err := s.checkFileSize(p, updated); err != nil {
		return err
	}
	if err := s.checkTotal(writeCost(updated, previous)); err != nil {
		return err
	}
	if unconfirmed {
		return s.confirmation(what)
	}
	return nil
}

// readForEdit reads the regular file p for str_replace and insert.
func (s *Store) readForEdit(p vpath) ([]byte, error) {
	fi, err := s.mem.Lstat(p.osRel())
	switch {
	case notExist(err):
		return nil, failf("the path %s does not exist. Please provide a valid path (view /memories lists the files)", p.virt)
	case err != nil:
		return nil, err
	case fi.IsDir():
		return nil, failf("%s is a directory, not a file; name a file inside it", p.virt)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, failf("%s is a symbolic link; edit the file it points to instead", p.virt)
	case !fi.Mode().IsRegular():
		return nil, failf("%s is not a regular file", p.virt)
	}
	return s.mem.ReadFile(p.osRel())
}

// ---- view ----

func (s *Store) view(a args) (string, error) {
	p, err := parsePath("path", a.Path)
	if err != nil {
		return "", err
	}
	if err := s.contained("path", p); err != nil {
		return "", err
	}
	fi, err := s.mem.Stat(p.osRel())
	if notExist(err) {
		return "", failf("the path %s does not exist. Please provide a valid path (view /memories lists the files)", p.virt)
	}
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		if a.ViewRange != nil {
			return "", failf("view_range applies to files; %s is a directory (call view without view_range to list it)", p.virt)
		}
		return s.listDir(p, fi.Size())
	}
	if !fi.Mode().IsRegular() {
		return "", failf("%s is not a regular file or directory", p.virt)
	}
	data, err := s.mem.ReadFile(p.osRel())
	if notExist(err) {
		return "", failf("the file %s no longer exists (deleted or renamed concurrently)", p.virt)
	}
	if err != nil {
		return "", err
	}
	lines := splitLines(string(data))
	if len(lines) > maxLines {
		return "", failf("file %s exceeds the maximum of 999,999 lines", p.virt)
	}
	first := 1
	if a.ViewRange != nil {
		if len(a.ViewRange) != 2 {
			return "", failf("view_range must be two integers [start, end], got %d; e.g. [1, 20], or [10, -1] to read from line 10 to the end", len(a.ViewRange))
		}
		start, end := a.ViewRange[0], a.ViewRange[1]
		if start < 1 || start > len(lines) {
			return "", failf("invalid view_range [%d, %d]: start must be between 1 and %d (the number of lines in %s)", start, end, len(lines), p.virt)
		}
		if end == -1 || end > len(lines) {
			end = len(lines)
		}
		if end < start {
			return "", failf("invalid view_range [%d, %d]: end must be -1 (to the end) or at least start", a.ViewRange[0], a.ViewRange[1])
		}
		lines = lines[start-1 : end]
		first = start
	}
	return fmt.Sprintf("Here's the content of %s with line numbers:\n%s", p.virt, numbered(lines, first)), nil
}

// listDir lists p up to 2 levels deep, excluding hidden items, with sizes.
// Symlinked directories are listed but not entered; entries that cannot be
// reached inside the root (links out of it) are left out.
func (s *Store) listDir(p vpath, size int64) (string, error) {
	lines := []string{humanSize(size) + "\t" + p.virt}
	var walk func(dir vpath, depth int) error
	walk = func(dir vpath, depth int) error {
		f, err := s.mem.Open(dir.osRel())
		if err != nil {
			return err
		}
		des, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return err
		}
		sort.Slice(des, func(i, j int) bool { return des[i].Name() < des[j].Name() })
		for _, de := range des {
			if strings.HasPrefix(de.Name(), ".") {
				continue
			}
			child := vpath{rel: strings.TrimPrefix(dir.rel+"/"+de.Name(), "/")}
			child.virt = VirtualRoot + "/" + child.rel
			info, err := s.mem.Stat(child.osRel())
			if err != nil {
				continue
			}
			switch {
			case info.IsDir():
				lines = append(lines, humanSize(info.Size())+"\t"+child.virt+"/")
				if depth < 2 && de.Type()&fs.ModeSymlink == 0 {
					if err := walk(child, depth+1); err != nil && !notExist(err) {
						return err
					}
				}
			case info.Mode().IsRegular():
				lines = append(lines, humanSize(info.Size())+"\t"+child.virt)
			}
		}
		return nil
	}
	if err := walk(p, 1); err != nil {
		return "", err
	}
	return fmt.Sprintf("Here're the files and directories up to 2 levels deep in %s, excluding hidden items:\n%s", p.virt, strings.Join(lines, "\n")), nil
}

// ---- create ----

func (s *Store) create(p vpath, a args) (string, error) {
	if a.FileText == nil {
		return "", failf("create needs file_text, the full content of the file (\"\" for an empty file)")
	}
	data := []byte(*a.FileText)
	if err := s.checkFileSize(p, len(data)); err != nil {
		return "", err
	}
	var result string
	err := s.mutate(func() (*JournalEntry, error) {
		if err := s.contained("path", p); err != nil {
			return nil, err
		}
		var old []byte
		exists := false
		fi, err := s.mem.Lstat(p.osRel())
		switch {
		case notExist(err):
		case err != nil:
			return nil, err
		case fi.IsDir():
			return nil, failf("%s is a directory; create writes files, choose a file name inside it such as %s/notes.md", p.virt, p.virt)
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, failf("%s is a symbolic link; create the file at the path it points to instead", p.virt)
		case !fi.Mode().IsRegular():
			return nil, failf("%s is not a regular file", p.virt)
		default:
			exists = true
			if old, err = s.mem.ReadFile(p.osRel()); err != nil {
				return nil, err
			}
		}
		if err := s.admitWrite(p, len(data), len(old), exists && s.tool.OverwriteNeedsConfirm() && !a.Confirm,
			fmt.Sprintf("create over the existing file %s (it replaces the whole file; use str_replace or insert for a targeted edit)", p.virt)); err != nil {
			return nil, err
		}
		if exists {
			j, err := s.replaceFile(p, CmdCreate, old, data)
			if err != nil {
				return nil, err
			}
			result = fmt.Sprintf("File %s overwritten (%d bytes); the previous version is kept in the trash as %s.", p.virt, len(data), j.TrashID)
			return j, nil
		}
		if err := s.mkdirAll(p.parent()); err != nil {
			return nil, err
		}
		j := &JournalEntry{Command: CmdCreate, Path: p.virt, BytesAfter: int64(len(data)), SHA256After: sum(data)}
		if err := s.beginIntent(j); err != nil {
			return nil, err
		}
		if err := s.writeAtomic(s.mem, p.osRel(), data); err != nil {
			return nil, err
		}
		result = "File created successfully at: " + p.virt
		return j, nil
	})
	return result, err
}

// ---- str_replace ----

func (s *Store) strReplace(p vpath, a args) (string, error) {
	if a.OldStr == nil || *a.OldStr == "" {
		return "", failf("str_replace needs old_str, the exact non-empty text to replace (view the file to copy it)")
	}
	oldStr, newStr := *a.OldStr, ""
	if a.NewStr != nil {
		newStr = *a.NewStr
	}
	return s.editFile(p, CmdStrReplace, a.Confirm, "str_replace in "+p.virt, func(content string) (string, string, error) {
		switch n := strings.Count(content, oldStr); {
		case n == 0:
			return "", "", failf("no match: old_str did not appear verbatim in %s; no replacement was performed. View the file and copy the exact text, including whitespace and line breaks", p.virt)
		case n > 1:
			return "", "", failf("old_str occurs %d times in %s (lines %s); make old_str unique by including more of the surrounding text. No replacement was performed",
				n, p.virt, occurrenceLines(content, oldStr))
		}
		idx := strings.Index(content, oldStr)
		updated := content[:idx] + newStr + content[idx+len(oldStr):]
		lines := splitLines(updated)
		changed := strings.Count(content[:idx], "\n")
		from, to := max(0, changed-2), min(len(lines), changed+strings.Count(newStr, "\n")+3)
		return updated, fmt.Sprintf("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n%s", numbered(lines[from:to], from+1)), nil
	})
}

// editFile is the body str_replace and insert share: under the store's locks it reads
// the file at p, asks edit for the new content and the answer to give, admits the write
// (quota, confirmation) and replaces the file, keeping the old content in the trash.
// Only the edit itself differs between the commands, so the checks cannot drift apart.
func (s *Store) editFile(p vpath, command string, confirmed bool, action string, edit func(content string) (updated, result string, err error)) (string, error) {
	var result string
	err := s.mutate(func() (*JournalEntry, error) {
		if err := s.contained("path", p); err != nil {
			return nil, err
		}
		data, err := s.readForEdit(p)
		if err != nil {
			return nil, err
		}
		updated, answer, err := edit(string(data))
		if err != nil {
			return nil, err
		}
		if err := s.admitWrite(p, len(updated), len(data), s.confirm[command] && !confirmed, action); err != nil {
			return nil, err
		}
		j, err := s.replaceFile(p, command, data, []byte(updated))
		if err != nil {
			return nil, err
		}
		result = answer
		return j, nil
	})
	return result, err
}

func occurrenceLines(content, sub string) string {
	var out []string
	for off := 0; ; {
		i := strings.Index(content[off:], sub)
		if i < 0 {
			break
		}
		out = append(out, strconv.Itoa(strings.Count(content[:off+i], "\n")+1))
		off += i + len(sub)
	}
	return strings.Join(out, ", ")
}

// replaceFile keeps old in the trash and writes updated in place of p. The caller holds the locks.
func (s *Store) replaceFile(p vpath, command string, old, updated []byte) (*JournalEntry, error) {
	j := &JournalEntry{
		Command: command, Path: p.virt, TrashID: s.newTrashID(),
		BytesBefore: int64(len(old)), SHA256Before: sum(old),
		BytesAfter: int64(len(updated)), SHA256After: sum(updated),
	}
	if err := s.beginIntent(j); err != nil {
		return nil, err
	}
	if err := s.trashKeep(j.TrashID, p, command, "", kindFile, old, false); err != nil {
		return nil, err
	}
	if err := s.writeAtomic(s.mem, p.osRel(), updated); err != nil {
		return nil, err
	}
	return j, nil
}

// ---- insert ----

func (s *Store) insert(p vpath, a args) (string, error) {
	if a.InsertLine == nil {
		return "", failf("insert needs insert_line: 0 inserts at the top, N inserts after line N")
	}
	if a.InsertText == nil {
		return "", failf("insert needs insert_text, the text to insert")
	}
	at, text := *a.InsertLine, *a.InsertText
	return s.editFile(p, CmdInsert, a.Confirm, "insert into "+p.virt, func(content string) (string, string, error) {
		lines := splitLines(content)
		if at < 0 || at > len(lines) {
			return "", "", failf("invalid insert_line %d: it must be between 0 and %d (%s has %d lines); 0 inserts at the top", at, len(lines), p.virt, len(lines))
		}
		ins := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		out := make([]string, 0, len(lines)+len(ins))
		out = append(append(append(out, lines[:at]...), ins...), lines[at:]...)
		updated := strings.Join(out, "\n") + "\n"
		return updated, fmt.Sprintf("The file %s has been edited: %d line(s) inserted after line %d.", p.virt, len(ins), at), nil
	})
}

// ---- delete ----

// lstatExisting is Lstat of the path delete or rename acts on: a missing path is the
// agent's mistake, answered with what was not done and where to look, not an I/O error.
func (s *Store) lstatExisting(p vpath, notDone string) (fs.FileInfo, error) {
	fi, err := s.mem.Lstat(p.osRel())
	if notExist(err) {
		return nil, failf("the path %s does not exist; nothing was %s (view /memories lists the files)", p.virt, notDone)
	}
	return fi, err
}

func (s *Store) delete(p vpath, a args) (string, error) {
	var result string
	err := s.mutate(func() (*JournalEntry, error) {
		if err := s.contained("path", p); err != nil {
			return nil, err
		}
		fi, err := s.lstatExisting(p, "deleted")
		if err != nil {
			return nil, err
		}
		var data []byte
		kind := kindFile
		switch {
		case fi.IsDir():
			kind = kindDir
			f, err := s.mem.Open(p.osRel())
			if err != nil {
				return nil, err
			}
			names, err := f.Readdirnames(-1)
			f.Close()
			if err != nil {
				return nil, err
			}
			if len(names) > 0 {
				return nil, refusef("%s is a directory with %d entries; delete refuses non-empty directories to prevent mass deletion: delete the files in it one by one (each with confirm: true), then the directory", p.virt, len(names))
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			kind = "link"
		case fi.Mode().IsRegular():
			if data, err = s.mem.ReadFile(p.osRel()); err != nil {
				return nil, err
			}
		default:
			return nil, failf("%s is not a regular file or directory", p.virt)
		}
		if s.confirm[CmdDelete] && !a.Confirm {
			return nil, s.confirmation("delete of " + p.virt)
		}
		j := &JournalEntry{Command: CmdDelete, Path: p.virt, TrashID: s.newTrashID()}
		if kind == kindFile {
			j.BytesBefore, j.SHA256Before = int64(len(data)), sum(data)
		}
		if err := s.beginIntent(j); err != nil {
			return nil, err
		}
		if err := s.trashKeep(j.TrashID, p, CmdDelete, "", kind, data, true); err != nil {
			return nil, err
		}
		result = fmt.Sprintf("Successfully deleted %s (kept in the trash as %s for %s).", p.virt, j.TrashID, adapterconfig.MemoryDuration(s.cfg.Guard.TrashRetention))
		return j, nil
	})
	return result, err
}

// ---- rename ----

func (s *Store) rename(a args) (string, error) {
	from, err := parsePath("old_path", a.OldPath)
	if err != nil {
		return "", err
	}
	to, err := parsePath("new_path", a.NewPath)
	if err != nil {
		return "", err
	}
	if err := checkTarget("old_path", CmdRename, from); err != nil {
		return "", err
	}
	if err := checkTarget("new_path", CmdRename, to); err != nil {
		return "", err
	}
	if from.rel == to.rel {
		return "", failf("old_path and new_path are both %s; nothing to rename", from.virt)
	}
	if to.within(from) {
		return "", failf("cannot move %s into itself (%s)", from.virt, to.virt)
	}
	var result string
	err = s.mutate(func() (*JournalEntry, error) {
		if err := s.contained("old_path", from); err != nil {
			return nil, err
		}
		if err := s.contained("new_path", to); err != nil {
			return nil, err
		}
		fi, err := s.lstatExisting(from, "renamed")
		if err != nil {
			return nil, err
		}
		if _, err := s.mem.Lstat(to.osRel()); err == nil {
			return nil, refusef("the destination %s already exists; rename never overwrites: choose another new_path, or delete the destination first (with confirm: true)", to.virt)
		} else if !notExist(err) {
			return nil, err
		}
		if s.confirm[CmdRename] && !a.Confirm {
			return nil, s.confirmation(fmt.Sprintf("rename of %s to %s", from.virt, to.virt))
		}
		j := &JournalEntry{Command: CmdRename, Path: from.virt, NewPath: to.virt}
		var data []byte
		if fi.Mode().IsRegular() {
			if data, err = s.mem.ReadFile(from.osRel()); err != nil {
				return nil, err
			}
			j.TrashID = s.newTrashID()
			j.BytesBefore, j.BytesAfter = int64(len(data)), int64(len(data))
			j.SHA256Before, j.SHA256After = sum(data), sum(data)
		}
		if err := s.mkdirAll(to.parent()); err != nil {
			return nil, err
		}
		if err := s.beginIntent(j); err != nil {
			return nil, err
		}
		if j.TrashID != "" {
			if err := s.trashKeep(j.TrashID, from, CmdRename, to.virt, kindFile, data, false); err != nil {
				return nil, err
			}
		}
		if err := s.mem.Rename(from.osRel(), to.osRel()); err != nil {
			return nil, err
		}
		if err := s.syncDir(s.mem, to.parent().osRel()); err != nil {
			return nil, err
		}
		if from.parent().rel != to.parent().rel {
			if err := s.syncDir(s.mem, from.parent().osRel()); err != nil {
				return nil, err
			}
		}
		result = fmt.Sprintf("Successfully renamed %s to %s", from.virt, to.virt)
		return j, nil
	})
	return result, err
}
