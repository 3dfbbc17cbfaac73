// Package memory is the engine of the memory skill: the Anthropic memory tool
// (view, create, str_replace, insert, delete, rename over a virtual /memories
// directory) on a local directory, guarded so that an agent cannot lose data.
//
// On-disk layout under Config.Root:
//
//	memories/            the files the agent sees as /memories/...
//	.trash/<id>/content  the previous content of a deleted, overwritten, edited or renamed file
//	.trash/<id>/meta.json  {id, path, new_path, command, kind, time, bytes, sha256}
//	.journal.jsonl       one JSON line per mutation (append-only, fsynced)
//	.intent.json         the journal line of the mutation in progress (empty between mutations)
//	.lock                advisory lock file (flock) serialising writers across processes
//
// Every write goes to a temporary file in the target's directory, is fsynced,
// renamed into place, and the directory is fsynced. The previous content of a
// file is kept in the trash (a hard link when the filesystem allows it, a copy
// otherwise) before it is replaced, and every mutation appends one line to the
// journal after it is durable. The line is recorded in .intent.json before the
// first change, so that a mutation a crash interrupts after its change but
// before its journal append is journaled by the next Open (or the next mutation
// of another process): the journal records every change that took effect.
//
// A memory directory has one writer process at a time in normal operation (one
// replica), but the lock file keeps an operator's `adapter memory restore`
// running beside the server safe.
package memory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Commands of the Anthropic memory tool.
const (
	CmdView       = "view"
	CmdCreate     = "create"
	CmdStrReplace = "str_replace"
	CmdInsert     = "insert"
	CmdDelete     = "delete"
	CmdRename     = "rename"
)

// CmdRestore is the journal command of Store.Restore (an operator action, not a tool command).
const CmdRestore = "restore"

// Markers that begin every tool error text.
const (
	// RefusedPrefix begins the text of a call the guard refused; the rest says how to fix the call.
	RefusedPrefix = "memory_refused: "
	// ErrorPrefix begins the text of a call that was allowed but failed (no match, missing file, ...).
	ErrorPrefix = "memory_error: "
)

// VirtualRoot is the directory the agent sees its memory files under. The defaults of
// the tool's name and limits are the contract's (adapterconfig.DefaultMemoryToolName,
// …): the operator describes the tool from them without linking the store.
const VirtualRoot = "/memories"

// Names inside Config.Root.
const (
	memoriesDir = "memories"
	trashDir    = ".trash"
	journalName = ".journal.jsonl"
	lockName    = ".lock"
	intentName  = ".intent.json"
	tmpPrefix   = ".memtmp-"
	contentName = "content"
	metaName    = "meta.json"
)

// AllCommands lists the memory tool's commands in their documented order.
var AllCommands = []string{CmdView, CmdCreate, CmdStrReplace, CmdInsert, CmdDelete, CmdRename}

// Guard is the policy that stands between the agent and the files.
type Guard struct {
	// AllowedCommands is a subset of AllCommands; empty means all.
	AllowedCommands []string
	// ConfirmCommands need "confirm": true in the call. nil means adapterconfig.DefaultMemoryConfirmCommands;
	// a non-nil empty slice means no command needs confirmation. create over an existing
	// file (an overwrite) needs confirmation when create or str_replace is listed.
	ConfirmCommands []string
	// ReadOnly allows view only.
	ReadOnly bool
	// MaxFileBytes caps the size of one file (default 1 MiB).
	MaxFileBytes int64
	// MaxTotalBytes caps everything the store keeps for the agent (default 64 MiB): the
	// files, the trash (until it expires), the journal, and entryOverhead for each file,
	// directory and trash entry, so that neither overwrite loops nor empty files or
	// directories can fill the volume.
	MaxTotalBytes int64
	// TrashRetention is how long trashed content is kept (default 7 days). Older entries are
	// purged lazily: when the store opens and, at most once a minute, before a mutation.
	TrashRetention time.Duration
}

// Config configures a Store.
type Config struct {
	// Root is the directory that holds memories/, .trash/ and .journal.jsonl.
	Root string
	// ToolName is the MCP tool name (default "memory").
	ToolName string
	Guard    Guard
}

// ConfigFrom turns the adapter's memory config (the contract the operator renders) into
// the store's, so that the adapter, `adapter memory` and the catalog open or describe the
// same store.
func ConfigFrom(m *adapterconfig.MemoryConfig) Config {
	return Config{
		Root:     m.Root,
		ToolName: m.ToolName,
		Guard: Guard{
			AllowedCommands: m.AllowedCommands,
			ConfirmCommands: m.ConfirmCommands,
			ReadOnly:        m.ReadOnly,
			MaxFileBytes:    m.MaxFileBytes,
			MaxTotalBytes:   m.MaxTotalBytes,
			TrashRetention:  m.TrashRetention.Duration,
		},
	}
}

