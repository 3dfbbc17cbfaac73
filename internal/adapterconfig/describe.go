package adapterconfig

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"text/template"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// maxReportedSchemaErrors keeps an anyOf with many branches from producing a wall of text.
const maxReportedSchemaErrors = 5

var schemaMessages = message.NewPrinter(language.English)

// DescribeValidationError lists what is wrong, each problem prefixed with the JSON
// pointer of the offending value (none for the top level).
func DescribeValidationError(verr *jsonschema.ValidationError) string {
	var problems []string
	for _, leaf := range validationLeaves(verr) {
		if len(problems) == maxReportedSchemaErrors {
			problems = append(problems, "…")
			break
		}
		problems = append(problems, describeLeaf(leaf))
	}
	return strings.Join(problems, "; ")
}

// validationLeaves returns the errors that say what is wrong; inner nodes only say
// which subschema failed.
func validationLeaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var leaves []*jsonschema.ValidationError
	for _, c := range e.Causes {
		leaves = append(leaves, validationLeaves(c)...)
	}
	return leaves
}

func describeLeaf(e *jsonschema.ValidationError) string {
	what := e.ErrorKind.LocalizedString(schemaMessages)
	if len(e.InstanceLocation) == 0 {
		return what
	}
	return jsonPointer(e.InstanceLocation) + ": " + what
}

func jsonPointer(tokens []string) string {
	var sb strings.Builder
	for _, tok := range tokens {
		sb.WriteByte('/')
		sb.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return sb.String()
}

// TemplateFuncs are the functions a template backend may call.
var TemplateFuncs = template.FuncMap{
	"json":    templateJSON,
	"upper":   func(v any) string { return strings.ToUpper(fmt.Sprint(v)) },
	"lower":   func(v any) string { return strings.ToLower(fmt.Sprint(v)) },
	"default": templateDefault,
}

func templateJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("json: %w", err)
	}
	return string(b), nil
}

// templateDefault returns def when v is empty, so `{{ index . "x" | default "none" }}`
// covers an optional argument (index, unlike .x, does not fail on a missing key).
func templateDefault(def, v any) any {
	if v == nil {
		return def
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String, reflect.Map, reflect.Slice, reflect.Array:
		if rv.Len() == 0 {
			return def
		}
	}
	if rv.IsZero() {
		return def
	}
	return v
}
