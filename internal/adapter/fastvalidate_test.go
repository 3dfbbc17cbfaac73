package adapter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// referenceCheck is how a call's arguments were checked before the fast path: decode,
// validate with the library, then decode again for the template.
func referenceCheck(t *compiledTool, req mcp.CallToolRequest) (any, string, error) {
	args, err := argumentsJSON(req)
	if err != nil {
		return nil, "", err
	}
	instance, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, fmt.Sprintf("arguments are not valid JSON: %v", err), nil
	}
	if msg := schemaProblems(t.schema, instance); msg != "" {
		return nil, msg, nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var data any
	if err := dec.Decode(&data); err != nil {
		return nil, "", err
	}
	return data, "", nil
}

// canonicalProblems orders what the library reports in the order of a Go map (the
// problems, and the names in "additional properties 'a', 'b' not allowed"), so that two
// validations of one instance compare equal.
func canonicalProblems(msg string) string {
	problems := strings.Split(msg, "; ")
	for i, p := range problems {
		const prefix, suffix = "additional properties ", " not allowed"
		if at := strings.Index(p, prefix); at >= 0 && strings.HasSuffix(p, suffix) {
			names := strings.Split(p[at+len(prefix):len(p)-len(suffix)], ", ")
			slices.Sort(names)
			problems[i] = p[:at+len(prefix)] + strings.Join(names, ", ") + suffix
		}
	}
	slices.Sort(problems)
	return strings.Join(problems, "; ")
}

var fastSchemas = []string{
	objectSchema,
	benchSchema,
	greetSchema,
	`{"type":"object","properties":{}}`,
	`{"type":"object","additionalProperties":false}`,
	`{"type":"object","additionalProperties":{"type":"string"}}`,
	`{"type":"object","additionalProperties":true,"required":["a","b"]}`,
	`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`,
	`{"type":"object","properties":{"n":{"type":"number"}}}`,
	`{"type":"object","properties":{"n":{"type":["integer","null"]}}}`,
	`{"type":"object","properties":{"t":{"type":"string","minLength":2,"maxLength":4}}}`,
	`{"type":"object","properties":{"mode":{"enum":["fast","slow",null,true,1]}}}`,
	`{"type":"object","properties":{"mode":{"type":"string","enum":["fast","slow"]}}}`,
	`{"type":"object","properties":{"k":{"const":"x"}}}`,
	`{"type":"object","properties":{"k":{"const":1}}}`,
	`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2}}}`,
	`{"type":"object","properties":{"tags":{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"}}}}`,
	`{"type":"object","properties":{"opt":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"title":"Opt"}}}`,
	`{"type":"object","allOf":[{"required":["a"]},{"properties":{"a":{"type":"boolean"}}}]}`,
	`{"type":"object","properties":{"c":{"$ref":"#/$defs/color"}},"$defs":{"color":{"type":"string","enum":["red","blue"]}}}`,
	`{"type":"object","properties":{"node":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"v":{"type":"string"},"next":{"$ref":"#/$defs/node"}},"additionalProperties":false}}}`,
	`{"type":"object","$ref":"#"}`,
	`{"type":"object","properties":{"a":true,"b":false}}`,
	`{"type":"object","properties":{"s":{"type":"string","pattern":"^a+$"}}}`,
	`{"type":"object","properties":{"n":{"type":"integer","minimum":0}}}`,
	`{"type":"object","properties":{"o":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`,
	`{"type":"object","patternProperties":{"^x":{"type":"string"}},"additionalProperties":false}`,
	`{"type":"object","unevaluatedProperties":false,"properties":{"a":{}}}`,
	`{"type":"object","properties":{"e":{"type":"string","format":"email"}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"e":{"type":"string","format":"email"},"n":{"$ref":"#/definitions/n"}},"definitions":{"n":{"type":"integer"}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"l":{"type":"array","items":[{"type":"string"}]}}}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"l":{"type":"array","items":{"type":"integer"}}},"required":["l"]}`,
	`{"type":"object","required":["name"],"properties":{"name":{"type":"string","title":"Name","description":"d","examples":["x"],"deprecated":true,"readOnly":true}}}`,
}

var fastArguments = []string{
	`{}`, `null`, `[]`, `"x"`, `1`, `true`,
	`{"name":"Ada"}`, `{"name":"Ada","count":3}`, `{"name":1}`, `{"name":null}`, `{"name":"Ada","x":1}`,
	`{"a":1,"b":2}`, `{"a":true}`, `{"a":"x","b":"y"}`, `{"x1":"a"}`, `{"x1":1}`,
	`{"n":1}`, `{"n":-7}`, `{"n":1.0}`, `{"n":1e2}`, `{"n":1.5}`, `{"n":-0}`, `{"n":"1"}`, `{"n":null}`,
	`{"n":9007199254740993}`, `{"n":1.0000000000000001}`, `{"n":123456789012345678901234567890}`,
	`{"t":"ab"}`, `{"t":"a"}`, `{"t":"abcde"}`, `{"t":"héllo"}`, `{"t":"hé"}`, `{"t":"\u0041\u0042"}`,
	`{"mode":"fast"}`, `{"mode":"medium"}`, `{"mode":null}`, `{"mode":true}`, `{"mode":1}`, `{"mode":1.0}`,
	`{"k":"x"}`, `{"k":"y"}`, `{"k":1}`, `{"k":1.0}`,
	`{"tags":[]}`, `{"tags":["a"]}`, `{"tags":["a","b","c"]}`, `{"tags":[1]}`, `{"tags":["a",2]}`, `{"tags":["a","b"]}`,
	`{"opt":"x"}`, `{"opt":null}`, `{"opt":3}`,
	`{"c":"red"}`, `{"c":"green"}`,
	`{"node":{"v":"a","next":{"v":"b"}}}`, `{"node":{"v":"a","next":{"v":2}}}`, `{"node":{"w":1}}`,
	`{"s":"aaa"}`, `{"s":"b"}`, `{"o":"x"}`, `{"o":1}`,
	`{"e":"a@example.com"}`, `{"e":"not-an-email"}`,
	`{"l":["a"]}`, `{"l":["a",1]}`, `{"l":[1,2]}`, `{"l":[1.5]}`,
	`{"name":"x","nested":{"deep":[1,{"a":null}]}}`,
	`{"name":"dup","name":"dup2"}`,
}

