package memory

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// ---- atomic writes ----

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sum(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// writeAtomic writes data to name inside r: a temporary file in the same
// directory, fsync, rename into place, fsync of the directory.
func (s *Store) writeAtomic(r *os.Root, name string, data []byte) (err error) {
	dir := filepath.Dir(name)
	tmp := filepath.Join(dir, tmpPrefix+randHex(8))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = r.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return err
	}
	if !s.noFsync {
		if err = f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = r.Rename(tmp, name); err != nil {
		return err
	}
	return s.syncDir(r, dir)
}

// writeNew creates name (which must not exist), writes data and fsyncs the file.
func (s *Store) writeNew(r *os.Root, name string, data []byte) error {
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if !s.noFsync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// syncDir fsyncs a directory so that a rename or a new entry in it survives a crash.
func (s *Store) syncDir(r *os.Root, dir string) error {
	if s.noFsync {
		return nil
	}
	f, err := r.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// mkdirAll creates the directory p and its missing parents under memories/,
// fsyncing the parent of each directory it creates.
func (s *Store) mkdirAll(p vpath) error {
	if p.isRoot() {
		return nil
	}
	cur := vpath{virt: VirtualRoot}
	for _, seg := range strings.Split(p.rel, "/") {
		next := vpath{rel: strings.TrimPrefix(cur.rel+"/"+seg, "/")}
		next.virt = VirtualRoot + "/" + next.rel
		fi, err := s.mem.Stat(next.osRel())
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := s.mem.Mkdir(next.osRel(), 0o700); err != nil {
				return err
			}
			if err := s.syncDir(s.mem, cur.osRel()); err != nil {
				return err
			}
		case err != nil:
			return err
		case !fi.IsDir():
			return failf("%s is a file, not a directory, so nothing can be created below it; choose another path", next.virt)
		}
		cur = next
	}
	return nil
}

// ---- lock ----

// lockExclusive takes the cross-process lock; the caller holds s.mu.
func (s *Store) lockExclusive() (func(), error) {
	if err := flock(s.lockFile); err != nil {
		return nil, fmt.Errorf("lock %s: %w", lockName, err)
	}
	return func() { _ = funlock(s.lockFile) }, nil
}

// mutate runs fn with the store locked, after journaling what a crashed or
// failed mutation left undone (settleIntent), refreshing the total size (when
// another process changed the memories) and purging expired trash. fn records
// the journal entry of what it is about to do with beginIntent before its first
// change, and returns that entry (nil when nothing changed); mutate then appends the
// entry to the journal and measures the store's footprint again.
func (s *Store) mutate(fn func() (*JournalEntry, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.lockExclusive()
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.settleIntent(); err != nil {
		return err
	}
	if err := s.refreshTotal(false); err != nil {
		return err
	}
	if since := s.now().Sub(s.lastPurge); since >= s.purgeEvery || since < 0 {
		if err := s.purgeTrash(); err != nil {
			return err
		}
	}
	entry, err := fn()
	if err != nil {
		if s.intent != nil {
			// fn failed after it began (a failed write or fsync): what it changed
			// before failing is journaled now, not left for the next mutation.
			if serr := s.settleIntent(); serr != nil {
				return errors.Join(err, serr)
			}
		}
		return err
	}
	// The footprint is measured again, trash and directories included, rather than
	// adjusted by what fn thinks it changed.
	if err := s.commitIntent(entry); err != nil {
		return err
	}
	return s.refreshTotal(true)
}

// entryOverhead is what each file, directory or trash entry costs against the quota
// besides its bytes: an inode and a directory entry, which empty files and deep trees
// would otherwise get for free.
const entryOverhead = 512

// refreshTotal recomputes what the store keeps (files and directories under memories/,
// the trash) when forced or when the journal changed size since this store last wrote
// it (another process mutated).
func (s *Store) refreshTotal(force bool) error {
	fi, err := s.base.Stat(journalName)
	size := int64(0)
	switch {
	case err == nil:
		size = fi.Size()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if !force && size == s.journalSize {
		return nil
	}
	total, err := footprintOf(s.mem.FS(), true)
	if err != nil {
		return err
	}
	trash, err := footprintOf(s.trashFS(), false)
	if err != nil {
		return err
	}
	s.total, s.trashBytes, s.journalSize = total, trash, size
	return nil
}

// footprintOf adds up the bytes of the regular files under fsys and entryOverhead for
// each file and, when dirs, each directory below the top.
func footprintOf(fsys fs.FS, dirs bool) (int64, error) {
	var total int64
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case p == ".":
			return nil
		case d.IsDir():
			if dirs {
				total += entryOverhead
			}
		case d.Type().IsRegular() && !strings.HasPrefix(d.Name(), tmpPrefix):
			if info, err := d.Info(); err == nil {
				total += entryOverhead + info.Size()
			}
		}
		return nil
	})
	return total, err
}

// trashFS is the trash folder as a file system, for footprintOf.
func (s *Store) trashFS() fs.FS {
	sub, err := fs.Sub(s.base.FS(), trashDir)
	if err != nil {
		return emptyFS{}
	}
	return sub
}

type emptyFS struct{}

func (emptyFS) Open(string) (fs.File, error) { return nil, fs.ErrNotExist }

// footprint is everything the store keeps against MaxTotalBytes.
func (s *Store) footprint() int64 { return s.total + s.trashBytes + s.journalSize }

// ---- trash ----

// TrashEntry describes trashed content (.trash/<id>/meta.json).
type TrashEntry struct {
	ID string `json:"id"`
	// Path is the virtual path the content had (/memories/...).
	Path string `json:"path"`
	// NewPath is where a rename moved the file.
	NewPath string `json:"new_path,omitempty"`
	// Command is the mutation that trashed the content.
	Command string `json:"command"`
	// Kind is "file" or "dir" (an empty directory).
	Kind   string    `json:"kind"`
	Time   time.Time `json:"time"`
	Bytes  int64     `json:"bytes"`
	SHA256 string    `json:"sha256,omitempty"`
}

const (
	kindFile = "file"
	kindDir  = "dir"
)

const trashTimeLayout = "20060102T150405.000000000Z"

var trashIDPattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}\.[0-9]{9}Z-[0-9a-f]{8}$`)

func (s *Store) newTrashID() string {
	return s.now().UTC().Format(trashTimeLayout) + "-" + randHex(4)
}

// trashKeep keeps the current content of p in the trash as entry id (from
// newTrashID). With move the entry is moved there (delete); otherwise it stays
// in place and the trash gets a hard link to it (a copy where links are not
// possible), so the following atomic replace leaves the old content in the
// trash only.
func (s *Store) trashKeep(id string, p vpath, command, newPath string, kind string, data []byte, move bool) error {
	e := TrashEntry{
		ID:      id,
		Path:    p.virt,
		NewPath: newPath,
		Command: command,
		Kind:    kind,
		Time:    s.now().UTC(),
	}
	if kind == kindFile {
		e.Bytes = int64(len(data))
		e.SHA256 = sum(data)
	}
	dir := filepath.Join(trashDir, e.ID)
	if err := s.base.Mkdir(dir, 0o700); err != nil {
		return err
	}
	meta, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	// The entry directory is new, so meta.json is written in place; the fsync of
	// the entry directory below makes both its names durable.
	if err := s.writeNew(s.base, filepath.Join(dir, metaName), append(meta, '\n')); err != nil {
		return err
	}
	content := filepath.Join(dir, contentName)
	switch {
	case move:
		if err := s.base.Rename(p.baseRel(), content); err != nil {
			return err
		}
		if err := s.syncDir(s.mem, p.parent().osRel()); err != nil {
			return err
		}
	default:
		if err := s.base.Link(p.baseRel(), content); err != nil {
			if err := s.writeNew(s.base, content, data); err != nil {
				return err
			}
		}
	}
	if err := s.syncDir(s.base, dir); err != nil {
		return err
	}
	return s.syncDir(s.base, trashDir)
}

// Trash lists the trashed entries, oldest first. Entries a crash left
// incomplete (no meta or no content) are not listed.
func (s *Store) Trash() ([]TrashEntry, error) {
	des, err := fs.ReadDir(s.base.FS(), trashDir)
	if err != nil {
		return nil, err
	}
	var out []TrashEntry
	for _, de := range des {
		if !trashIDPattern.MatchString(de.Name()) {
			continue
		}
		e, err := s.readTrashMeta(de.Name())
		if err != nil {
			continue
		}
		if _, err := s.base.Lstat(filepath.Join(trashDir, e.ID, contentName)); err != nil {
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (s *Store) readTrashMeta(id string) (TrashEntry, error) {
	var e TrashEntry
	b, err := s.base.ReadFile(filepath.Join(trashDir, id, metaName))
	if err != nil {
		return e, err
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, err
	}
	if e.ID != id {
		return e, fmt.Errorf("trash entry %s: meta names id %q", id, e.ID)
	}
	return e, nil
}

// purgeTrash removes trash entries older than the retention period (by the
// time in their id). The caller holds the locks.
func (s *Store) purgeTrash() error {
	now := s.now()
	s.lastPurge = now
	des, err := fs.ReadDir(s.base.FS(), trashDir)
	if err != nil {
		return err
	}
	removed := false
	for _, de := range des {
		name := de.Name()
		if len(name) < len(trashTimeLayout) {
			continue
		}
		t, err := time.Parse(trashTimeLayout, name[:len(trashTimeLayout)])
		if err != nil || now.Sub(t) <= s.cfg.Guard.TrashRetention {
			continue
		}
		if err := s.base.RemoveAll(filepath.Join(trashDir, name)); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		if err := s.syncDir(s.base, trashDir); err != nil {
			return err
		}
		return s.refreshTotal(true)
	}
	return nil
}

// Restore brings a trashed file (or empty directory) back to the path it had.
// It refuses to overwrite: if that path exists, the error wraps fs.ErrExist.
// Restore is an operator action: the guard's commands, confirmations and quotas
// do not apply, but the path is checked again and the restore is journaled.
func (s *Store) Restore(trashID string) (string, error) {
	if !trashIDPattern.MatchString(trashID) {
		return "", fmt.Errorf("memory: restore: %q is not a trash id (see the trash list, ids look like 20250102T150405.000000000Z-0a1b2c3d)", trashID)
	}
	var restored string
	err := s.mutate(func() (*JournalEntry, error) {
		e, err := s.readTrashMeta(trashID)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("trash entry %s not found (purged after %s, or already restored)", trashID, formatDuration(s.cfg.Guard.TrashRetention))
		}
		if err != nil {
			return nil, err
		}
		p, err := parsePath("path", e.Path)
		if err != nil {
			return nil, fmt.Errorf("trash entry %s has an invalid path: %w", trashID, err)
		}
		if p.isRoot() {
			return nil, fmt.Errorf("trash entry %s names /memories itself", trashID)
		}
		if err := s.contained("path", p); err != nil {
			return nil, err
		}
		if _, err := s.mem.Lstat(p.osRel()); err == nil {
			return nil, fmt.Errorf("%s already exists; rename or delete it first, then restore %s again: %w", p.virt, trashID, fs.ErrExist)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		content := filepath.Join(trashDir, trashID, contentName)
		var data []byte
		if e.Kind == kindFile {
			if data, err = s.base.ReadFile(content); err != nil {
				return nil, fmt.Errorf("trash entry %s: %w", trashID, err)
			}
		} else if _, err := s.base.Lstat(content); err != nil {
			return nil, fmt.Errorf("trash entry %s: %w", trashID, err)
		}
		j := &JournalEntry{Command: CmdRestore, Path: p.virt, TrashID: trashID}
		if e.Kind == kindFile {
			j.BytesAfter = int64(len(data))
			j.SHA256After = sum(data)
		}
		if err := s.mkdirAll(p.parent()); err != nil {
			return nil, err
		}
		if err := s.beginIntent(j); err != nil {
			return nil, err
		}
		if err := s.base.Rename(content, p.baseRel()); err != nil {
			return nil, err
		}
		if err := s.syncDir(s.mem, p.parent().osRel()); err != nil {
			return nil, err
		}
		if err := s.base.RemoveAll(filepath.Join(trashDir, trashID)); err != nil {
			return nil, err
		}
		if err := s.syncDir(s.base, trashDir); err != nil {
			return nil, err
		}
		restored = p.virt
		return j, nil
	})
	if err != nil {
		var te *toolError
		if errors.As(err, &te) {
			return "", fmt.Errorf("memory: restore %s: %s", trashID, strings.TrimPrefix(te.msg, RefusedPrefix))
		}
		return "", fmt.Errorf("memory: restore %s: %w", trashID, err)
	}
	return restored, nil
}

// ---- journal ----

// JournalEntry is one line of .journal.jsonl.
type JournalEntry struct {
	// Time is marshalled as RFC 3339 with nanoseconds.
	Time    time.Time `json:"time"`
	Command string    `json:"command"`
	Path    string    `json:"path"`
	NewPath string    `json:"new_path,omitempty"`
	// BytesBefore and SHA256Before describe the file before the change (0 and "" when it did not exist).
	BytesBefore  int64  `json:"bytes_before"`
	BytesAfter   int64  `json:"bytes_after"`
	SHA256Before string `json:"sha256_before,omitempty"`
	SHA256After  string `json:"sha256_after,omitempty"`
	// TrashID names the trash entry that keeps the previous content.
	TrashID string `json:"trash_id,omitempty"`
}

// SkippedLine is a journal line that did not parse (a line torn by a crash).
type SkippedLine struct {
	Line int    `json:"line"`
	Text string `json:"text"`
	Err  string `json:"error"`
}

// JournalReport is the parsed journal and what had to be skipped.
type JournalReport struct {
	Entries []JournalEntry
	Skipped []SkippedLine
}

// appendLine appends one journal line (O_APPEND, one write, fsync). The caller holds the locks.
func (s *Store) appendLine(line []byte) error {
	f, err := s.base.OpenFile(journalName, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(append(line[:len(line):len(line)], '\n')); err != nil {
		return err
	}
	if !s.noFsync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	s.journalSize = fi.Size()
	return nil
}

// ---- intent ----
//
// A mutation changes the files first and appends its journal line after, so a
// crash between the two (or a failed write or fsync after the rename) would
// leave a change the journal never mentions, for good: nothing at the next Open
// could tell, the next change of the file would be journaled from a version
// the journal never saw, and each further crash in the same window would widen
// the gap. So every mutation first writes its complete journal line to
// .intent.json and fsyncs it (beginIntent, before its first change), appends
// that same line to the journal when it is done, and empties .intent.json
// (commitIntent). The next holder of the lock that finds a line there
// (settleIntent: at Open, at the start of every mutation, and right after a
// mutation that failed) journals it if its change is on disk (intentApplied)
// and drops it otherwise. The journal thus records every change that took
// effect, whether or not its caller got an answer.
//
// Emptying .intent.json is not fsynced: if a power loss undoes it, the line
// found is already the journal's last line (the journal was fsynced first, and
// any later mutation fsyncs its own intent over it), and settleIntent only
// clears it.

// beginIntent records e, the journal entry of the change the caller is about to
// make, in .intent.json. The caller holds the locks and has changed nothing yet
// (apart from creating missing parent directories).
func (s *Store) beginIntent(e *JournalEntry) error {
	if e.Time.IsZero() {
		e.Time = s.now().UTC()
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := s.intentFile.WriteAt(line, 0); err != nil {
		return err
	}
	if err := s.intentFile.Truncate(int64(len(line))); err != nil {
		return err
	}
	if !s.noFsync {
		if err := s.intentFile.Sync(); err != nil {
			return err
		}
	}
	s.intent = line
	return nil
}

// commitIntent journals the mutation that just succeeded: the line beginIntent
// recorded (entry is that same entry), then empties .intent.json.
func (s *Store) commitIntent(entry *JournalEntry) error {
	line := s.intent
	switch {
	case line == nil && entry == nil:
		return nil
	case line == nil:
		// Not begun (no change can have been made before this point either).
		if entry.Time.IsZero() {
			entry.Time = s.now().UTC()
		}
		var err error
		if line, err = json.Marshal(entry); err != nil {
			return err
		}
	case entry == nil:
		// Begun but reported no change: journal it only if it took effect.
		return s.settleIntent()
	}
	if err := s.appendLine(line); err != nil {
		// .intent.json still holds the line: the next mutation journals it.
		return err
	}
	return s.clearIntent()
}

func (s *Store) clearIntent() error {
	s.intent = nil
	return s.intentFile.Truncate(0)
}

// settleIntent finishes the mutation recorded in .intent.json, if any: a
// process died (or a mutation failed) between beginIntent and commitIntent.
// The line is appended to the journal when its change took effect and is not
// the journal's last line already; then .intent.json is emptied. The caller
// holds the locks.
func (s *Store) settleIntent() error {
	s.intent = nil
	fi, err := s.intentFile.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	line := make([]byte, fi.Size())
	if _, err := s.intentFile.ReadAt(line, 0); err != nil {
		return err
	}
	var e JournalEntry
	// A line that does not parse was torn while it was written, before any change.
	if json.Unmarshal(line, &e) == nil && e.Command != "" {
		// The process may have died inside its journal append: terminate a torn
		// line first, so that the comparison below and the append see whole lines.
		if err := s.repairJournal(); err != nil {
			return err
		}
		done, err := s.journalEndsWith(line)
		if err != nil {
			return err
		}
		if !done {
			applied, err := s.intentApplied(&e)
			if err != nil {
				return err
			}
			if applied {
				if err := s.appendLine(line); err != nil {
					return err
				}
				// The files changed behind this store's back: recount at the next check.
				s.journalSize = -1
			}
		}
	}
	return s.clearIntent()
}

// journalEndsWith reports whether the journal's last line is line.
func (s *Store) journalEndsWith(line []byte) (bool, error) {
	f, err := s.base.Open(journalName)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	want := append(append([]byte{'\n'}, line...), '\n')
	off := fi.Size() - int64(len(want))
	switch {
	case off == -1: // the only line
		want, off = want[1:], 0
	case off < 0:
		return false, nil
	}
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, off); err != nil {
		return false, err
	}
	return bytes.Equal(got, want), nil
}

// intentApplied reports whether the change that e describes is on disk. The
// steps of every mutation are ordered so that this is decidable: the trash
// entry (e.TrashID) is complete and durable before the file is replaced,
// renamed or (for delete) moved into it, and the replacement is one rename.
func (s *Store) intentApplied(e *JournalEntry) (bool, error) {
	p, err := parsePath("path", e.Path)
	if err != nil || p.isRoot() {
		return false, nil // not a line this store wrote
	}
	if e.TrashID != "" && e.Command != CmdRestore {
		if !trashIDPattern.MatchString(e.TrashID) {
			return false, nil
		}
		switch _, err := s.base.Lstat(filepath.Join(trashDir, e.TrashID, contentName)); {
		case notExist(err):
			return false, nil // the crash came before the trash entry was complete
		case err != nil:
			return false, err
		}
	}
	exists := func(p vpath) (bool, error) {
		_, err := s.mem.Lstat(p.osRel())
		if notExist(err) {
			return false, nil
		}
		return err == nil, err
	}
	holds := func(p vpath, sha string) (bool, error) {
		if sha == "" {
			return exists(p)
		}
		fi, err := s.mem.Lstat(p.osRel())
		if notExist(err) {
			return false, nil
		}
		if err != nil || !fi.Mode().IsRegular() {
			return false, err
		}
		b, err := s.mem.ReadFile(p.osRel())
		if notExist(err) {
			return false, nil
		}
		return err == nil && sum(b) == sha, err
	}
	switch e.Command {
	case CmdCreate, CmdStrReplace, CmdInsert, CmdRestore:
		return holds(p, e.SHA256After)
	case CmdDelete:
		there, err := exists(p)
		return !there && e.TrashID != "", err
	case CmdRename:
		to, err := parsePath("new_path", e.NewPath)
		if err != nil || to.isRoot() {
			return false, nil
		}
		if there, err := exists(p); there || err != nil {
			return false, err
		}
		return holds(to, e.SHA256After)
	}
	return false, nil
}

// repairJournal terminates a torn last line so that the next append starts on
// a line of its own; ReadJournal then skips the torn fragment.
func (s *Store) repairJournal() error {
	f, err := s.base.OpenFile(journalName, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	if _, err := f.WriteAt([]byte{'\n'}, fi.Size()); err != nil {
		return err
	}
	if s.noFsync {
		return nil
	}
	return f.Sync()
}

// ReadJournal parses the journal. Lines that do not parse (a line torn by a
// crash) are skipped and reported, never an error.
func (s *Store) ReadJournal() (JournalReport, error) {
	var r JournalReport
	b, err := s.base.ReadFile(journalName)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	for i, line := range bytes.Split(b, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e JournalEntry
		if err := json.Unmarshal(line, &e); err != nil || e.Command == "" {
			msg := "no command"
			if err != nil {
				msg = err.Error()
			}
			text := string(line)
			if len(text) > 200 {
				text = text[:200] + "…"
			}
			r.Skipped = append(r.Skipped, SkippedLine{Line: i + 1, Text: text, Err: msg})
			continue
		}
		r.Entries = append(r.Entries, e)
	}
	return r, nil
}

// Journal returns the journal's entries in order, skipping torn lines (see ReadJournal for the report).
func (s *Store) Journal() ([]JournalEntry, error) {
	r, err := s.ReadJournal()
	return r.Entries, err
}
