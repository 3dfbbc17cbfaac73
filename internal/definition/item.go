package definition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

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
	return k.CheckMemberSpelling(members)
}

// CheckMemberSpelling is CheckSpelling of a definition already split into its members
// (by their exact names), for a reader that has split it.
func (k ItemKind) CheckMemberSpelling(members map[string]json.RawMessage) error {
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
	return k.DigestOf(def), nil
}

// DigestOf is Digest of a definition already decoded: an object made by Decode, or of
// values Decode makes, for a reader that holds a definition as values rather than
// bytes.
func (k ItemKind) DigestOf(def map[string]any) string { return Sum(k.kept(def)) }

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
		if Sum(defA[m]) != Sum(defB[m]) {
			differ = append(differ, m)
		}
	}
	return differ, nil
}

func (k ItemKind) definitionObject(definition json.RawMessage) (map[string]any, error) {
	v, _ := Decode(definition)
	def, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the definition of a %s is not a JSON object", k.Name)
	}
	return def, nil
}

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
	return Encode(k.kept(def)), nil
}

// memberDigestLength is how many hex digits of a member's digest are kept: enough to
// tell which member of a changed item changed (the item digest is the whole one).
const memberDigestLength = 16

// MemberDigests maps each member of k that is present in definition (a list entry as
// sent) to the first 16 hex digits of the sha256 of its canonical JSON; nil when
// definition is not a JSON object.
func (k ItemKind) MemberDigests(definition json.RawMessage) map[string]string {
	return k.mapSentMembers(definition, memberDigest)
}

// MemberDigestsOf is MemberDigests of a definition already decoded (see DigestOf).
func (k ItemKind) MemberDigestsOf(def map[string]any) map[string]string {
	return k.mapMembers(def, memberDigest)
}

// MemberTexts maps each member of k that is present in definition to its text: a
// string member as is, any other as compact canonical JSON; nil when definition is not
// a JSON object. It is for showing a change to a human, who clips it.
func (k ItemKind) MemberTexts(definition json.RawMessage) map[string]string {
	return k.mapSentMembers(definition, memberText)
}

// MemberTextsOf is MemberTexts of a definition already decoded (see DigestOf).
func (k ItemKind) MemberTextsOf(def map[string]any) map[string]string {
	return k.mapMembers(def, memberText)
}

func memberDigest(v any) string { return Sum(v)[:memberDigestLength] }

func memberText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return string(Encode(v))
}

// mapSentMembers is mapMembers of a definition as sent; nil when it is not a JSON
// object.
func (k ItemKind) mapSentMembers(definition json.RawMessage, of func(any) string) map[string]string {
	def, err := k.definitionObject(definition)
	if err != nil {
		return nil
	}
	return k.mapMembers(def, of)
}

// mapMembers maps each member of k that is present in def to what of says of its value.
func (k ItemKind) mapMembers(def map[string]any, of func(any) string) map[string]string {
	members := k.kept(def)
	out := make(map[string]string, len(members))
	for member, v := range members {
		out[member] = of(v)
	}
	return out
}
