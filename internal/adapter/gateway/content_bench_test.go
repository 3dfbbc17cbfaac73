package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// What checking a 64 KiB skill file against its listed digest adds to a read.
func BenchmarkListedBytes64KiB(b *testing.B) {
	text := strings.Repeat("Check the order first. ", 64<<10/23)
	sum := sha256.Sum256([]byte(text))
	want := adapterconfig.DigestPrefix + hex.EncodeToString(sum[:])
	raw, _ := json.Marshal(map[string]any{"contents": []map[string]any{{"uri": "skill://a/SKILL.md", "mimeType": "text/markdown", "text": text}}})
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := listedBytes(raw, "skill://a/SKILL.md", want); err != nil {
			b.Fatal(err)
		}
	}
}

// The pass-through's own least work on the same answer, for scale: one decoding.
func BenchmarkDecodeReadResult64KiB(b *testing.B) {
	text := strings.Repeat("Check the order first. ", 64<<10/23)
	raw, _ := json.Marshal(map[string]any{"contents": []map[string]any{{"uri": "skill://a/SKILL.md", "mimeType": "text/markdown", "text": text}}})
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		var result map[string]json.RawMessage
		if err := json.Unmarshal(raw, &result); err != nil {
			b.Fatal(err)
		}
	}
}
