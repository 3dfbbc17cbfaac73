package memory

import (
	"path"
	"strings"
	"testing"
	"unicode"
)

// Whatever path an agent sends, the guard either refuses it or returns a path that stays
// under /memories: clean, no traversal, no hidden or control characters, bounded depth.
func FuzzParsePathStaysUnderMemories(f *testing.F) {
	for _, seed := range []string{"/memories/notes.md", "/memories/../etc/passwd", "/memories/%2e%2e/x", "/memories//a", "/memories/.trash/x",
		"/memories/a\x00b", "/memoriesx/a", "\\memories\\a", "/memories/" + strings.Repeat("d/", 20) + "f", "/memories/é/ü.md"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		v, err := parsePath("path", p)
		if err != nil {
			return
		}
		if v.virt != VirtualRoot && !strings.HasPrefix(v.virt, VirtualRoot+"/") {
			t.Fatalf("%q parsed outside /memories: %q", p, v.virt)
		}
		if v.rel != "" && path.Clean(v.rel) != v.rel {
			t.Fatalf("%q parsed to an unclean path %q", p, v.rel)
		}
		segments := strings.Split(v.rel, "/")
		if v.rel != "" && len(segments) > maxPathDepth {
			t.Fatalf("%q parsed %d levels deep", p, len(segments))
		}
		for _, seg := range segments {
			if seg == ".." || strings.HasPrefix(seg, ".") {
				t.Fatalf("%q parsed with segment %q", p, seg)
			}
		}
		if strings.IndexFunc(v.virt, unicode.IsControl) >= 0 || strings.ContainsRune(v.virt, '\\') {
			t.Fatalf("%q parsed with a control character or backslash: %q", p, v.virt)
		}
	})
}