// Store is a guarded memory directory. Its methods are safe for concurrent use:
// mutations are serialised (a mutex, plus a lock file across processes); reads
// take no lock, since every write replaces a file atomically.
type Store struct {
	cfg Config
	// tool is the tool cfg shapes; allowed and confirm hold its commands.
	tool     adapterconfig.MemoryTool
	allowed  map[string]bool
	confirm  map[string]bool
	root     string // absolute Config.Root
	memReal  string // Root/memories with symlinks in Root resolved
	base     *os.Root
	mem      *os.Root
	lockFile *os.File
	// intentFile is .intent.json, written under the locks (see beginIntent).
	intentFile *os.File

	mu          sync.Mutex
	intent      []byte // the line this store recorded in .intent.json, nil when none
	total       int64  // bytes of regular files under memories/, plus entryOverhead per file and directory
	trashBytes  int64  // bytes kept in .trash/, plus entryOverhead per entry
	journalSize int64  // journal size after the last mutation this store saw
	lastPurge   time.Time

	// Knobs for tests and benchmarks.
	noFsync    bool
	now        func() time.Time
	purgeEvery time.Duration
}

// Open opens (and creates as needed) the memory directory at cfg.Root.
// newGuard applies the config's defaults and builds the guard part of a Store, without
// touching any file.
func newGuard(cfg Config) (*Store, error) {
	tool, err := adapterconfig.NewMemoryTool(cfg.contract())
	if err != nil {
		return nil, err
	}
	cfg.ToolName = tool.Name
	cfg.Guard.MaxFileBytes, cfg.Guard.MaxTotalBytes, cfg.Guard.TrashRetention = tool.MaxFileBytes, tool.MaxTotalBytes, tool.TrashRetention
	cfg.Guard.ConfirmCommands = tool.Confirm
	s := &Store{
		cfg:        cfg,
		tool:       tool,
		allowed:    map[string]bool{},
		confirm:    map[string]bool{},
		now:        time.Now,
		purgeEvery: time.Minute,
	}
	for _, c := range tool.Allowed {
		s.allowed[c] = true
	}
	for _, c := range tool.Confirm {
		s.confirm[c] = true
	}
	return s, nil
}

// contract is cfg as the adapter's config (the contract) says it: the tool it shapes
// is the contract's, so that the adapter and the operator describe it alike.
func (cfg Config) contract() adapterconfig.MemoryConfig {
	g := cfg.Guard
	return adapterconfig.MemoryConfig{Root: cfg.Root, ToolName: cfg.ToolName, AllowedCommands: g.AllowedCommands,
		ConfirmCommands: g.ConfirmCommands, ReadOnly: g.ReadOnly, MaxFileBytes: g.MaxFileBytes, MaxTotalBytes: g.MaxTotalBytes,
		TrashRetention: adapterconfig.Duration{Duration: g.TrashRetention}}
}

// Open prepares the store's folder under cfg.Root (the memories and the trash, the lock
// and intent files) and returns the store; the caller closes it.
func Open(cfg Config) (*Store, error) {
	if cfg.Root == "" {
		return nil, errors.New("memory: Config.Root is empty")
	}
	s, err := newGuard(cfg)
	if err != nil {
		return nil, err
	}
	cfg = s.cfg

	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	s.root = root
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	for _, d := range []string{memoriesDir, trashDir} {
		p := filepath.Join(root, d)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(p, 0o700); err != nil {
				return nil, fmt.Errorf("memory: %w", err)
			}
		case err != nil:
			return nil, fmt.Errorf("memory: %w", err)
		case !fi.IsDir():
			return nil, fmt.Errorf("memory: %s must be a directory (not a file or a symlink)", p)
		}
	}
	if s.memReal, err = filepath.EvalSymlinks(filepath.Join(root, memoriesDir)); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	if s.base, err = os.OpenRoot(root); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	if s.mem, err = s.base.OpenRoot(memoriesDir); err != nil {
		s.base.Close()
		return nil, fmt.Errorf("memory: %w", err)
	}
	if s.lockFile, err = s.base.OpenFile(lockName, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		s.Close()
		return nil, fmt.Errorf("memory: %w", err)
	}
	if s.intentFile, err = s.base.OpenFile(intentName, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		s.Close()
		return nil, fmt.Errorf("memory: %w", err)
	}
	if err := s.recover(); err != nil {
		s.Close()
		return nil, fmt.Errorf("memory: %w", err)
	}
	return s, nil
}

