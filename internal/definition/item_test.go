package definition

import (
	"encoding/json"
	"strings"
	"testing"
)

func mustDigest(t *testing.T, k ItemKind, def json.RawMessage) string {
	t.Helper()
	d, err := k.Digest(def)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Every member a gateway serves is digested: a change of _meta, icons or execution (a
// host's UI resource, an icon it fetches, how it runs the tool) changes the item's
// digest, so in Manual mode it waits for approval.
func TestItemDigestCoversEveryServedMember(t *testing.T) {
	for _, tc := range []struct {
		kind        ItemKind
		before, now string
	}{
		{ToolKind, `{"name":"s","_meta":{"ui/resourceUri":"ui://s/a"}}`, `{"name":"s","_meta":{"ui/resourceUri":"ui://s/evil"}}`},
		{ToolKind, `{"name":"s","icons":[{"src":"https://a.example/i.svg"}]}`, `{"name":"s","icons":[{"src":"https://attacker.example/t.svg"}]}`},
		{ToolKind, `{"name":"s","execution":{"taskSupport":"forbidden"}}`, `{"name":"s","execution":{"taskSupport":"required"}}`},
		{PromptKind, `{"name":"p","_meta":{"a":1}}`, `{"name":"p","_meta":{"a":2}}`},
		{PromptKind, `{"name":"p"}`, `{"name":"p","icons":[{"src":"https://attacker.example/t.svg"}]}`},
		{ResourceKind, `{"uri":"docs://a","_meta":{"a":1}}`, `{"uri":"docs://a","_meta":{"a":2}}`},
		{ResourceTemplateKind, `{"uriTemplate":"docs://{x}","icons":[]}`, `{"uriTemplate":"docs://{x}","icons":[{"src":"x"}]}`},
		{SkillKind, `{"uri":"skill://a/SKILL.md"}`, `{"uri":"skill://a/SKILL.md","_meta":{"a":2}}`},
	} {
		if mustDigest(t, tc.kind, json.RawMessage(tc.before)) == mustDigest(t, tc.kind, json.RawMessage(tc.now)) {
			t.Errorf("%s: %s → %s kept the digest", tc.kind.Name, tc.before, tc.now)
		}
	}
}

// TestContentItemDigests: each kind's item digest covers its definition members and
// nothing else (a resource's size is ignored on purpose).
func TestContentItemDigests(t *testing.T) {
	for _, tc := range []struct {
		kind              ItemKind
		base, same, other string
	}{
		{PromptKind, `{"name":"p","arguments":[{"name":"x"}]}`, `{"arguments":[{"name":"x"}],"name":"p","x-vendor":{"a":1}}`, `{"name":"p","arguments":[{"name":"y"}]}`},
		{ResourceKind, `{"uri":"u:a","name":"a","mimeType":"text/plain"}`, `{"uri":"u:a","name":"a","mimeType":"text/plain","size":9}`, `{"uri":"u:a","name":"a","mimeType":"text/html"}`},
		{ResourceTemplateKind, `{"uriTemplate":"u:{x}","name":"a"}`, `{"name":"a","uriTemplate":"u:{x}","description":null}`, `{"uriTemplate":"u:{y}","name":"a"}`},
	} {
		base, _ := tc.kind.Digest(json.RawMessage(tc.base))
		same, _ := tc.kind.Digest(json.RawMessage(tc.same))
		other, _ := tc.kind.Digest(json.RawMessage(tc.other))
		if base != same || base == other {
			t.Errorf("%s: base %s, same %s, other %s", tc.kind.Name, base, same, other)
		}
	}
}

// Digests are what owners approve: a change of their computation would un-approve
// every approved item at an upgrade. These values were computed before the kinds moved
// to this package and must not change.
func TestDigestValuesPinned(t *testing.T) {
	for _, tc := range []struct {
		kind       ItemKind
		definition string
		want       string
	}{
		{ToolKind, `{ "inputSchema": {"type":"object"}, "name":"search", "description":"Search.", "x-vendor": 1 }`,
			"eb046e5c30d322704d51ebf94fa84cc3ecc0708085346309418e612be7b63b31"},
		{ToolKind, `{"name":"n","title":1.5}`, "f90fe149cb4926002da63c907626f8d04367e9ea6ffec644fef1e7b27ac045ee"},
		{SkillKind, `{"uri":"skill://a/SKILL.md","frontmatter":{"name":"a","description":"A"},"resources":[{"uri":"skill://a/SKILL.md","digest":"sha256:00","size":1}]}`,
			"f3dbae2a1aeb38a3e7e8e45f0106489d9ba015e8647b18769a147ab7f7b72d23"},
	} {
		if got := mustDigest(t, tc.kind, json.RawMessage(tc.definition)); got != tc.want {
			t.Errorf("%s %s: digest %s, want %s", tc.kind.Name, tc.definition, got, tc.want)
		}
	}
	items := []ItemDigest{{Kind: "tool", Name: "search", Digest: "eb04"}, {Kind: "prompt", Name: "p", Digest: "aa"}}
	if got, want := DefinitionsDigest(items), "e035c3ad67892fcd48784ca06a5621326d9eaab0a6f91ec31396e2a89d4666ca"; got != want {
		t.Errorf("DefinitionsDigest = %s, want %s", got, want)
	}
	if got, want := DefinitionsDigest(nil), "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"; got != want {
		t.Errorf("DefinitionsDigest(nil) = %s, want %s", got, want)
	}
}

// A skill's inner members are read by name too: a case variant inside its frontmatter
// or one of its resources is refused, and the error names where it stands.
func TestCheckSpellingRefusesCaseVariantsOfInnerMembers(t *testing.T) {
	for _, tc := range []struct{ definition, where string }{
		{`{"uri":"skill://a/SKILL.md","frontmatter":{"name":"a","Description":"x"}}`, `"frontmatter.Description"`},
		{`{"uri":"skill://a/SKILL.md","resources":[{"uri":"skill://a/x"},{"uri":"skill://a/y","URI":"docs://secret"}]}`, `"resources[1].URI"`},
		{`{"uri":"skill://a/SKILL.md","Frontmatter":{}}`, `"Frontmatter"`},
	} {
		err := SkillKind.CheckSpelling(json.RawMessage(tc.definition))
		if err == nil || !strings.Contains(err.Error(), tc.where) {
			t.Errorf("%s: error %v, want one naming %s", tc.definition, err, tc.where)
		}
	}
	if err := SkillKind.CheckSpelling(json.RawMessage(`{"uri":"skill://a/SKILL.md","frontmatter":{"name":"a"},"x-URI":1}`)); err != nil {
		t.Errorf("a definition without case variants was refused: %v", err)
	}
}
