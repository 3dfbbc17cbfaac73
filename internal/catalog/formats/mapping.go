package formats

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Fallback records one argument whose JSON Schema type is not in the type mapping
// (pythonTypes) and that a lossy format therefore renders as a string.
type Fallback struct {
	// Argument is the property name.
	Argument string `json:"argument"`
	// JSONType is what the schema said: the type name ("array", "object", "null", an
	// unknown name), a type list joined with "|" ("integer|string"), "anyOf", "oneOf",
	// "allOf", "$ref", "enum" (values of mixed types) or "unspecified" (no type).
	JSONType string `json:"jsonType"`
	// RenderedAs is the type the format renders it as, in the format's own vocabulary:
	// "str" for LangChain and DSPy, "string" for HuggingFace and OpenHands.
	RenderedAs string `json:"renderedAs"`
	// Reason says why in a few words.
	Reason string `json:"reason"`
}

// pythonTypes is the whole type mapping: the JSON Schema types a Python framework can
// take as they are, with their Python names. Every other type falls back to a string.
var pythonTypes = map[string]string{
	"string":  "str",
	"integer": "int",
	"number":  "float",
	"boolean": "bool",
}

// arg is one top-level property after the type mapping.
type arg struct {
	name        string
	description string
	required    bool
	nullable    bool
	// jsonType is one of the four mapped types ("string" when it fell back).
	jsonType string
	// enum holds the allowed non-null values when they all fit jsonType (nil otherwise).
	enum []any
	// mixedEnum holds enum values that could not be kept as an enum (a fallback).
	mixedEnum []any
	// def is the default value, if the schema gives one.
	def    any
	hasDef bool
	// fallback is set when the property fell back to string.
	fallback *Fallback
}

// mappedArgs is a schema reduced to what the lossy formats can express.
type mappedArgs struct {
	title                string
	additionalProperties any // a bool from the source schema, or nil
	args                 []arg
}

// mapToolSchema is mapSchema of t's input schema, its error naming the tool.
func mapToolSchema(t Tool) (mappedArgs, error) {
	ma, err := mapSchema(t.InputSchema)
	if err != nil {
		return mappedArgs{}, fmt.Errorf("tool %q: inputSchema: %w", t.Name, err)
	}
	return ma, nil
}

// mapSchema applies the type mapping to each top-level property of schema.
func mapSchema(schema json.RawMessage) (mappedArgs, error) {
	m, err := decodeObject(schema)
	if err != nil {
		return mappedArgs{}, err
	}
	var out mappedArgs
	if s, ok := m["title"].(string); ok {
		out.title = s
	}
	if b, ok := m["additionalProperties"].(bool); ok {
		out.additionalProperties = b
	}
	required := map[string]bool{}
	if r, ok := m["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return mappedArgs{}, fmt.Errorf("\"required\" is not an array")
		}
		for _, v := range list {
			s, ok := v.(string)
			if !ok {
				return mappedArgs{}, fmt.Errorf("\"required\" holds a non-string")
			}
			required[s] = true
		}
	}
	var props map[string]any
	if p, ok := m["properties"]; ok {
		if props, ok = p.(map[string]any); !ok {
			return mappedArgs{}, fmt.Errorf("\"properties\" is not an object")
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a := mapProperty(name, props[name])
		a.required = required[name]
		out.args = append(out.args, a)
	}
	return out, nil
}

// mapProperty maps one property schema.
func mapProperty(name string, p any) arg {
	a := arg{name: name, jsonType: "string"}
	s, _ := p.(map[string]any) // true/false/other schemas carry no type: unspecified
	if d, ok := s["description"].(string); ok {
		a.description = d
	}
	if d, ok := s["default"]; ok {
		a.def, a.hasDef = d, true
	}
	t, nullable, fb := classify(s, 0)
	a.nullable = nullable
	if fb != nil {
		fb.Argument = name
		a.fallback = fb
	} else {
		a.jsonType = t.typ
		a.enum = t.enum
	}
	if fb != nil && fb.JSONType == "enum" {
		a.mixedEnum = enumValues(s)
	}
	return a
}

