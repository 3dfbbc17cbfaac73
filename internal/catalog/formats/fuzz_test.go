package formats

import (
	"encoding/json"
	"testing"
)

// Every format renders any object schema a remote may publish without panicking, and
// what it renders encodes as JSON.
func FuzzRenderFormats(f *testing.F) {
	for _, seed := range []string{
		`{"type":"object"}`,
		`{"type":"object","properties":{"title":{"type":"string"},"n":{"type":"integer"}},"required":["title"]}`,
		`{"type":"object","properties":{"x":{"anyOf":[{"type":"string"},{"type":"null"}]},"y":{"type":["number","null"]}}}`,
		`{"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$defs":{"n":{"type":"object"}}}`,
		`{"type":"object","properties":{"e":{"enum":["a",1,null,{"k":[]}]},"c":{"const":{"x":1}}}}`,
		`{"type":"object","properties":{"":{"type":"string"},"\u0000":{}}}`,
	} {
		f.Add("tool", "a tool", seed)
	}
	f.Fuzz(func(t *testing.T, name, description, schema string) {
		var probe map[string]any
		if json.Unmarshal([]byte(schema), &probe) != nil {
			return // a schema is a JSON object by the time it reaches the catalog
		}
		tool := Tool{Name: name, Description: description, InputSchema: json.RawMessage(schema)}
		for _, format := range Formats {
			out, err := Render(tool, format)
			if err != nil {
				continue
			}
			if _, err := json.Marshal(out); err != nil {
				t.Fatalf("format %s rendered a value that does not encode: %v", format, err)
			}
		}
	})
}
