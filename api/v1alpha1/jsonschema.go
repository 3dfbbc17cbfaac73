package v1alpha1

import (
	"encoding/json"
	"fmt"
)

// ToolInputSchema is a JSON Schema kept byte for byte as the user wrote it, so the
// operator can pass it through to MCP clients unchanged. Only its top-level `type` is
// declared to the API server, which refuses any value other than "object" as MCP requires.
//
// +kubebuilder:pruning:PreserveUnknownFields
type ToolInputSchema struct {
	// Type must be "object": MCP tool arguments are always a JSON object.
	// +kubebuilder:validation:Enum=object
	// +required
	Type string `json:"type"`

	// Raw is the whole schema as written, including `type`.
	Raw []byte `json:"-"`
}

// UnmarshalJSON keeps the raw bytes so that the schema is served exactly as written.
func (s *ToolInputSchema) UnmarshalJSON(data []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("inputSchema must be a JSON object: %w", err)
	}
	s.Type = head.Type
	s.Raw = append(s.Raw[:0], data...)
	return nil
}

// MarshalJSON returns the schema as written.
func (s ToolInputSchema) MarshalJSON() ([]byte, error) {
	if len(s.Raw) == 0 {
		return json.Marshal(map[string]string{"type": s.Type})
	}
	return s.Raw, nil
}
