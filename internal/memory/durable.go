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

// mutate runs fn with the store locked, after refreshing the total size (when
// another process changed the memories) and purging expired trash. fn returns
// the journal entry of what it did (nil when nothing changed) and the change in
// total bytes.
func (s *Store) mutate(fn func() (*JournalEntry, int64, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.lockExclusive()
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.refreshTotal(false); err != nil {
		return err
	}
	if since := s.now().Sub(s.lastPurge); since >= s.purgeEvery || since < 0 {
		if err := s.purgeTrash(); err != nil {
			return err
		}
	}
	entry, delta, err := fn()
	if err != nil {
		return err
	}
	s.total += delta
	if entry != nil {
		return s.appendJournal(entry)
	}
	return nil
}

// refreshTotal recomputes the bytes under memories/ when forced or when the
// journal changed size since this store last wrote it (another process mutated).
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
	var total int64
	err = fs.WalkDir(s.mem.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() && !strings.HasPrefix(d.Name(), tmpPrefix) {
			info, err := d.Info()
			if err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.total = total
	s.journalSize = size
	return nil
}

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

// trashKeep keeps the current content of p in the trash. With move the entry
// is moved there (delete); otherwise it stays in place and the trash gets a
// hard link to it (a copy where links are not possible), so the following
// atomic replace leaves the old content in the trash only.
func (s *Store) trashKeep(p vpath, command, newPath string, kind string, data []byte, move bool) (string, error) {
	e := TrashEntry{
		ID:      s.newTrashID(),
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
		return "", err
	}
	meta, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return "", err
	}
	// The entry directory is new, so meta.json is written in place; the fsync of
	// the entry directory below makes both its names durable.
	if err := s.writeNew(s.base, filepath.Join(dir, metaName), append(meta, '\n')); err != nil {
		return "", err
	}
	content := filepath.Join(dir, contentName)
	switch {
	case move:
		if err := s.base.Rename(p.baseRel(), content); err != nil {
			return "", err
		}
		if err := s.syncDir(s.mem, p.parent().osRel()); err != nil {
			return "", err
		}
	default:
		if err := s.base.Link(p.baseRel(), content); err != nil {
			if err := s.writeNew(s.base, content, data); err != nil {
				return "", err
			}
		}
	}
	if err := s.syncDir(s.base, dir); err != nil {
		return "", err
	}
	return e.ID, s.syncDir(s.base, trashDir)
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
		return s.syncDir(s.base, trashDir)
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
	err := s.mutate(func() (*JournalEntry, int64, error) {
		e, err := s.readTrashMeta(trashID)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, fmt.Errorf("trash entry %s not found (purged after %s, or already restored)", trashID, formatDuration(s.cfg.Guard.TrashRetention))
		}
		if err != nil {
			return nil, 0, err
		}
		p, err := parsePath("path", e.Path)
		if err != nil {
			return nil, 0, fmt.Errorf("trash entry %s has an invalid path: %w", trashID, err)
		}
		if p.isRoot() {
			return nil, 0, fmt.Errorf("trash entry %s names /memories itself", trashID)
		}
		if err := s.contained("path", p); err != nil {
			return nil, 0, err
		}
		if _, err := s.mem.Lstat(p.osRel()); err == nil {
			return nil, 0, fmt.Errorf("%s already exists; rename or delete it first, then restore %s again: %w", p.virt, trashID, fs.ErrExist)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, 0, err
		}
		content := filepath.Join(trashDir, trashID, contentName)
		var data []byte
		if e.Kind == kindFile {
			if data, err = s.base.ReadFile(content); err != nil {
				return nil, 0, fmt.Errorf("trash entry %s: %w", trashID, err)
			}
		} else if _, err := s.base.Lstat(content); err != nil {
			return nil, 0, fmt.Errorf("trash entry %s: %w", trashID, err)
		}
		if err := s.mkdirAll(p.parent()); err != nil {
			return nil, 0, err
		}
		if err := s.base.Rename(content, p.baseRel()); err != nil {
			return nil, 0, err
		}
		if err := s.syncDir(s.mem, p.parent().osRel()); err != nil {
			return nil, 0, err
		}
		if err := s.base.RemoveAll(filepath.Join(trashDir, trashID)); err != nil {
			return nil, 0, err
		}
		if err := s.syncDir(s.base, trashDir); err != nil {
			return nil, 0, err
		}
		restored = p.virt
		j := &JournalEntry{Command: CmdRestore, Path: p.virt, TrashID: trashID}
		if e.Kind == kindFile {
			j.BytesAfter = int64(len(data))
			j.SHA256After = sum(data)
		}
		return j, int64(len(data)), nil
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

// appendJournal appends one line (O_APPEND, one write, fsync). The caller holds the locks.
func (s *Store) appendJournal(e *JournalEntry) error {
	if e.Time.IsZero() {
		e.Time = s.now().UTC()
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f, err := s.base.OpenFile(journalName, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
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
