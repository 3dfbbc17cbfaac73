package stdioproxy

import (
	"strings"
	"testing"
)

func TestTailBufferKeepsTheLastBytes(t *testing.T) {
	b := NewTailBuffer(8)
	for _, s := range []string{"abc", "defgh", "ijklm"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := b.String(); got != "fghijklm" {
		t.Errorf("String() = %q, want the last 8 bytes %q", got, "fghijklm")
	}
	_, _ = b.Write([]byte(strings.Repeat("z", 100)))
	if got := b.String(); got != strings.Repeat("z", 8) {
		t.Errorf("after a write longer than the limit: %q", got)
	}
}
