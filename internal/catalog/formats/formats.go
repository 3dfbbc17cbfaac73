// Package formats renders one MCP tool (a tools/list entry) in the shapes other agent
// stacks expect, so the catalog can hand a tool to an agent in its own format.
//
// Formats (see Formats):
//
//   - "mcp" (default, also ""): the tools/list entry itself.
//   - "anthropic": a Messages API tool {"name","description","input_schema"}.
//   - "openai": a Chat Completions function tool
//     {"type":"function","function":{"name","description","parameters"}}.
//   - "langchain", "huggingface", "dspy", "openhands": the tool shapes of those Python
//     agent frameworks.
//
// The first three take the input schema through unchanged: the bytes of
// Tool.InputSchema are the bytes of input_schema / parameters (a json.RawMessage, so an
// encoder may re-space it but never reorders or rewrites it).
//
// The other four are lossy: those frameworks give each argument one Python type, so each
// top-level property goes through one type mapping, the same in both directions:
//
//	JSON Schema "string"  ↔ Python str
//	JSON Schema "integer" ↔ Python int
//	JSON Schema "number"  ↔ Python float
//	JSON Schema "boolean" ↔ Python bool
//	anything else         → str / "string" (fallback)
//
// "Anything else" covers arrays, objects, the null type alone, unions of several
// types (type lists, anyOf/oneOf/allOf with more than one non-null branch), enums or
// consts whose values are of mixed types, $ref (not resolved; $defs are dropped), a
// property with no type at all, and unknown type names. Every argument that falls back
// is listed, in every lossy format, in a top-level "fallbacks" array of Fallback
// records, sorted by argument name; the array is present (possibly empty) so a reader
// can tell "nothing fell back" from "not reported".
//
// Nullability: a property that admits null ("type":["integer","null"], an anyOf/oneOf
// with a {"type":"null"} branch, "nullable":true, or null among the enum values) keeps
// its base type and is marked nullable. Whether an argument is required comes from the
// schema's "required" list.
//
// Determinism: every rendered value is either a struct (fields in declared order) or a
// map (encoding/json sorts map keys), so marshalling the same tool twice yields the
// same bytes. In the lossy formats arguments therefore appear sorted by name, not in
// the schema's order; "required" lists and "fallbacks" are sorted by name too. The
// pass-through formats keep the schema's own order since its bytes are untouched.
package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Tool is one MCP tool as listed by tools/list.
type Tool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// Format names.
const (
	FormatMCP         = "mcp"
	FormatAnthropic   = "anthropic"
	FormatOpenAI      = "openai"
	FormatLangChain   = "langchain"
	FormatHuggingFace = "huggingface"
	FormatDSPy        = "dspy"
	FormatOpenHands   = "openhands"
)

// Formats lists the format names: "mcp" (default), "anthropic", "openai", "langchain",
// "huggingface", "dspy", "openhands".
var Formats = []string{
	FormatMCP, FormatAnthropic, FormatOpenAI,
	FormatLangChain, FormatHuggingFace, FormatDSPy, FormatOpenHands,
}

// emptySchema stands in for a tool that came without an input schema: MCP and the
// Anthropic API both require one, and a tool without one takes no arguments.
var emptySchema = json.RawMessage(`{"type":"object"}`)

// Render returns the tool in the named format as a JSON-marshalable value. The empty
// format is "mcp". An unknown format is an error naming the known ones. The input
// schema must be a JSON object (or absent, which reads as {"type":"object"}).
//
// The concrete types are Tool ("mcp"), AnthropicTool, OpenAITool, LangChainTool,
// HuggingFaceTool, DSPyTool and OpenHandsTool.
func Render(t Tool, format string) (any, error) {
	if format == "" {
		format = FormatMCP
	}
	render, ok := renderers[format]
	if !ok {
		return nil, fmt.Errorf("unknown tool format %q (known formats: %s)", format, strings.Join(Formats, ", "))
	}
	if t.Name == "" {
		return nil, errors.New("tool has no name")
	}
	if isAbsent(t.InputSchema) {
		t.InputSchema = emptySchema
	}
	if _, err := decodeObject(t.InputSchema); err != nil {
		return nil, fmt.Errorf("tool %q: inputSchema: %w", t.Name, err)
	}
	if isAbsent(t.Annotations) {
		t.Annotations = nil
	} else if !json.Valid(t.Annotations) {
		return nil, fmt.Errorf("tool %q: annotations are not valid JSON", t.Name)
	}
	return render(t)
}

var renderers = map[string]func(Tool) (any, error){
	FormatMCP:         renderMCP,
	FormatAnthropic:   renderAnthropic,
	FormatOpenAI:      renderOpenAI,
	FormatLangChain:   renderLangChain,
	FormatHuggingFace: renderHuggingFace,
	FormatDSPy:        renderDSPy,
	FormatOpenHands:   renderOpenHands,
}

// isAbsent reports whether raw carries no value (nil, blank or JSON null).
func isAbsent(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) == 0 || string(s) == "null"
}

// decodeObject parses raw as exactly one JSON object, numbers kept as json.Number so
// that values re-encode as they were written.
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not valid JSON: data after the top-level value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}

// ---- schema pass-through formats ----

// renderMCP returns the tools/list entry: the tool as given, schema bytes untouched.
func renderMCP(t Tool) (any, error) { return t, nil }

// AnthropicTool is a tool of the Anthropic Messages API ("tools" of
// POST /v1/messages): a client tool is name, description and input_schema.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func renderAnthropic(t Tool) (any, error) {
	return AnthropicTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}, nil
}

// OpenAITool is an OpenAI Chat Completions function tool:
// {"type":"function","function":{"name","description","parameters"}}.
//
// The Responses API takes the same fields flattened ({"type":"function","name",
// "description","parameters"}); a caller targeting it lifts Function's fields up one
// level. The schema is passed through unchanged and "strict" is left unset: strict mode
// would need additionalProperties:false on every object and every property required,
// which is a rewrite of the schema this package does not make.
type OpenAITool struct {
	Type     string         `json:"type"`
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an OpenAITool.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

func renderOpenAI(t Tool) (any, error) {
	return OpenAITool{Type: "function", Function: OpenAIFunction{
		Name: t.Name, Description: t.Description, Parameters: t.InputSchema,
	}}, nil
}
