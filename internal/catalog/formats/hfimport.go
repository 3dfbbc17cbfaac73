package formats

import (
	"encoding/json"
	"fmt"
	"sort"
)

// FromHuggingFaceInputs goes the other way, for importing a HuggingFace Tool: its inputs
// become a JSON Schema object directly, with every field required —
//
//	{"type":"object","properties":{arg:{"type":…,"description":…}},"required":[every arg]}
//
// Every input is required on purpose: transformers.Tool has no optional input. An input marked nullable stays required but admits null
// ("type":[T,"null"]), so rendering the schema back in the huggingface format gives
// the same inputs for the mapped types. "required" is sorted; an empty description is
// left out.
//
// Types: "string", "integer", "number", "boolean", "array", "object" and "null" carry
// over as they are; "any" gives a property with no type. "image" and "audio" have no
// JSON Schema counterpart and, like an empty or unknown type or an empty input name,
// are an error; errors begin "huggingface_handshake_failed: ", named like the MCP
// handshake's failures (mcpclient.HandshakeMarker) so a caller can tell them by prefix.
func FromHuggingFaceInputs(inputs map[string]HFInput) (json.RawMessage, error) {
	names := make([]string, 0, len(inputs))
	for name := range inputs {
		names = append(names, name)
	}
	sort.Strings(names)
	props := map[string]any{}
	for _, name := range names {
		in := inputs[name]
		if name == "" {
			return nil, fmt.Errorf("huggingface_handshake_failed: an input has an empty name")
		}
		p := map[string]any{}
		switch in.Type {
		case "string", "integer", "number", "boolean", "array", "object":
			p["type"] = in.Type
			if in.Nullable {
				p["type"] = []string{in.Type, "null"}
			}
		case "null":
			p["type"] = "null"
		case "any":
		case "image", "audio":
			return nil, fmt.Errorf("huggingface_handshake_failed: input %q has type %q, which has no JSON Schema counterpart", name, in.Type)
		case "":
			return nil, fmt.Errorf("huggingface_handshake_failed: input %q has no type", name)
		default:
			return nil, fmt.Errorf("huggingface_handshake_failed: input %q has unknown type %q", name, in.Type)
		}
		if in.Description != "" {
			p["description"] = in.Description
		}
		props[name] = p
	}
	return json.Marshal(map[string]any{
		"type":       "object",
		"properties": props,
		"required":   names,
	})
}
