package mcpclient_test

import (
	"encoding/json"
	"testing"

	// The tests use only the exported API: they live outside the package because
	// they start a real cantus adapter, which itself imports this package.
	. "github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

func TestDigest(t *testing.T) {
	t.Parallel()
	tool := func(raw string) Tool {
		var head struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal([]byte(raw), &head); err != nil {
			t.Fatal(err)
		}
		return Tool{Name: head.Name, Raw: json.RawMessage(raw)}
	}
	a := tool(`{"name":"a","description":"A","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}}}`)
	b := tool(`{"name":"b","inputSchema":{"type":"object"}}`)
	base := Digest([]Tool{a, b})
	if len(base) != 64 {
		t.Fatalf("digest %q is not sha256 hex", base)
	}
	same := []struct {
		name  string
		tools []Tool
	}{
		{"tool order", []Tool{b, a}},
		{"key order and whitespace", []Tool{
			tool(`{ "inputSchema": {"properties":{"x":{"maximum":1.50,"type":"number"}},"type":"object"}, "description":"A", "name":"a" }`), b}},
	}
	for _, tc := range same {
		if got := Digest(tc.tools); got != base {
			t.Errorf("%s changed the digest", tc.name)
		}
	}
	different := []struct {
		name  string
		tools []Tool
	}{
		{"a description", []Tool{tool(`{"name":"a","description":"B","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}}}`), b}},
		{"a number as written", []Tool{tool(`{"name":"a","description":"A","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.5}}}}`), b}},
		{"an annotation", []Tool{a, tool(`{"name":"b","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)}},
		{"a tool less", []Tool{a}},
	}
	for _, tc := range different {
		if got := Digest(tc.tools); got == base {
			t.Errorf("%s did not change the digest", tc.name)
		}
	}
	// Without Raw, name, description and inputSchema make the definition.
	bare := Tool{Name: "b", InputSchema: json.RawMessage(`{ "type": "object" }`)}
	if Digest([]Tool{bare}) != Digest([]Tool{b}) {
		t.Errorf("a Tool without Raw digests differently from its entry")
	}
	if Digest(nil) != Digest([]Tool{}) {
		t.Errorf("nil and empty differ")
	}
}