// TestCheckArguments_SameAsReference: the fast path, and mcp-go's decoding standing in
// for a second one, give the same verdict, message and template data as decoding and
// validating with the library did.
func TestCheckArguments_SameAsReference(t *testing.T) {
	for si, schema := range fastSchemas {
		for _, template := range []bool{true, false} {
			tool := adapterconfig.Tool{Name: "t", InputSchema: json.RawMessage(schema)}
			if template {
				tool.Template = &adapterconfig.TemplateBackend{Text: "x"}
			} else {
				tool.HTTP = &adapterconfig.HTTPBackend{URL: "http://backend.example/x", Timeout: adapterconfig.Duration{Duration: 1}, MaxResponseBytes: 1}
			}
			tools, err := compileConfig(&adapterconfig.Config{Transport: adapterconfig.TransportStreamableHTTP, Tools: []adapterconfig.Tool{tool}})
			if err != nil {
				t.Fatalf("schema %d: %v", si, err)
			}
			ct := tools[0]
			for _, args := range fastArguments {
				var requests []mcp.CallToolRequest
				// As mcp-go reads it from the wire ...
				var wire mcp.CallToolRequest
				if err := json.Unmarshal([]byte(`{"method":"tools/call","params":{"name":"t","arguments":`+args+`}}`), &wire); err != nil {
					t.Fatal(err)
				}
				requests = append(requests, wire)
				// ... and as built in code.
				var inCode mcp.CallToolRequest
				inCode.Params.Arguments = wire.Params.Arguments
				requests = append(requests, inCode)

				for ri, req := range requests {
					want, wantMsg, err := referenceCheck(ct, req)
					if err != nil {
						t.Fatal(err)
					}
					raw, err := argumentsJSON(req)
					if err != nil {
						t.Fatal(err)
					}
					got, gotMsg := checkArguments(ct, req, raw)
					where := fmt.Sprintf("schema %s, template %v, arguments %s, request %d", schema, template, args, ri)
					if canonicalProblems(gotMsg) != canonicalProblems(wantMsg) {
						t.Errorf("%s: message %q, want %q", where, gotMsg, wantMsg)
					}
					if template && wantMsg == "" && !reflect.DeepEqual(got, want) {
						t.Errorf("%s: template data %#v, want %#v", where, got, want)
					}
				}
			}
		}
	}
}

// TestFastSchema_ProvesOnlyValid checks the fast validator alone: what it proves valid,
// the library accepts.
func TestFastSchema_ProvesOnlyValid(t *testing.T) {
	proved := 0
	for _, schema := range fastSchemas {
		compiled, err := adapterconfig.CompileInputSchema(json.RawMessage(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		fast := newFastSchema(compiled)
		for _, args := range fastArguments {
			number, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(args)))
			if err != nil {
				t.Fatal(err)
			}
			var float any
			if err := json.Unmarshal([]byte(args), &float); err != nil {
				t.Fatal(err)
			}
			for _, v := range []any{number, float} {
				if fast.proves(v) {
					proved++
					if err := compiled.Validate(number); err != nil {
						t.Errorf("schema %s proves %s valid; the library says %v", schema, args, err)
					}
				}
			}
		}
	}
	if proved < 100 {
		t.Errorf("only %d instances proved valid: the fast path is not being taken", proved)
	}
}

func TestFastSchema_ProvesTheBenchmarkSkill(t *testing.T) {
	compiled, err := adapterconfig.CompileInputSchema(json.RawMessage(benchSchema))
	if err != nil {
		t.Fatal(err)
	}
	fast := newFastSchema(compiled)
	if !fast.proves(map[string]any{"name": "Ada"}) {
		t.Error(`{"name":"Ada"} not proven valid`)
	}
	for _, v := range []any{map[string]any{}, map[string]any{"name": "Ada", "x": "y"}, map[string]any{"name": 1.0}, "Ada"} {
		if fast.proves(v) {
			t.Errorf("%#v proven valid", v)
		}
	}
}

func TestGate_ReadsEverySpellingOfListen(t *testing.T) {
	listen := string(mcp.MethodSubscriptionsListen)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}`,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions\/listen"}`,
		`{"jsonrpc":"2.0","id":1,"method":"\u0073ubscriptions/\u006cisten"}`,
		`{"jsonrpc":"2.0","id":1,"METHOD":"subscriptions/listen"}`,
	} {
		if got := admission.ReadMessage([]byte(body)).Method; got != listen {
			t.Errorf("%s read as method %q, want %s", body, got, listen)
		}
	}
	if admission.ReadMessage([]byte(benchCallBody)).Method == listen {
		t.Errorf("an ordinary tools/call read as a listen")
	}
}
