package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The journal: one JSON line per mutation in .journal.jsonl, appended after the change
// is durable, with .intent.json so that a crash between the change and its line still
// journals it (settleIntent); ReadJournal and Journal read it back.

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