type classified struct {
	typ  string
	enum []any
}

// classify finds the mapped type of a property schema s: the base type, whether null
// is admitted, or the reason it falls back. depth bounds the look into single-branch
// anyOf/oneOf/allOf wrappers.
func classify(s map[string]any, depth int) (classified, bool, *Fallback) {
	nullable := s["nullable"] == true
	if ref, ok := s["$ref"].(string); ok {
		return classified{}, nullable, fallback("$ref", fmt.Sprintf("$ref %s is not resolved", ref))
	}

	// Compositions: drop {"type":"null"} branches; one branch left is looked into.
	for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
		raw, ok := s[kw]
		if !ok {
			continue
		}
		if _, typed := s["type"]; typed {
			break // a type next to the composition decides; the composition only narrows it
		}
		branches, _ := raw.([]any)
		var rest []map[string]any
		for _, b := range branches {
			bm, _ := b.(map[string]any)
			if kw != "allOf" && isNullSchema(bm) {
				nullable = true
				continue
			}
			rest = append(rest, bm)
		}
		switch {
		case len(rest) == 1 && depth < 2:
			c, n, fb := classify(rest[0], depth+1)
			return c, nullable || n, fb
		case len(rest) == 0 && nullable:
			return classified{}, true, fallback("null", "the only type is null")
		default:
			return classified{}, nullable, fallback(kw, fmt.Sprintf("a union (%s) of %d schemas is not in the type mapping", kw, len(rest)))
		}
	}

	values, hasEnum := enumOf(s)
	var nonNull []any
	for _, v := range values {
		if v == nil {
			nullable = true
			continue
		}
		nonNull = append(nonNull, v)
	}

	var typ string
	switch t := s["type"].(type) {
	case string:
		if t == "null" {
			return classified{}, true, fallback("null", "the only type is null")
		}
		typ = t
	case []any:
		var names []string
		for _, v := range t {
			n, _ := v.(string)
			if n == "null" {
				nullable = true
				continue
			}
			names = append(names, n)
		}
		switch len(names) {
		case 0:
			return classified{}, true, fallback("null", "the only type is null")
		case 1:
			typ = names[0]
		default:
			sort.Strings(names)
			return classified{}, nullable, fallback(strings.Join(names, "|"), "a union of types is not in the type mapping")
		}
	case nil:
		if !hasEnum {
			return classified{}, nullable, fallback("unspecified", "the schema has no type")
		}
		typ = kindOfValues(nonNull)
		if typ == "" {
			return classified{}, nullable, fallback("enum", "enum values of mixed types")
		}
	default:
		return classified{}, nullable, fallback("unspecified", "the schema's type is not a name")
	}

	if _, mapped := pythonTypes[typ]; !mapped {
		return classified{}, nullable, fallback(typ, fmt.Sprintf("%s is not in the type mapping", typ))
	}
	if hasEnum {
		for _, v := range nonNull {
			if !valueFits(v, typ) {
				return classified{}, nullable, fallback("enum", fmt.Sprintf("enum values of mixed types (type %s)", typ))
			}
		}
		return classified{typ: typ, enum: nonNull}, nullable, nil
	}
	return classified{typ: typ}, nullable, nil
}

func fallback(jsonType, reason string) *Fallback {
	return &Fallback{JSONType: jsonType, Reason: reason}
}

func isNullSchema(s map[string]any) bool {
	t, ok := s["type"].(string)
	return ok && t == "null"
}

// enumOf returns the enum values of s (a const counts as a one-value enum).
func enumOf(s map[string]any) ([]any, bool) {
	if e, ok := s["enum"].([]any); ok {
		return e, true
	}
	if c, ok := s["const"]; ok {
		return []any{c}, true
	}
	return nil, false
}

func enumValues(s map[string]any) []any {
	v, _ := enumOf(s)
	return v
}

