package memory

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Durable writes: every change to the store's files goes through here. A file is
// written to a temporary file, fsynced, renamed into place and its directory fsynced;
// a mutation runs under the store's locks (mutate), inside the intent of its journal
// line (journal.go), with the footprint the quota counts measured again after it.

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

// lockExclusive takes s.mu, which orders this process's goroutines, then the
// cross-process lock, which orders the processes sharing the directory: every change
// to the store holds both, so they are taken together. The func it returns releases
// them in the reverse order.
func (s *Store) lockExclusive() (func(), error) {
	s.mu.Lock()
	if err := flock(s.lockFile); err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("lock %s: %w", lockName, err)
	}
	return func() {
		_ = funlock(s.lockFile)
		s.mu.Unlock()
	}, nil
}

// mutate runs fn with the store locked, after journaling what a crashed or
// failed mutation left undone (settleIntent), refreshing the total size (when
// another process changed the memories) and purging expired trash. fn records
// the journal entry of what it is about to do with beginIntent before its first
// change, and returns that entry (nil when nothing changed); mutate then appends the
// entry to the journal and measures the store's footprint again.
func (s *Store) mutate(fn func() (*JournalEntry, error)) error {
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
