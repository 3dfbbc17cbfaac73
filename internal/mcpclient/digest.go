package mcpclient

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
)

// Digest is the sha256 (hex) of the canonical JSON of the tool definitions: the tools
// sorted by name, each tools/list entry (Raw; or name, description and inputSchema
// when Raw is empty) with its object keys sorted at every depth and numbers kept as
// written. Formatting, key order and tool order do not change it; any change to a
// definition does.
func Digest(tools []Tool) string {
	sorted := make([]Tool, len(tools))
	copy(sorted, tools)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	defs := make([]any, 0, len(sorted))
	for _, t := range sorted {
		defs = append(defs, canonicalTool(t))
	}
	data, err := json.Marshal(defs)
	if err != nil {
		// Only values decoded from JSON go in, so this cannot happen.
		panic("mcpclient: digest: " + err.Error())
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
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
