package formats

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// testTools are the golden-file tools, by golden name.
var testTools = map[string]Tool{
	// A simple tool: a required string and an optional integer with a default.
	"simple": {
		Name:        "search_book",
		Title:       "Search books",
		Description: "Search the catalog by exact title.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "title": {"type": "string", "description": "Exact title."},
    "limit": {"type": "integer", "description": "Most hits to return.", "default": 10, "minimum": 1}
  },
  "required": ["title"]
}`),
		Annotations: json.RawMessage(`{"readOnlyHint":true}`),
	},
	// Nested objects: one object argument (which holds another) beside scalars.
	"nested": {
		Name:        "create_order",
		Description: "Place an order.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "customer": {
      "type": "object",
      "description": "Who orders.",
      "properties": {
        "name": {"type": "string"},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}, "required": ["city"]}
      },
      "required": ["name"]
    },
    "quantity": {"type": "integer", "description": "How many."},
    "express": {"type": "boolean", "description": "Ship overnight.", "default": false}
  },
  "required": ["customer", "quantity"]
}`),
	},
	// Enums: typed, untyped but uniform, integer, a const, and mixed.
	"enums": {
		Name:        "set_thermostat",
		Description: "Set the thermostat.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius", "description": "Temperature unit."},
    "level": {"type": "integer", "enum": [1, 2, 3], "description": "Fan level."},
    "format": {"enum": ["json", "text"], "description": "Reply format."},
    "room": {"const": "kitchen"},
    "mode": {"enum": ["auto", 0, true], "description": "Mode."}
  },
  "required": ["unit", "mode"]
}`),
	},
	// Arrays: of strings, of integers, of arrays, beside a number.
	"arrays": {
		Name:        "tag_items",
		Description: "Tag items.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags to apply.", "default": []},
    "ids": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
    "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
    "ratio": {"type": "number", "description": "Share to tag.", "default": 0.5}
  },
  "required": ["ids"]
}`),
	},
	// Nullable: a type list, an anyOf with null, OpenAPI nullable, and a real union.
	"nullable": {
		Name:        "update_user",
		Description: "Update a user.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "id": {"type": "string"},
    "nickname": {"type": ["string", "null"], "description": "New nickname, null to clear."},
    "age": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null},
    "email": {"type": "string", "nullable": true},
    "note": {"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "Free note."}
  },
  "required": ["id", "nickname"]
}`),
	},
	// A Pydantic v2 model_json_schema(): title, $defs with $ref properties (an object
	// and an enum), Optional[...] as anyOf with null, additionalProperties: false.
	"pydantic": {
		Name:        "find_venue",
		Description: "Find a venue.",
		InputSchema: json.RawMessage(`{
  "$defs": {
    "Address": {
      "properties": {"city": {"title": "City", "type": "string"}, "zip": {"title": "Zip", "type": "string"}},
      "required": ["city", "zip"],
      "title": "Address",
      "type": "object"
    },
    "Priority": {"enum": ["low", "high"], "title": "Priority", "type": "string"}
  },
  "additionalProperties": false,
  "properties": {
    "query": {"description": "Search text.", "title": "Query", "type": "string"},
    "address": {"$ref": "#/$defs/Address"},
    "priority": {"$ref": "#/$defs/Priority", "default": "low"},
    "billing": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": null},
    "max_results": {"default": 5, "exclusiveMinimum": 0, "title": "Max Results", "type": "integer"},
    "score": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": null, "title": "Score"}
  },
  "required": ["query", "address"],
  "title": "FindVenueArgs",
  "type": "object"
}`),
	},
}

// wantFallbacks are the arguments each test tool's lossy renderings must report.
var wantFallbacks = map[string][]string{
	"simple":   {},
	"nested":   {"customer"},
	"enums":    {"mode"},
	"arrays":   {"ids", "matrix", "tags"},
	"nullable": {"note"},
	"pydantic": {"address", "billing", "priority"},
}

var lossyFormats = []string{FormatLangChain, FormatHuggingFace, FormatDSPy, FormatOpenHands}

func marshalIndent(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return append(b, '\n')
}

func TestGolden(t *testing.T) {
	for name, tool := range testTools {
		for _, format := range Formats {
			t.Run(name+"/"+format, func(t *testing.T) {
				v, err := Render(tool, format)
				if err != nil {
					t.Fatalf("Render: %v", err)
				}
				got := marshalIndent(t, v)
				if again := marshalIndent(t, mustRender(t, tool, format)); !bytes.Equal(got, again) {
					t.Fatalf("two renderings differ:\n%s\n%s", got, again)
				}
				path := filepath.Join("testdata", name+"."+format+".json")
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./internal/catalog/formats -update)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from the rendering (run with -update to accept):\ngot:\n%s\nwant:\n%s", path, got, want)
				}
			})
		}
	}
}

func mustRender(t *testing.T, tool Tool, format string) any {
	t.Helper()
	v, err := Render(tool, format)
	if err != nil {
		t.Fatalf("Render(%s, %s): %v", tool.Name, format, err)
	}
	return v
}

// decode marshals v and decodes it generically.
func decode(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func parse(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPassthroughFormatsKeepSchemaExactly(t *testing.T) {
	for name, tool := range testTools {
		t.Run(name, func(t *testing.T) {
			// The bytes handed back are the bytes given.
			mcp := mustRender(t, tool, FormatMCP).(Tool)
			anth := mustRender(t, tool, FormatAnthropic).(AnthropicTool)
			oai := mustRender(t, tool, FormatOpenAI).(OpenAITool)
			for label, raw := range map[string]json.RawMessage{
				"mcp": mcp.InputSchema, "anthropic": anth.InputSchema, "openai": oai.Function.Parameters,
			} {
				if !bytes.Equal(raw, tool.InputSchema) {
					t.Errorf("%s: schema bytes changed", label)
				}
			}
			// And once marshalled, the schema parses to the input.
			want := parse(t, tool.InputSchema)
			for label, got := range map[string]any{
				"mcp":       decode(t, mcp)["inputSchema"],
				"anthropic": decode(t, anth)["input_schema"],
				"openai":    decode(t, oai)["function"].(map[string]any)["parameters"],
			} {
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: schema is %v, want %v", label, got, want)
				}
			}
			m := decode(t, mcp)
			if m["name"] != tool.Name || (tool.Description != "" && m["description"] != tool.Description) {
				t.Errorf("mcp entry lost name or description: %v", m)
			}
			if o := decode(t, oai); o["type"] != "function" {
				t.Errorf("openai type = %v", o["type"])
			}
		})
	}
}

func TestLossyFormatsReportExactlyTheFallenBackArguments(t *testing.T) {
	renderedAs := map[string]string{
		FormatLangChain: "str", FormatHuggingFace: "string", FormatDSPy: "str", FormatOpenHands: "string",
	}
	for name, tool := range testTools {
		for _, format := range lossyFormats {
			t.Run(name+"/"+format, func(t *testing.T) {
				m := decode(t, mustRender(t, tool, format))
				list, ok := m["fallbacks"].([]any)
				if !ok {
					t.Fatalf("no fallbacks array in %v", m)
				}
				got := []string{}
				for _, f := range list {
					fm := f.(map[string]any)
					got = append(got, fm["argument"].(string))
					if fm["renderedAs"] != renderedAs[format] {
						t.Errorf("%v: renderedAs = %v, want %s", fm["argument"], fm["renderedAs"], renderedAs[format])
					}
					if fm["jsonType"] == "" || fm["reason"] == "" {
						t.Errorf("%v: jsonType and reason must be set: %v", fm["argument"], fm)
					}
				}
				if !reflect.DeepEqual(got, wantFallbacks[name]) {
					t.Errorf("fallbacks = %v, want %v", got, wantFallbacks[name])
				}
			})
		}
	}
}

func TestLossyFormatsMapTypes(t *testing.T) {
	tool := Tool{Name: "mapped", InputSchema: json.RawMessage(`{"type":"object","properties":{
		"s":{"type":"string"},"i":{"type":"integer"},"n":{"type":"number"},"b":{"type":"boolean"},
		"o":{"type":["integer","null"]},"a":{"type":"array"}},"required":["s","i","n","b"]}`)}
	wantPy := map[string]string{"s": "str", "i": "int", "n": "float", "b": "bool", "o": "int", "a": "str"}
	wantJSON := map[string]string{"s": "string", "i": "integer", "n": "number", "b": "boolean", "o": "integer", "a": "string"}

	lc := mustRender(t, tool, FormatLangChain).(LangChainTool)
	dspy := mustRender(t, tool, FormatDSPy).(DSPyTool)
	hf := mustRender(t, tool, FormatHuggingFace).(HuggingFaceTool)
	oh := decode(t, mustRender(t, tool, FormatOpenHands))
	ohProps := oh["tool"].(map[string]any)["function"].(map[string]any)["parameters"].(map[string]any)["properties"].(map[string]any)
	for arg := range wantPy {
		if lc.Args[arg].Type != wantPy[arg] || dspy.ArgTypes[arg] != wantPy[arg] {
			t.Errorf("%s: langchain %q, dspy %q, want %q", arg, lc.Args[arg].Type, dspy.ArgTypes[arg], wantPy[arg])
		}
		if hf.Inputs[arg].Type != wantJSON[arg] {
			t.Errorf("%s: huggingface %q, want %q", arg, hf.Inputs[arg].Type, wantJSON[arg])
		}
		typ := ohProps[arg].(map[string]any)["type"]
		if arg == "o" {
			if !reflect.DeepEqual(typ, []any{"integer", "null"}) {
				t.Errorf("o: openhands type %v, want [integer null]", typ)
			}
		} else if typ != wantJSON[arg] {
			t.Errorf("%s: openhands type %v, want %s", arg, typ, wantJSON[arg])
		}
	}
	if !lc.Args["o"].Nullable || lc.Args["o"].Required || !hf.Inputs["o"].Nullable || hf.Inputs["s"].Nullable {
		t.Errorf("nullable/required not carried: langchain %+v, hf %+v / %+v", lc.Args["o"], hf.Inputs["o"], hf.Inputs["s"])
	}
}

func TestUnknownFormat(t *testing.T) {
	_, err := Render(testTools["simple"], "xml")
	if err == nil {
		t.Fatal("no error for an unknown format")
	}
	for _, f := range append([]string{`"xml"`}, Formats...) {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s", err, f)
		}
	}
	if len(Formats) != 7 || Formats[0] != FormatMCP {
		t.Errorf("Formats = %v", Formats)
	}
	v, err := Render(testTools["simple"], "")
	if _, ok := v.(Tool); err != nil || !ok {
		t.Errorf(`Render(tool, "") = %T, %v; want the mcp entry`, v, err)
	}
}

func TestBadInputs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tool   Tool
		format string
	}{
		{"no name", Tool{InputSchema: json.RawMessage(`{}`)}, FormatMCP},
		{"invalid JSON", Tool{Name: "x", InputSchema: json.RawMessage(`{"type":`)}, FormatAnthropic},
		{"not an object", Tool{Name: "x", InputSchema: json.RawMessage(`["a"]`)}, FormatOpenAI},
		{"trailing data", Tool{Name: "x", InputSchema: json.RawMessage(`{} {}`)}, FormatMCP},
		{"properties not an object", Tool{Name: "x", InputSchema: json.RawMessage(`{"properties":[]}`)}, FormatDSPy},
		{"required not strings", Tool{Name: "x", InputSchema: json.RawMessage(`{"required":[1]}`)}, FormatLangChain},
		{"invalid annotations", Tool{Name: "x", InputSchema: json.RawMessage(`{}`), Annotations: json.RawMessage(`{`)}, FormatMCP},
	} {
		if _, err := Render(tc.tool, tc.format); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	// A tool without a schema takes no arguments.
	for _, format := range Formats {
		if _, err := json.Marshal(mustRender(t, Tool{Name: "bare"}, format)); err != nil {
			t.Errorf("%s: %v", format, err)
		}
	}
	if s := mustRender(t, Tool{Name: "bare"}, FormatAnthropic).(AnthropicTool).InputSchema; string(s) != `{"type":"object"}` {
		t.Errorf("absent schema rendered as %s", s)
	}
}

func TestFromHuggingFaceInputsEveryFieldRequired(t *testing.T) {
	raw, err := FromHuggingFaceInputs(map[string]HFInput{
		"q":     {Type: "string", Description: "Query string"},
		"page":  {Type: "integer", Description: "Page.", Nullable: true},
		"items": {Type: "array"},
		"extra": {Type: "any", Description: "Anything."},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"properties":{"extra":{"description":"Anything."},"items":{"type":"array"},` +
		`"page":{"description":"Page.","type":["integer","null"]},"q":{"description":"Query string","type":"string"}},` +
		`"required":["extra","items","page","q"],"type":"object"}`
	if string(raw) != want {
		t.Errorf("schema:\n%s\nwant:\n%s", raw, want)
	}
	var s struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	var props []string
	for p := range s.Properties {
		props = append(props, p)
	}
	sort.Strings(props)
	if !reflect.DeepEqual(props, s.Required) {
		t.Errorf("required %v, want every field %v", s.Required, props)
	}
	// No inputs: an object with no properties and nothing required.
	if raw, err := FromHuggingFaceInputs(nil); err != nil || string(raw) != `{"properties":{},"required":[],"type":"object"}` {
		t.Errorf("empty inputs: %s, %v", raw, err)
	}
}

func TestFromHuggingFaceInputsRoundTrip(t *testing.T) {
	inputs := map[string]HFInput{
		"text":   {Type: "string", Description: "Text to translate."},
		"count":  {Type: "integer", Description: "How many."},
		"ratio":  {Type: "number", Description: "A share."},
		"strict": {Type: "boolean", Description: ""},
		"target": {Type: "string", Description: "Target language, if any.", Nullable: true},
	}
	raw, err := FromHuggingFaceInputs(inputs)
	if err != nil {
		t.Fatal(err)
	}
	hf := mustRender(t, Tool{Name: "translate", Description: "Translate.", InputSchema: raw}, FormatHuggingFace).(HuggingFaceTool)
	if !reflect.DeepEqual(hf.Inputs, inputs) {
		t.Errorf("round trip:\n got %+v\nwant %+v", hf.Inputs, inputs)
	}
	if len(hf.Fallbacks) != 0 || hf.OutputType != "string" {
		t.Errorf("fallbacks %v, output_type %q", hf.Fallbacks, hf.OutputType)
	}
}

func TestFromHuggingFaceInputsErrors(t *testing.T) {
	for name, in := range map[string]map[string]HFInput{
		"image":      {"pic": {Type: "image", Description: "A picture."}},
		"audio":      {"clip": {Type: "audio"}},
		"no type":    {"q": {Description: "Query."}},
		"unknown":    {"q": {Type: "str"}},
		"empty name": {"": {Type: "string"}},
	} {
		_, err := FromHuggingFaceInputs(in)
		if err == nil || !strings.HasPrefix(err.Error(), "huggingface_handshake_failed: ") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

func TestFallbackKinds(t *testing.T) {
	// Each property's jsonType in the fallback record, or "" when it maps.
	schema := `{"type":"object","properties":{
		"union":    {"type":["string","integer"]},
		"allofref": {"allOf":[{"$ref":"#/definitions/Thing"}]},
		"oneof":    {"oneOf":[{"type":"string"},{"type":"boolean"},{"type":"null"}]},
		"nullonly": {"type":"null"},
		"notype":   {"description":"Anything."},
		"trueschema": true,
		"unknown":  {"type":"file"},
		"const":    {"const":3},
		"numenum":  {"enum":[1,2.5]},
		"optlit":   {"anyOf":[{"type":"string","enum":["a","b"]},{"type":"null"}]},
		"badenum":  {"type":"integer","enum":[1,"two"]}
	}}`
	want := map[string]string{
		"union": "integer|string", "allofref": "$ref", "oneof": "oneOf", "nullonly": "null",
		"notype": "unspecified", "trueschema": "unspecified", "unknown": "file",
		"const": "", "numenum": "", "optlit": "", "badenum": "enum",
	}
	ma, err := mapSchema(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ma.args {
		got := ""
		if a.fallback != nil {
			got = a.fallback.JSONType
		}
		if got != want[a.name] {
			t.Errorf("%s: fallback jsonType %q, want %q", a.name, got, want[a.name])
		}
	}
	byName := map[string]arg{}
	for _, a := range ma.args {
		byName[a.name] = a
	}
	if a := byName["const"]; a.jsonType != "integer" || len(a.enum) != 1 {
		t.Errorf("const: %+v", a)
	}
	if a := byName["numenum"]; a.jsonType != "number" {
		t.Errorf("numenum: %+v", a)
	}
	if a := byName["optlit"]; a.jsonType != "string" || !a.nullable || len(a.enum) != 2 {
		t.Errorf("optlit: %+v", a)
	}
	// A nullable enum admits null in the mapped schema.
	if e := byName["optlit"].jsonSchema()["enum"].([]any); len(e) != 3 || e[2] != nil {
		t.Errorf("optlit enum %v, want a, b, null", e)
	}
	if !byName["oneof"].nullable {
		t.Error("oneof: the null branch should make it nullable")
	}
}
