// Package clip shortens untrusted text (names and messages from remotes, values a tenant
// wrote) before it is quoted in an error, a condition or a log line. It is a leaf: the
// contract (adapterconfig) and the MCP client both use it without importing each other.
package clip

import (
	"strings"
	"unicode/utf8"
)

// Line keeps s to one line of at most limit bytes, cut on a rune boundary; "…" marks a
// cut.
func Line(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Bytes keeps s to at most limit bytes, line breaks and all, cut on a rune boundary
// with "…" in the last bytes; for text kept as written (a status, a change's old and new
// text).
func Bytes(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:max(limit-len("…"), 0)], "") + "…"
}

// Characters keeps s to at most n characters (runes), "…" the last of them, for formats
// that count characters rather than bytes (server.json).
func Characters(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:max(n-1, 0)]) + "…"
}
