// Package definition is what a definition of a served item is and how it is digested:
// the kinds of items a server serves (tools, prompts, resources, resource templates,
// skills) with the members of their definitions, the canonical JSON a digest is taken
// of, item digests and the digest of a set of items, and the spelling check that keeps
// one definition from reading two ways.
//
// It is a leaf: the standard library only. The MCP client (which reads definitions off
// the wire), the renderer, the controller and the gateway (which digest, compare and
// serve them) all import it; it imports none of them.
package definition

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// Decode is raw as digests take it: objects as maps (whose keys encoding/json sorts
// when marshalling, at every depth) and numbers as json.Numbers (marshalled as
// written). Only the first JSON value of raw is read; ok is false when raw is blank or
// does not begin with a JSON value.
func Decode(raw json.RawMessage) (v any, ok bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// Encode is v (made by Decode, or of its values) as canonical JSON: object keys sorted
// at every depth, numbers as written, no white space.
func Encode(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		// Only values decoded from JSON go in, so this cannot happen.
		panic("definition: digest: " + err.Error())
	}
	return data
}

// Sum is the sha256 (hex) of Encode(v): the digest of a value made by Decode.
func Sum(v any) string {
	sum := sha256.Sum256(Encode(v))
	return hex.EncodeToString(sum[:])
}

// ItemDigest names one served item by kind and name, with its item digest: what an
// approval of definitions binds to.
type ItemDigest struct {
	Kind, Name, Digest string
	// Era, when set, names the protocol era of a definition the item has in that era
	// besides its main one (a tool a dual-era remote defines differently in each).
	Era string
}

// DefinitionsDigest is the digest of a set of items: the sha256 (hex) of the canonical
// JSON of their kinds, names and item digests (and eras, for the items that have one),
// sorted. The order the remote lists them in does not change it; any item added,
// removed or changed does.
func DefinitionsDigest(items []ItemDigest) string {
	sorted := slices.Clone(items)
	slices.SortFunc(sorted, func(a, b ItemDigest) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Era, b.Era), cmp.Compare(a.Digest, b.Digest))
	})
	// An item without an era is the row it always was, so that no digest of a
	// definitions set without era definitions changes.
	rows := make([]any, 0, len(sorted))
	for _, it := range sorted {
		if it.Era == "" {
			rows = append(rows, [3]string{it.Kind, it.Name, it.Digest})
			continue
		}
		rows = append(rows, [4]string{it.Kind, it.Name, it.Digest, it.Era})
	}
	return Sum(rows)
}
