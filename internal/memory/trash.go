package memory

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The trash: the previous content of every file a mutation deletes, overwrites, edits
// or renames is kept under .trash/<id>/ with its meta.json, listed by Trash, purged
// after the retention and brought back by Restore.

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
			return nil, fmt.Errorf("trash entry %s not found (purged after %s, or already restored)", trashID, adapterconfig.MemoryDuration(s.cfg.Guard.TrashRetention))
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
