package mcpclient_test

import (
	"encoding/json"
	"strings"
	"testing"

	// The tests use only the exported API: they live outside the package because
	// they start a real cantus adapter, which itself imports this package.
	"github.com/cantus-dev/cantus-operator/internal/definition"
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

// TestDigestValuePinned: the catalog digest is every import's status.catalogDigest; a
// change of its computation would change it for every import at an upgrade.
func TestDigestValuePinned(t *testing.T) {
	t.Parallel()
	a := Tool{Name: "a", Raw: json.RawMessage(`{"name":"a","description":"A","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}},"_meta":{"k":"v"}}`)}
	b := Tool{Name: "b", InputSchema: json.RawMessage(`{"type":"object"}`)}
	for _, tc := range []struct {
		tools []Tool
		want  string
	}{
		{[]Tool{a, b}, "3818de1edc2e8edab7e54fb71cc108e4f69af83c6f5e6407e85c8fee2b66c587"},
		{nil, "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"},
	} {
		if got := Digest(tc.tools); got != tc.want {
			t.Errorf("Digest(%d tools) = %s, want %s", len(tc.tools), got, tc.want)
		}
	}
}

// TestItemDigest: the digest of one served item covers the members of its kind's
// definition, whatever their formatting and key order.
func TestItemDigest(t *testing.T) {
	t.Parallel()
	const base = `{"name":"a","title":"A","description":"Adds.","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}},` +
		`"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`
	want, err := definition.ToolKind.Digest(json.RawMessage(base))
	if err != nil || len(want) != 64 {
		t.Fatalf("digest %q, %v: want sha256 hex", want, err)
	}
	for _, tc := range []struct {
		name, definition string
		same             bool
		// differ are the members DifferingMembers names against base.
		differ string
	}{
		{"unchanged", base, true, ""},
		{"keys in another order, other whitespace", `{ "annotations": {"readOnlyHint": true}, "outputSchema": {"type":"object"},
			"inputSchema": {"properties":{"x":{"maximum":1.50,"type":"number"}},"type":"object"}, "description": "Adds.", "title": "A", "name": "a" }`, true, ""},
		{"members outside the definition", `{"name":"a","title":"A","description":"Adds.","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}},` +
			`"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"x-vendor":{"k":"v"}}`, true, ""},
		{"_meta and icons", `{"name":"a","title":"A","description":"Adds.","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}},` +
			`"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"_meta":{"k":"v"},"icons":[{"src":"https://example.com/a.png"}]}`, false, "icons,_meta"},
		{"a null member is an absent one", `{"name":"a","title":"A","description":"Adds.","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}},` +
			`"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"execution":null}`, true, ""},
		{"another description", `{"name":"a","title":"A","description":"Adds two.","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}},` +
			`"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`, false, "description"},
		{"another title", `{"name":"a","title":"B","description":"Adds.","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}},` +
			`"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`, false, "title"},
		{"a number as written", `{"name":"a","title":"A","description":"Adds.","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.5}}},` +
			`"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`, false, "inputSchema"},
		{"no outputSchema", `{"name":"a","title":"A","description":"Adds.","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}},` +
			`"annotations":{"readOnlyHint":true}}`, false, "outputSchema"},
		{"another annotation", `{"name":"a","title":"A","description":"Adds.","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}},` +
			`"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}}`, false, "annotations"},
	} {
		got, err := definition.ToolKind.Digest(json.RawMessage(tc.definition))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (got == want) != tc.same {
			t.Errorf("%s: digest %s, base %s: same = %v, want %v", tc.name, got, want, got == want, tc.same)
		}
		differ, err := definition.ToolKind.DifferingMembers(json.RawMessage(base), json.RawMessage(tc.definition))
		if err != nil || strings.Join(differ, ",") != tc.differ {
			t.Errorf("%s: differing members %v (%v), want %q", tc.name, differ, err, tc.differ)
		}
		if tool := (Tool{Name: "a", Raw: json.RawMessage(tc.definition)}); tool.Digest() != got {
			t.Errorf("%s: Tool.Digest %s differs from definition.ToolKind.Digest %s", tc.name, tool.Digest(), got)
		}
	}
	// Another kind with other members reuses the same digest.
	p1, _ := definition.PromptKind.Digest(json.RawMessage(`{"name":"p","arguments":[{"name":"x","required":true}]}`))
	p2, _ := definition.PromptKind.Digest(json.RawMessage(`{"arguments":[{"required":true,"name":"x"}],"name":"p"}`))
	if p1 != p2 || p1 == "" {
		t.Errorf("prompt digests %q and %q, want equal", p1, p2)
	}
	// Without Raw, name, description and inputSchema make the definition.
	bare := Tool{Name: "b", Description: "B", InputSchema: json.RawMessage(`{ "type": "object" }`)}
	if entry := (Tool{Name: "b", Raw: json.RawMessage(`{"inputSchema":{"type":"object"},"description":"B","name":"b"}`)}); bare.Digest() != entry.Digest() {
		t.Errorf("a Tool without Raw digests differently from its entry")
	}
	for _, bad := range []string{``, `[]`, `"a"`, `{"name":`} {
		if _, err := definition.ToolKind.Digest(json.RawMessage(bad)); err == nil {
			t.Errorf("ToolKind.Digest(%q) succeeded, want an error", bad)
		}
		if _, err := definition.ToolKind.DifferingMembers(json.RawMessage(base), json.RawMessage(bad)); err == nil {
			t.Errorf("ToolKind.DifferingMembers(base, %q) succeeded, want an error", bad)
		}
	}
}
