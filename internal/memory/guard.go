package memory

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// vpath is a validated virtual path.
type vpath struct {
	virt string // canonical: "/memories" or "/memories/a/b"
	rel  string // slash-separated, relative to memories/; "" for the root
}

// osRel is the path to hand to an os.Root opened at memories/.
func (p vpath) osRel() string {
	if p.rel == "" {
		return "."
	}
	return filepath.FromSlash(p.rel)
}

// baseRel is the path to hand to an os.Root opened at Config.Root.
func (p vpath) baseRel() string {
	return filepath.Join(memoriesDir, filepath.FromSlash(p.rel))
}

func (p vpath) parent() vpath {
	i := strings.LastIndexByte(p.rel, '/')
	if i < 0 {
		return vpath{virt: VirtualRoot}
	}
	return vpath{virt: VirtualRoot + "/" + p.rel[:i], rel: p.rel[:i]}
}

func (p vpath) name() string {
	return p.rel[strings.LastIndexByte(p.rel, '/')+1:]
}

func (p vpath) isRoot() bool { return p.rel == "" }

// within reports whether p is q or below q.
func (p vpath) within(q vpath) bool {
	return q.rel == "" || p.rel == q.rel || strings.HasPrefix(p.rel, q.rel+"/")
}

var percentEncoded = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)

const (
	maxPathBytes    = 1024
	maxSegmentBytes = 255
	// maxPathDepth bounds nesting under /memories: deep trees cost walks and inodes and
	// help no agent.
	maxPathDepth = 16
)

// parsePath checks the syntax of a path argument. field names the argument in messages.
// It refuses, in this order: empty, control characters (NUL included), backslashes,
// percent-encoding, wildcards, '.' and '..' segments, paths outside /memories, empty
// segments, hidden names and overlong names.
func parsePath(field, p string) (vpath, error) {
	if strings.TrimSpace(p) == "" {
		return vpath{}, refusef("%s is empty; give a path under /memories, e.g. /memories/notes.md", field)
	}
	if !utf8.ValidString(p) {
		return vpath{}, refusef("%s is not valid UTF-8; send a plain path such as /memories/notes.md", field)
	}
	if strings.IndexFunc(p, unicode.IsControl) >= 0 {
		return vpath{}, refusef("%s contains a NUL or another control character; send a plain path such as /memories/notes.md", field)
	}
	if strings.ContainsRune(p, '\\') {
		return vpath{}, refusef("%s %q contains a backslash; use forward slashes, e.g. /memories/project/notes.md", field, p)
	}
	if percentEncoded.MatchString(p) {
		return vpath{}, refusef("%s %q contains percent-encoding (such as %%2e, %%2f or %%25); paths are never URL-decoded, send the plain path under /memories", field, p)
	}
	if strings.ContainsAny(p, "*?[") {
		return vpath{}, refusef("%s %q contains a wildcard (*, ? or [); wildcards are not expanded, name exactly one file or directory", field, p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." {
			return vpath{}, refusef("%s %q contains a %q segment; path traversal is not allowed, use a plain path under /memories such as /memories/notes.md", field, p, seg)
		}
	}
	if p != VirtualRoot && !strings.HasPrefix(p, VirtualRoot+"/") {
		return vpath{}, refusef("%s %q is outside /memories; every path must start with /memories/ (e.g. /memories/notes.md)", field, p)
	}
	if len(p) > maxPathBytes {
		return vpath{}, refusef("%s is %d bytes long; the limit is %d, use a shorter path", field, len(p), maxPathBytes)
	}
	rel := strings.TrimPrefix(p, VirtualRoot)
	rel = strings.TrimPrefix(rel, "/")
	rel = strings.TrimSuffix(rel, "/")
	if rel == "" {
		return vpath{virt: VirtualRoot}, nil
	}
	segments := strings.Split(rel, "/")
	if len(segments) > maxPathDepth {
		return vpath{}, refusef("%s %q is %d levels deep under /memories; the limit is %d, use a flatter layout", field, p, len(segments), maxPathDepth)
	}
	for _, seg := range segments {
		switch {
		case seg == "":
			return vpath{}, refusef("%s %q has an empty segment (//); write each directory name once, e.g. /memories/project/notes.md", field, p)
		case strings.HasPrefix(seg, "."):
			return vpath{}, refusef("%s %q names a hidden entry (%q starts with a dot); hidden names are reserved for the store, pick a name without the leading dot", field, p, seg)
		case len(seg) > maxSegmentBytes:
			return vpath{}, refusef("%s %q has a name longer than %d bytes; use a shorter name", field, p, maxSegmentBytes)
		}
	}
	return vpath{virt: VirtualRoot + "/" + rel, rel: rel}, nil
}

// parseTarget parses the path a mutating command acts on and refuses the targets no
// command may act on (the root, very short names).
func parseTarget(field, command, raw string) (vpath, error) {
	p, err := parsePath(field, raw)
	if err != nil {
		return vpath{}, err
	}
	return p, checkTarget(field, command, p)
}

// checkTarget applies the rules for a path a command would change: never the
// /memories root, never a very short name.
func checkTarget(field, command string, p vpath) error {
	if p.isRoot() {
		return refusef("%s is /memories itself, which %s never targets; name a file or directory under it, e.g. /memories/notes.md", field, command)
	}
	if n := p.name(); utf8.RuneCountInString(n) < adapterconfig.MemoryMinNameRunes {
		return refusef("%s %s: the name %q is shorter than %d characters; very short targets are refused to prevent accidental mass changes, use a descriptive name such as /memories/notes.md", field, p.virt, n, adapterconfig.MemoryMinNameRunes)
	}
	return nil
}

// contained refuses a path that leaves memories/ through a symlink. It walks the
// existing components and resolves every symlink it meets with
// filepath.EvalSymlinks; the result must stay under memories/. A dangling or
// looping symlink is refused as well. All file operations also go through an
// os.Root, which refuses escapes by construction; this check exists to refuse
// early with a clear message.
func (s *Store) contained(field string, p vpath) error {
	if p.isRoot() {
		return nil
	}
	cur := s.memReal
	for _, seg := range strings.Split(p.rel, "/") {
		cur = filepath.Join(cur, seg)
		fi, err := os.Lstat(cur)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil // the rest does not exist yet
			}
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		resolved, err := filepath.EvalSymlinks(cur)
		if err != nil {
			return refusef("%s %s passes through a symlink that does not resolve (dangling or looping); symlinks are only followed when they stay inside /memories", field, p.virt)
		}
		if !isWithin(resolved, s.memReal) {
			return refusef("%s %s leads outside /memories through a symlink; links out of the memory directory are refused, use a path whose files live under /memories", field, p.virt)
		}
		cur = resolved
	}
	return nil
}

// isWithin reports whether p is dir or below it (both cleaned, absolute).
func isWithin(p, dir string) bool {
	if p == dir {
		return true
	}
	return strings.HasPrefix(p, dir+string(filepath.Separator))
}
