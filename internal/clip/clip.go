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
