package mcpclient

import "testing"

func TestRedactor(t *testing.T) {
	t.Parallel()
	r := NewRedactor(map[string]string{
		"Authorization": "Bearer s3cr3t-token",
		"X-Short":       "abc",      // too short to be a secret
		"X-Word":        "k1 k2345", // k2345 is too short a word to be one on its own
	})
	for in, want := range map[string]string{
		"echo: Bearer s3cr3t-token": "echo: [redacted]",
		"token s3cr3t-token leaked": "token [redacted] leaked",
		"abc stays":                 "abc stays",
		"k1 k2345 and k2345":        "[redacted] and k2345",
	} {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if got := (Redactor{}).Redact("Bearer s3cr3t-token"); got != "Bearer s3cr3t-token" {
		t.Errorf("the zero Redactor changed %q", got)
	}
}
