package adapterconfig

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The memory tool's defaults: what a zero field of MemoryConfig means to the store.
const (
	DefaultMemoryToolName       = "memory"
	DefaultMemoryMaxFileBytes   = int64(1 << 20)  // 1 MiB
	DefaultMemoryMaxTotalBytes  = int64(64 << 20) // 64 MiB
	DefaultMemoryTrashRetention = 7 * 24 * time.Hour
	// MemoryMinNameRunes is the shortest name of a file or directory the memory tool
	// targets: very short names are refused to prevent accidental mass changes.
	MemoryMinNameRunes = 2
)

// DefaultMemoryConfirmCommands are the commands that need "confirm": true when
// MemoryConfig.ConfirmCommands is nil.
var DefaultMemoryConfirmCommands = []string{"delete", "rename", "str_replace"}

// A MemoryTool is the memory tool a MemoryConfig shapes, with the defaults applied:
// its name, the commands it runs, those that need "confirm": true, and its limits.
// Package memory enforces it; its Definition is what the adapter lists, and what the
// operator's catalog and listing describe without linking the store.
type MemoryTool struct {
	Name string
	// Allowed are the commands the tool runs, in MemoryCommands order: every command
	// when the config names none, view alone when it is read-only.
	Allowed []string
	// Confirm are the commands that need "confirm": true, as the config names them
	// (DefaultMemoryConfirmCommands when it names none); a command not allowed is
	// never run, confirmed or not.
	Confirm        []string
	ReadOnly       bool
	MaxFileBytes   int64
	MaxTotalBytes  int64
	TrashRetention time.Duration
}

// NewMemoryTool applies the defaults to m. The error says a limit is negative or a
// command is not one of MemoryCommands.
func NewMemoryTool(m MemoryConfig) (MemoryTool, error) {
	t := MemoryTool{Name: m.ToolName, ReadOnly: m.ReadOnly, MaxFileBytes: m.MaxFileBytes,
		MaxTotalBytes: m.MaxTotalBytes, TrashRetention: m.TrashRetention.Duration, Confirm: m.ConfirmCommands}
	if t.Name == "" {
		t.Name = DefaultMemoryToolName
	}
	if t.MaxFileBytes < 0 || t.MaxTotalBytes < 0 || t.TrashRetention < 0 {
		return MemoryTool{}, errors.New("memory: guard limits must not be negative")
	}
	if t.MaxFileBytes == 0 {
		t.MaxFileBytes = DefaultMemoryMaxFileBytes
	}
	if t.MaxTotalBytes == 0 {
		t.MaxTotalBytes = DefaultMemoryMaxTotalBytes
	}
	if t.TrashRetention == 0 {
		t.TrashRetention = DefaultMemoryTrashRetention
	}
	if t.Confirm == nil {
		t.Confirm = slices.Clone(DefaultMemoryConfirmCommands)
	}
	for _, c := range m.AllowedCommands {
		if !slices.Contains(MemoryCommands, c) {
			return MemoryTool{}, fmt.Errorf("memory: unknown command %q in AllowedCommands (known: %s)", c, strings.Join(MemoryCommands, ", "))
		}
	}
	for _, c := range MemoryCommands {
		if t.ReadOnly && c != "view" {
			continue
		}
		if t.ReadOnly || len(m.AllowedCommands) == 0 || slices.Contains(m.AllowedCommands, c) {
			t.Allowed = append(t.Allowed, c)
		}
	}
	for _, c := range t.Confirm {
		if !slices.Contains(MemoryCommands, c) {
			return MemoryTool{}, fmt.Errorf("memory: unknown command %q in ConfirmCommands (known: %s)", c, strings.Join(MemoryCommands, ", "))
		}
	}
	return t, nil
}

