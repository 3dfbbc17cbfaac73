package memory

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The benchmarks call Store.Handle directly (no MCP transport) on the local
// disk, and report ops/s.

func benchCall(b *testing.B, s *Store, a map[string]any) {
	req := mcp.CallToolRequest{}
	req.Params.Name = adapterconfig.DefaultMemoryToolName
	req.Params.Arguments = a
	res, err := s.Handle(context.Background(), req)
	if err != nil || res.IsError {
		b.Fatalf("%v: %v %+v", a["command"], err, res.Content)
	}
}

func reportOps(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkView reads a 40-line file with numbered lines.
func BenchmarkView(b *testing.B) {
	s := openStore(b, Guard{})
	benchCall(b, s, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": strings.Repeat("a line of memory about the project\n", 40)})
	a := map[string]any{"command": "view", "path": "/memories/notes.md"}
	b.ResetTimer()
	for range b.N {
		benchCall(b, s, a)
	}
	reportOps(b)
}

// BenchmarkCreate creates new 1 KiB files: temp file, fsync, rename, directory fsync, journal append with fsync.
func BenchmarkCreate(b *testing.B) {
	benchCreate(b, false)
}

// BenchmarkCreateNoFsync is BenchmarkCreate with every fsync skipped (a test-only knob), to show what fsync costs.
func BenchmarkCreateNoFsync(b *testing.B) {
	benchCreate(b, true)
}

func benchCreate(b *testing.B, noFsync bool) {
	s := openStore(b, Guard{MaxTotalBytes: 1 << 40})
	s.noFsync = noFsync
	text := strings.Repeat("x", 1023) + "\n"
	b.ResetTimer()
	for i := range b.N {
		benchCall(b, s, map[string]any{"command": "create", "path": fmt.Sprintf("/memories/dir-%03d/file-%d.md", i%100, i), "file_text": text})
	}
	reportOps(b)
}

// BenchmarkStrReplace edits one file in place (trash link + atomic replace + journal), with fsync.
func BenchmarkStrReplace(b *testing.B) {
	s := openStore(b, Guard{})
	benchCall(b, s, map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "counter=0\n" + strings.Repeat("context line\n", 40)})
	b.ResetTimer()
	for i := range b.N {
		benchCall(b, s, map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": fmt.Sprintf("counter=%d\n", i), "new_str": fmt.Sprintf("counter=%d\n", i+1), "confirm": true})
	}
	reportOps(b)
}