// kindOfValues is the one mapped type all values share ("" when none or mixed).
func kindOfValues(values []any) string {
	if len(values) == 0 {
		return ""
	}
	kind := ""
	allInt := true
	for _, v := range values {
		var k string
		switch x := v.(type) {
		case string:
			k = "string"
		case bool:
			k = "boolean"
		case json.Number:
			k = "number"
			if !isIntegerLiteral(x) {
				allInt = false
			}
		default:
			return ""
		}
		if kind != "" && kind != k {
			return ""
		}
		kind = k
	}
	if kind == "number" && allInt {
		return "integer"
	}
	return kind
}

func isIntegerLiteral(n json.Number) bool {
	return !strings.ContainsAny(string(n), ".eE")
}

// valueFits reports whether a JSON value is an instance of a mapped type.
func valueFits(v any, typ string) bool {
	switch x := v.(type) {
	case string:
		return typ == "string"
	case bool:
		return typ == "boolean"
	case json.Number:
		return typ == "number" || (typ == "integer" && isIntegerLiteral(x))
	}
	return false
}

// ---- what the lossy formats do with an arg ----

// defaultFits reports whether the default can be kept as a typed default.
func (a arg) defaultFits() bool {
	if !a.hasDef {
		return false
	}
	if a.def == nil {
		return a.nullable
	}
	// a.jsonType is "string" for a fallback: a string default still fits it.
	return valueFits(a.def, a.jsonType)
}

// describe returns the description, with the enum and default spelled out in words
// when the format has no field for them (inFields false) or they do not fit the
// rendered type.
func (a arg) describe(inFields bool) string {
	var extra []string
	switch {
	case len(a.enum) > 0 && !inFields:
		extra = append(extra, "One of: "+joinJSON(a.enum)+".")
	case len(a.mixedEnum) > 0:
		extra = append(extra, "One of: "+joinJSON(a.mixedEnum)+".")
	}
	if a.hasDef && (!inFields || !a.defaultFits()) {
		extra = append(extra, "Default: "+joinJSON([]any{a.def})+".")
	}
	parts := extra
	if a.description != "" {
		parts = append([]string{a.description}, extra...)
	}
	return strings.Join(parts, " ")
}

func joinJSON(values []any) string {
	out := make([]string, len(values))
	for i, v := range values {
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte(fmt.Sprint(v))
		}
		out[i] = string(b)
	}
	return strings.Join(out, ", ")
}

// jsonSchema is the property's JSON Schema after the mapping: a single mapped type
// (with "null" added when nullable), the description, and enum and default when they
// fit the type.
func (a arg) jsonSchema() map[string]any {
	m := map[string]any{"type": a.jsonType}
	if a.nullable {
		m["type"] = []string{a.jsonType, "null"}
	}
	if d := a.describe(true); d != "" {
		m["description"] = d
	}
	if len(a.enum) > 0 {
		enum := append([]any(nil), a.enum...)
		if a.nullable {
			enum = append(enum, nil)
		}
		m["enum"] = enum
	}
	if a.defaultFits() {
		m["default"] = a.def
	}
	return m
}

// objectSchema is the whole argument object after the mapping: properties, required
// (sorted), and the source schema's title and boolean additionalProperties. $defs are
// dropped: every $ref fell back.
func (ma mappedArgs) objectSchema() map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, a := range ma.args {
		props[a.name] = a.jsonSchema()
		if a.required {
			required = append(required, a.name)
		}
	}
	m := map[string]any{"type": "object", "properties": props, "required": required}
	if ma.title != "" {
		m["title"] = ma.title
	}
	if ma.additionalProperties != nil {
		m["additionalProperties"] = ma.additionalProperties
	}
	return m
}

// fallbacks lists the fallen-back args (sorted by name, as args are), rendered as
// renderedAs. Never nil.
func (ma mappedArgs) fallbacks(renderedAs string) []Fallback {
	out := []Fallback{}
	for _, a := range ma.args {
		if a.fallback != nil {
			f := *a.fallback
			f.RenderedAs = renderedAs
			out = append(out, f)
		}
	}
	return out
}
