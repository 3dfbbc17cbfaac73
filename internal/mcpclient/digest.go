package mcpclient

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Digest is the digest of a catalog: the sha256 (hex) of the canonical JSON of the
// tool definitions, the tools sorted by name, each tools/list entry (Raw; or name,
// description and inputSchema when Raw is empty) with its object keys sorted at every
// depth and numbers kept as written. Formatting, key order and tool order do not
// change it; any change to an entry does, _meta and icons included. It is not built
// from the tools' item digests (Tool.Digest), which leave those out: it is every
// import's status.catalogDigest, which another computation would change at an
// upgrade of the operator though no tool changed.
func Digest(tools []Tool) string {
	sorted := make([]Tool, len(tools))
	copy(sorted, tools)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	defs := make([]any, 0, len(sorted))
	for _, t := range sorted {
		defs = append(defs, canonicalTool(t))
	}
	return sha256JSON(defs)
}

// An ItemKind is a kind of item a server serves (a tool, a prompt, a resource, a
// resource template, a skill) and the members of its definition: what a client sees of
// the item and an owner approves. What is served of an approved item is exactly what
// was approved: a gateway serves an item of a Manual-mode import with its Members only
// (Served), so that a member is either digested or not served at all.
type ItemKind struct {
	Name string
	// Members are the members of a definition: digested, and the only ones served in
	// Manual approval mode. A new member of the protocol is served in Manual mode once
	// it is added here (which changes the digest of every item that has it).
	Members []string
	// Ignored are members remotes send that the digest leaves out on purpose, each for
	// the reason given where the kind is defined; like any member outside Members, they
	// are not served in Manual mode.
	Ignored []string
	// Inner maps members whose own members clients read by name (a skill's frontmatter,
	// each of its resources) to those names, for CheckSpelling.
	Inner map[string][]string
}

// ToolKind is a tool: its name, title, description, schemas and annotations, and what a
// host renders or runs of it: icons (it fetches their URLs), execution (task support)
// and _meta (where MCP Apps put the UI resource a host shows).
var ToolKind = ItemKind{Name: "tool", Members: []string{
	"name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons", "execution", "_meta",
}}

// CheckSpelling refuses a definition (a JSON object) that spells a member of k, or a
// member of one of k's Inner members, in another case ("Description", "inputſchema"):
// encoding/json decoding into a struct, and many clients, fold case when they match
// member names and take the last of the variants, while the digest and the gateway read
// exact names. Such an entry would be one definition to the digest and another to a
// client. A definition that is not an object is left to the caller.
func (k ItemKind) CheckSpelling(definition json.RawMessage) error {
	var members map[string]json.RawMessage
	if json.Unmarshal(definition, &members) != nil {
		return nil
	}
	return k.checkSpelling(members)
}

// checkSpelling is CheckSpelling of a definition's members.
func (k ItemKind) checkSpelling(members map[string]json.RawMessage) error {
	if err := caseVariant(members, slices.Concat(k.Members, k.Ignored), ""); err != nil {
		return err
	}
	for _, member := range slices.Sorted(maps.Keys(k.Inner)) {
		raw := members[member]
		var objects []map[string]json.RawMessage
		if json.Unmarshal(raw, &objects) != nil {
			var one map[string]json.RawMessage
			_ = json.Unmarshal(raw, &one)
			objects = []map[string]json.RawMessage{one}
		}
		for i, o := range objects {
			where := member
			if len(objects) > 1 || bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
				where = fmt.Sprintf("%s[%d]", member, i)
			}
			if err := caseVariant(o, k.Inner[member], where+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// caseVariant names the first member of o (in sorted order) that equals one of names
// under Unicode case folding, as encoding/json matches names, without being it.
func caseVariant(o map[string]json.RawMessage, names []string, prefix string) error {
	for _, key := range slices.Sorted(maps.Keys(o)) {
		for _, name := range names {
			if key != name && strings.EqualFold(key, name) {
				return fmt.Errorf("it carries the member %q, a case variant of the definition member %q: a client that folds case reads it as %s, the approval digest does not, so the entry is refused",
					prefix+key, prefix+name, name)
			}
		}
	}
	return nil
}

// Digest is the digest of one served item: the sha256 (hex) of the canonical JSON of
// the members of k in definition (a list entry as sent), with object keys sorted at
// every depth and numbers kept as written; a member that is null counts as absent.
// Formatting and key order do not change it; any change to one of the members does.
// The error says definition is not a JSON object.
func (k ItemKind) Digest(definition json.RawMessage) (string, error) {
	def, err := k.definitionObject(definition)
	if err != nil {
		return "", err
	}
	return k.digestOf(def), nil
}

// DifferingMembers names the members of k whose values differ between two
// definitions, in k's order, compared as Digest compares them (a null member is an
// absent one). It is the costly half of a comparison: compare digests first, and ask
// it only of items whose digests differ. The error says a definition is not a JSON
// object.
func (k ItemKind) DifferingMembers(a, b json.RawMessage) ([]string, error) {
	defA, errA := k.definitionObject(a)
	defB, errB := k.definitionObject(b)
	if errA != nil || errB != nil {
		return nil, errors.Join(errA, errB)
	}
	var differ []string
	for _, m := range k.Members {
		if sha256JSON(defA[m]) != sha256JSON(defB[m]) {
			differ = append(differ, m)
		}
	}
	return differ, nil
}

func (k ItemKind) definitionObject(definition json.RawMessage) (map[string]any, error) {
	v, _ := decodeCanonical(definition)
	def, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the definition of a %s is not a JSON object", k.Name)
	}
	return def, nil
}

func (k ItemKind) digestOf(def map[string]any) string { return sha256JSON(k.kept(def)) }

// kept are the members of def that k digests; null ones count as absent.
func (k ItemKind) kept(def map[string]any) map[string]any {
	kept := make(map[string]any, len(k.Members))
	for _, m := range k.Members {
		if v := def[m]; v != nil {
			kept[m] = v
		}
	}
	return kept
}

// Served is what a gateway serves of an approved item: the canonical JSON of exactly
// the members Digest covers, whose sha256 is the item's digest. Two definitions of one
// digest are served as the same bytes; members k does not digest are not served. The
// error says definition is not a JSON object.
func (k ItemKind) Served(definition json.RawMessage) (json.RawMessage, error) {
	def, err := k.definitionObject(definition)
	if err != nil {
		return nil, err
	}
	return canonicalJSON(k.kept(def)), nil
}

// Digest is the tool's item digest (ToolKind.Digest of its entry; of its name,
// description and inputSchema when Raw is empty).
func (t Tool) Digest() string {
	def, ok := canonicalTool(t).(map[string]any)
	if !ok {
		def, _ = canonicalTool(Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}).(map[string]any)
	}
	return ToolKind.digestOf(def)
}

func sha256JSON(v any) string {
	sum := sha256.Sum256(canonicalJSON(v))
	return hex.EncodeToString(sum[:])
}

// canonicalJSON is v (decoded by decodeCanonical) as JSON: object keys sorted at every
// depth, numbers as written, no white space.
func canonicalJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		// Only values decoded from JSON go in, so this cannot happen.
		panic("mcpclient: digest: " + err.Error())
	}
	return data
}

