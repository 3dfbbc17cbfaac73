package mcpclient

import (
	"slices"
	"strings"
)

// Redacted replaces a secret in a message.
const Redacted = "[redacted]"

// Redactor scrubs the values of the configured headers (which may be secrets) from
// text: a server may echo a token back in an error page or a JSON-RPC message. The
// zero Redactor scrubs nothing.
type Redactor struct {
	secrets []string
}

// NewRedactor scrubs each header value, and each word of one long enough to be a
// credential ("Bearer abc…" → "abc…").
func NewRedactor(headers map[string]string) Redactor {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) < 4 || seen[s] {
			return
		}
		seen[s] = true
		out = append(out, s)
	}
	for _, v := range headers {
		add(v)
		for _, f := range strings.Fields(v) {
			if len(f) >= 6 {
				add(f)
			}
		}
	}
	// Longest first, so that a whole value is replaced before its parts.
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return Redactor{secrets: out}
}

// Redact replaces every secret in s with Redacted.
func (r Redactor) Redact(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, Redacted)
	}
	return s
}
