package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// nonPortableKeys lists, per skill, the schema keywords that strict MCP clients are known
// to reject: `title` (which Pydantic writes on every model and property),
// `additionalProperties: false` and `examples`. The schemas are still served unchanged; this only feeds a warning.
// Each entry reads `skill "name": /json/pointer/title`.
func nonPortableKeys(skills []cantusv1alpha1.Skill) []string {
	var found []string
	for i := range skills {
		s := &skills[i]
		if s.InputSchema == nil || len(s.InputSchema.Raw) == 0 {
			continue
		}
		var schema any
		if err := json.Unmarshal(s.InputSchema.Raw, &schema); err != nil {
			continue
		}
		for _, ptr := range nonPortableIn(schema, "") {
			found = append(found, fmt.Sprintf("skill %q: %s", s.Name, ptr))
		}
	}
	return found
}

// Keywords whose values are maps of subschemas, arrays of subschemas, or one subschema.
// Only these positions hold schemas, so a property that happens to be named "title" is
// not mistaken for the keyword.
var (
	schemaMapKeywords   = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaArrayKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	schemaKeywords      = []string{"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems"}
)

func nonPortableIn(node any, ptr string) []string {
	obj, ok := node.(map[string]any)
	if !ok {
		return nil
	}
	var found []string
	if _, ok := obj["title"]; ok {
		found = append(found, ptr+"/title")
	}
	if _, ok := obj["examples"]; ok {
		found = append(found, ptr+"/examples")
	}
	if v, ok := obj["additionalProperties"].(bool); ok && !v {
		found = append(found, ptr+"/additionalProperties=false")
	}
	for _, kw := range schemaMapKeywords {
		children, _ := obj[kw].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(children)) {
			found = append(found, nonPortableIn(children[name], ptr+"/"+kw+"/"+escapePointer(name))...)
		}
	}
	for _, kw := range schemaArrayKeywords {
		children, _ := obj[kw].([]any)
		for i, child := range children {
			found = append(found, nonPortableIn(child, fmt.Sprintf("%s/%s/%d", ptr, kw, i))...)
		}
	}
	for _, kw := range schemaKeywords {
		if child, ok := obj[kw]; ok {
			found = append(found, nonPortableIn(child, ptr+"/"+kw)...)
		}
	}
	return found
}

// escapePointer escapes a JSON Pointer token (RFC 6901).
func escapePointer(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}
