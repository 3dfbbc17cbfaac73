package mcpclient

import (
	"sort"

	"github.com/cantus-dev/cantus-operator/internal/definition"
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
	return definition.Sum(canonicalTools(tools))
}

// canonicalTools are the tools' definitions (canonicalTool), sorted by name.
func canonicalTools(tools []Tool) []any {
	sorted := make([]Tool, len(tools))
	copy(sorted, tools)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	defs := make([]any, 0, len(sorted))
	for _, t := range sorted {
		defs = append(defs, canonicalTool(t))
	}
	return defs
}

// Digest is the tool's item digest (definition.ToolKind.Digest of its entry; of its
// name, description and inputSchema when Raw is not a JSON object).
func (t Tool) Digest() string { return definition.ToolKind.DigestOf(t.object()) }

// MemberDigests maps each member of the tool's definition (definition.ToolKind's)
// that is present to the first 16 hex digits of the sha256 of its canonical JSON.
func (t Tool) MemberDigests() map[string]string {
	return definition.ToolKind.MemberDigestsOf(t.object())
}

// MemberTexts maps each member of the tool's definition that is present to its text: a
// string member as is, any other as compact canonical JSON. It is for showing a change
// to a human, who clips it.
func (t Tool) MemberTexts() map[string]string { return definition.ToolKind.MemberTextsOf(t.object()) }

// object is the tool's definition as an object: its entry, or the object of its name,
// description and inputSchema when Raw is not a JSON object. The name and description
// go in as Go strings, not re-read from JSON, so that the digest of a tool known only
// by its fields stays what it always was.
func (t Tool) object() map[string]any {
	def, ok := canonicalTool(t).(map[string]any)
	if !ok {
		def, _ = canonicalTool(Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}).(map[string]any)
	}
	return def
}

// canonicalTool is the tool's definition as definition.Decode makes it: its entry
// (Raw), or when Raw is no JSON an object of its name, description and inputSchema.
func canonicalTool(t Tool) any {
	if v, ok := definition.Decode(t.Raw); ok {
		return v
	}
	def := map[string]any{"name": t.Name}
	if t.Description != "" {
		def["description"] = t.Description
	}
	if v, ok := definition.Decode(t.InputSchema); ok {
		def["inputSchema"] = v
	}
	return def
}
