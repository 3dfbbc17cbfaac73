package adapter

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The fast path may only say "valid" where the library validator agrees: it proves
// arguments valid to skip the library, never the other way. Schemas go through the same
// checks as at load (compile, cost), and arguments through the same depth bound.
func FuzzFastValidatorAgreesWithTheLibrary(f *testing.F) {
	schemas := []string{
		`{"type":"object"}`,
		`{"type":"object","properties":{"title":{"type":"string","minLength":1}},"required":["title"],"additionalProperties":false}`,
		`{"type":"object","properties":{"n":{"type":"integer"},"x":{"type":"number"},"b":{"type":"boolean"},"e":{"enum":["a","b",null]}}}`,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"},"maxItems":3}}}`,
		`{"type":"object","anyOf":[{"$ref":"#"},{"$ref":"#"},{"$ref":"#"},{"$ref":"#"}]}`,
		`{"type":"object","properties":{"c":{"const":1}},"allOf":[{"required":["c"]}]}`,
	}
	for _, s := range schemas {
		for _, args := range []string{`{}`, `{"title":"Dune"}`, `{"title":""}`, `{"n":1.0,"x":"1"}`, `{"a":["x","y","z","w"]}`, `{"c":1}`, `{"e":null}`} {
			f.Add(s, args)
		}
	}
	f.Fuzz(func(t *testing.T, schemaText, argsText string) {
		if adapterconfig.CheckInputSchema([]byte(schemaText)) != nil {
			return
		}
		schema, err := adapterconfig.CompileInputSchema(json.RawMessage(schemaText))
		if err != nil {
			t.Fatalf("CheckInputSchema accepted %s but it does not compile: %v", schemaText, err)
		}
		args, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(argsText)))
		if err != nil || nestsDeeperThan(args, adapterconfig.MaxArgumentDepth) {
			return
		}
		if newFastSchema(schema).proves(args) {
			if err := schema.Validate(args); err != nil {
				t.Fatalf("fast path proved %s valid against %s; the library says: %v", argsText, schemaText, err)
			}
		}
	})
}

// Loading any schema a remote may publish answers (compiled, refused or too costly)
// without panicking.
func FuzzCheckInputSchema(f *testing.F) {
	for _, s := range []string{`{"type":"object"}`, `{"type":"object","properties":{"a":{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}}}`,
		`{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, `{"type":"string"}`, `[]`, `{"type":"object","$ref":"http://x/y"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, schemaText string) {
		_ = adapterconfig.CheckInputSchema([]byte(schemaText))
	})
}