// canonicalTool decodes a tool definition into maps (whose keys encoding/json sorts
// when marshalling) and json.Numbers (marshalled as written).
func canonicalTool(t Tool) any {
	if v, ok := decodeCanonical(t.Raw); ok {
		return v
	}
	def := map[string]any{"name": t.Name}
	if t.Description != "" {
		def["description"] = t.Description
	}
	if v, ok := decodeCanonical(t.InputSchema); ok {
		def["inputSchema"] = v
	}
	return def
}

func decodeCanonical(raw json.RawMessage) (any, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// ItemDigest names one served item by kind and name, with its item digest: what an
// approval of definitions binds to.
type ItemDigest struct {
	Kind, Name, Digest string
}

// DefinitionsDigest is the digest of a set of items: the sha256 (hex) of the canonical
// JSON of their kinds, names and item digests, sorted. The order the remote lists them
// in does not change it; any item added, removed or changed does.
func DefinitionsDigest(items []ItemDigest) string {
	sorted := slices.Clone(items)
	slices.SortFunc(sorted, func(a, b ItemDigest) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Digest, b.Digest))
	})
	rows := make([][3]string, 0, len(sorted))
	for _, it := range sorted {
		rows = append(rows, [3]string{it.Kind, it.Name, it.Digest})
	}
	return sha256JSON(rows)
}

// memberDigestLength is how many hex digits of a member's digest are kept: enough to
// tell which member of a changed item changed (the item digest is the whole one).
const memberDigestLength = 16

// MemberDigests maps each member of the tool's definition (ToolKind's) that is present
// to the first 16 hex digits of the sha256 of its canonical JSON.
func (t Tool) MemberDigests() map[string]string { return memberDigests(t.members()) }

// MemberTexts maps each member of the tool's definition that is present to its text: a
// string member as is, any other as compact canonical JSON. It is for showing a change
// to a human, who clips it.
func (t Tool) MemberTexts() map[string]string { return memberTexts(t.members()) }

// MemberDigests is Tool.MemberDigests for an item of kind k (its list entry as sent);
// nil when definition is not a JSON object.
func (k ItemKind) MemberDigests(definition json.RawMessage) map[string]string {
	members, ok := k.members(definition)
	if !ok {
		return nil
	}
	return memberDigests(members)
}

// MemberTexts is Tool.MemberTexts for an item of kind k; nil when definition is not a
// JSON object.
func (k ItemKind) MemberTexts(definition json.RawMessage) map[string]string {
	members, ok := k.members(definition)
	if !ok {
		return nil
	}
	return memberTexts(members)
}

func (k ItemKind) members(definition json.RawMessage) (map[string]any, bool) {
	v, _ := decodeCanonical(definition)
	def, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := map[string]any{}
	for _, m := range k.Members {
		if v := def[m]; v != nil {
			out[m] = v
		}
	}
	return out, true
}

func memberDigests(members map[string]any) map[string]string {
	out := make(map[string]string, len(members))
	for member, v := range members {
		out[member] = sha256JSON(v)[:memberDigestLength]
	}
	return out
}

func memberTexts(members map[string]any) map[string]string {
	out := make(map[string]string, len(members))
	for member, v := range members {
		if s, ok := v.(string); ok {
			out[member] = s
			continue
		}
		data, _ := json.Marshal(v)
		out[member] = string(data)
	}
	return out
}

func (t Tool) members() map[string]any {
	def, ok := canonicalTool(t).(map[string]any)
	if !ok {
		def, _ = canonicalTool(Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}).(map[string]any)
	}
	out := map[string]any{}
	for _, m := range ToolKind.Members {
		if v := def[m]; v != nil {
			out[m] = v
		}
	}
	return out
}