// recover runs at Open under the lock: it removes temporary files a crash left
// behind, terminates a torn journal line, journals the mutation a crash
// interrupted after its change (settleIntent), measures the memories and purges
// the trash.
func (s *Store) recover() error {
	unlock, err := s.lockExclusive()
	if err != nil {
		return err
	}
	defer unlock()
	// Temporary files only live under memories/: trash entries are written in
	// new directories, and an entry a crash left incomplete is not listed and is
	// purged with the others.
	var tmps []string
	_ = fs.WalkDir(s.mem.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), tmpPrefix) {
			tmps = append(tmps, p)
		}
		return nil
	})
	for _, p := range tmps {
		if err := s.mem.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := s.repairJournal(); err != nil {
		return err
	}
	if err := s.settleIntent(); err != nil {
		return err
	}
	// .intent.json must survive a power loss once it holds a line.
	if err := s.syncDir(s.base, "."); err != nil {
		return err
	}
	if err := s.refreshTotal(true); err != nil {
		return err
	}
	return s.purgeTrash()
}

// Close releases the store's file handles.
func (s *Store) Close() error {
	var errs []error
	if s.lockFile != nil {
		errs = append(errs, s.lockFile.Close())
	}
	if s.intentFile != nil {
		errs = append(errs, s.intentFile.Close())
	}
	if s.mem != nil {
		errs = append(errs, s.mem.Close())
	}
	if s.base != nil {
		errs = append(errs, s.base.Close())
	}
	return errors.Join(errs...)
}

// Root returns the absolute directory the store works in.
func (s *Store) Root() string { return s.root }

// ToolName returns the configured MCP tool name.
func (s *Store) ToolName() string { return s.cfg.ToolName }

// allowedList returns the allowed commands in documented order.
func (s *Store) allowedList() []string { return s.tool.Allowed }

// Tool returns the MCP tool definition, shaped by the guard.
func (s *Store) Tool() mcp.Tool { return s.tool.Definition() }

// Handle is the MCP tool handler. Tool failures are results with isError set
// and a nil Go error; their text begins with RefusedPrefix or ErrorPrefix.
func (s *Store) Handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := ctx.Err(); err != nil {
		return mcp.NewToolResultError(ErrorPrefix + "the call was cancelled: " + err.Error()), nil
	}
	var a args
	if err := req.BindArguments(&a); err != nil {
		return mcp.NewToolResultError(ErrorPrefix + "invalid arguments: " + err.Error() +
			"; send an object with command (string), path (string), file_text, old_str, new_str, insert_text (strings), insert_line (integer), view_range ([integer, integer]), old_path, new_path (strings), confirm (boolean)"), nil
	}
	text, err := s.exec(a)
	if err != nil {
		var te *toolError
		if errors.As(err, &te) {
			return mcp.NewToolResultError(te.msg), nil
		}
		return mcp.NewToolResultError(ErrorPrefix + a.Command + " failed: " + err.Error()), nil
	}
	return mcp.NewToolResultText(text), nil
}

// args are the memory tool's call arguments. Pointers tell "absent" from "empty".
type args struct {
	Command    string  `json:"command"`
	Path       string  `json:"path"`
	FileText   *string `json:"file_text"`
	OldStr     *string `json:"old_str"`
	NewStr     *string `json:"new_str"`
	InsertLine *int    `json:"insert_line"`
	InsertText *string `json:"insert_text"`
	ViewRange  []int   `json:"view_range"`
	OldPath    string  `json:"old_path"`
	NewPath    string  `json:"new_path"`
	Confirm    bool    `json:"confirm"`
}

func (s *Store) exec(a args) (string, error) {
	if a.Command == "" {
		return "", failf("command is missing; use one of: %s", strings.Join(s.allowedList(), ", "))
	}
	if !slices.Contains(AllCommands, a.Command) {
		return "", failf("unknown command %q; use one of: %s", a.Command, strings.Join(s.allowedList(), ", "))
	}
	if s.cfg.Guard.ReadOnly && a.Command != CmdView {
		return "", refusef("this memory is read-only: only view is allowed and %s was refused; nothing was changed. Tell the user that the memory cannot be modified here", a.Command)
	}
	if !s.allowed[a.Command] {
		return "", refusef("command %s is not allowed on this memory; allowed commands: %s", a.Command, strings.Join(s.allowedList(), ", "))
	}
	switch a.Command {
	case CmdView:
		return s.view(a)
	case CmdRename:
		return s.rename(a)
	}
	// The other commands change the one file or directory at path: its checks are
	// made here, once, before the command looks at its other arguments.
	p, err := parseTarget("path", a.Command, a.Path)
	if err != nil {
		return "", err
	}
	switch a.Command {
	case CmdCreate:
		return s.create(p, a)
	case CmdStrReplace:
		return s.strReplace(p, a)
	case CmdInsert:
		return s.insert(p, a)
	default:
		return s.delete(p, a)
	}
}

// toolError is an error whose text is shown to the agent as is.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func refusef(format string, a ...any) error {
	return &toolError{RefusedPrefix + fmt.Sprintf(format, a...)}
}

func failf(format string, a ...any) error {
	return &toolError{ErrorPrefix + fmt.Sprintf(format, a...)}
}
