package memory

import (
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// diskBytes adds up the bytes of every regular file under root: what the store really
// keeps on the volume.
func diskBytes(t *testing.T, root string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// Overwriting one file in a loop keeps each old version in the trash; the trash counts,
// so the loop is refused before the volume holds more than the limit.
func TestOverwriteLoopsCannotGrowTheStorePastItsLimit(t *testing.T) {
	const limit = 300 << 10
	h := newHarness(t, Guard{MaxTotalBytes: limit})
	content := strings.Repeat("x", 10<<10)
	refused := ""
	for i := range 6000 {
		text, isError := h.call(map[string]any{"command": "create", "path": "/memories/loop.md", "file_text": content + string(rune('a'+i%26)), "confirm": true})
		if isError {
			refused = text
			break
		}
	}
	if !strings.HasPrefix(refused, "memory_refused: the memory would keep") || !strings.Contains(refused, "bytes of trash kept for restore") {
		t.Fatalf("the loop was never refused, or not clearly: %q", refused)
	}
	if got := diskBytes(t, h.s.cfg.Root); got > limit {
		t.Fatalf("the store keeps %d bytes on disk, over its %d byte limit", got, limit)
	}
}

// Empty files and directories cost an entry each, so they cannot be made for free.
func TestEmptyFilesAndDirectoriesCount(t *testing.T) {
	h := newHarness(t, Guard{MaxTotalBytes: 16 << 10})
	refusedAt := -1
	for i := range 1000 {
		text, isError := h.call(map[string]any{"command": "create", "path": "/memories/d" + strconv.Itoa(i) + "/empty.md", "file_text": ""})
		if isError {
			if !strings.HasPrefix(text, "memory_refused: the memory would keep") {
				t.Fatalf("refused with %q", text)
			}
			refusedAt = i
			break
		}
	}
	if refusedAt < 0 || refusedAt > 20 {
		t.Fatalf("empty files in new directories refused after %d, want within the first 20 under 16 KiB", refusedAt)
	}
}

// Paths nest at most maxPathDepth levels under /memories.
func TestDeepPathsAreRefused(t *testing.T) {
	h := newHarness(t, Guard{})
	deep := "/memories/" + strings.Repeat("d/", maxPathDepth) + "f.md"
	text, isError := h.call(map[string]any{"command": "create", "path": deep, "file_text": "x"})
	if !isError || !strings.Contains(text, "levels deep under /memories; the limit is 16") {
		t.Fatalf("create at depth %d = %q", maxPathDepth+1, text)
	}
	ok := "/memories/" + strings.Repeat("d/", maxPathDepth-1) + "f.md"
	if text, isError := h.call(map[string]any{"command": "create", "path": ok, "file_text": "x"}); isError {
		t.Fatalf("create at depth %d refused: %q", maxPathDepth, text)
	}
}