// Definition is the tool's MCP definition: the Anthropic memory tool's input schema,
// its enum of allowed commands, annotations and a description that explains confirm,
// the refusals and the limits.
func (t MemoryTool) Definition() mcp.Tool {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	props := map[string]any{
		"command": map[string]any{
			"type":        "string",
			"enum":        t.Allowed,
			"description": "The memory command to run.",
		},
		"path":      str("Path of the file or directory, starting with /memories (e.g. /memories/notes.md). Used by view, create, str_replace, insert and delete."),
		"file_text": str("create: the full content of the file."),
		"old_str":   str("str_replace: the exact text to replace; it must occur exactly once in the file."),
		"new_str":   str("str_replace: the replacement text (empty deletes old_str)."),
		"insert_line": map[string]any{
			"type":        "integer",
			"minimum":     0,
			"description": "insert: insert after this line (0 = at the top).",
		},
		"insert_text": str("insert: the text to insert."),
		"view_range": map[string]any{
			"type":        "array",
			"items":       map[string]any{"type": "integer"},
			"minItems":    2,
			"maxItems":    2,
			"description": "view of a file: [start, end] line numbers, 1-based and inclusive; end -1 reads to the end.",
		},
		"old_path": str("rename: the existing path, starting with /memories."),
		"new_path": str("rename: the new path, starting with /memories; it must not exist."),
		"confirm": map[string]any{
			"type":        "boolean",
			"description": "Set to true only after the user has confirmed a destructive command (" + strings.Join(t.destructive(), ", ") + ").",
		},
	}
	readOnly := t.ReadOnly
	destructive := !readOnly
	notOpenWorld := false
	idempotent := readOnly
	return mcp.Tool{
		Name:        t.Name,
		Description: t.description(),
		InputSchema: mcp.ToolInputSchema{
			Type:          "object",
			Properties:    props,
			Required:      []string{"command"},
			PropertyOrder: []string{"command", "path", "file_text", "old_str", "new_str", "insert_line", "insert_text", "view_range", "old_path", "new_path", "confirm"},
		},
		Annotations: mcp.ToolAnnotation{
			Title:           "Memory",
			ReadOnlyHint:    &readOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  &idempotent,
			OpenWorldHint:   &notOpenWorld,
		},
	}
}

// ConfirmedCommands are the allowed commands that need "confirm": true, in
// MemoryCommands order.
func (t MemoryTool) ConfirmedCommands() []string {
	var out []string
	for _, c := range t.Allowed {
		if slices.Contains(t.Confirm, c) {
			out = append(out, c)
		}
	}
	return out
}

// OverwriteNeedsConfirm says create over an existing file needs "confirm": true: it
// does when create or str_replace does.
func (t MemoryTool) OverwriteNeedsConfirm() bool {
	return slices.Contains(t.Confirm, "create") || slices.Contains(t.Confirm, "str_replace")
}

// destructive names the calls that need confirm: true, for the description.
func (t MemoryTool) destructive() []string {
	out := t.ConfirmedCommands()
	if t.OverwriteNeedsConfirm() && slices.Contains(t.Allowed, "create") {
		out = append(out, "create over an existing file")
	}
	if len(out) == 0 {
		return []string{"none in this configuration"}
	}
	return out
}

func (t MemoryTool) description() string {
	var b strings.Builder
	b.WriteString("Persistent memory: text and markdown files under /memories that survive across conversations. ")
	b.WriteString("Check it before starting a task and record progress and learnings as you go. ")
	b.WriteString("Commands: view (a directory lists files up to 2 levels deep with sizes; a file shows numbered lines, view_range [start, end] with end -1 = to the end), ")
	b.WriteString("create (write file_text to path, creating parent directories; over an existing file it replaces the whole file), ")
	b.WriteString("str_replace (replace old_str, which must occur exactly once, by new_str), ")
	b.WriteString("insert (insert insert_text after line insert_line, 0 = top), ")
	b.WriteString("delete (move a file or an empty directory to the trash), ")
	b.WriteString("rename (move old_path to new_path; never overwrites). ")
	if t.ReadOnly {
		b.WriteString("This memory is READ-ONLY: only view is allowed. ")
	} else if len(t.Allowed) < len(MemoryCommands) {
		b.WriteString("Allowed commands here: " + strings.Join(t.Allowed, ", ") + ". ")
	}
	if !t.ReadOnly {
		b.WriteString("Destructive commands (" + strings.Join(t.destructive(), ", ") + `) are refused unless the call carries "confirm": true: `)
		b.WriteString("check with the user first, then repeat the same call with confirm: true. ")
	}
	fmt.Fprintf(&b, "Refused: paths outside /memories, '..' segments, backslashes, percent-encoding, control characters, wildcards (* ? [), "+
		"hidden names (leading dot), names shorter than %d characters, /memories itself as a target, symlinks that lead outside, "+
		"deleting a non-empty directory, files over %s, a total over %s. ", MemoryMinNameRunes, MemoryBytes(t.MaxFileBytes), MemoryBytes(t.MaxTotalBytes))
	fmt.Fprintf(&b, "Nothing is lost: replaced, renamed or deleted content is kept in a trash for %s and every change is journaled.", MemoryDuration(t.TrashRetention))
	return b.String()
}

// MemoryBytes says a memory limit as the tool's description and refusals say it: in
// MiB or KiB when it is a whole number of them.
func MemoryBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// MemoryDuration says the trash retention as the tool's description and messages say
// it: in days or hours when it is a whole number of them.
func MemoryDuration(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		if d == 24*time.Hour {
			return "1 day"
		}
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%d hours", d/time.Hour)
	default:
		return d.String()
	}
}
