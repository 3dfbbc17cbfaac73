package adapter

import (
	"encoding/json"
	"reflect"
	"slices"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fastSchema is a compiled JSON Schema reduced to the keywords that tool schemas use
// most (type, properties, required, additionalProperties, items, enum, const, string
// and array lengths, allOf, anyOf, $ref). It can only prove arguments valid: proves
// never says "valid" when the schema says otherwise, and says "not proven" for
// everything else. A call whose arguments are not proven valid is validated by the
// jsonschema library, which then also words the error. The point is speed: the
// library's validator is general, allocates, and recurses deeply.
type fastSchema struct {
	// unprovable marks a schema with a keyword this validator does not check (format,
	// pattern, minimum, oneOf, not, if, ...): no instance is proven valid against it.
	unprovable bool
	// always is the schema true, or one with no assertion at all.
	always bool

	types     jsonTypes // 0: any type
	enum      []any     // strings, booleans and nulls of enum; hasEnum when enum is set
	hasEnum   bool
	constVal  any
	hasConst  bool
	minLength int // -1: none
	maxLength int // -1: none

	properties map[string]*fastSchema
	required   []string
	// additional is nil when additionalProperties is absent or true.
	additional   *fastSchema
	noAdditional bool // additionalProperties: false

	items              *fastSchema // nil: items unconstrained
	minItems, maxItems int         // -1: none

	ref   *fastSchema
	allOf []*fastSchema
	anyOf []*fastSchema
}

type jsonTypes uint8

const (
	typeNull jsonTypes = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
	typeArray
	typeObject
)

var jsonTypeNames = map[string]jsonTypes{
	"null": typeNull, "boolean": typeBoolean, "number": typeNumber, "integer": typeInteger,
	"string": typeString, "array": typeArray, "object": typeObject,
}

// fastKeywords are the fields of jsonschema.Schema that fastSchema checks or that assert
// nothing (identity and annotations). A schema with any other field set is unprovable,
// so a field added by a later version of the library is safe by default.
var fastKeywords = map[string]bool{
	// identity
	"DraftVersion": true, "Location": true, "ID": true, "Anchor": true,
	"DynamicAnchor": true, "RecursiveAnchor": true,
	// annotations
	"Title": true, "Description": true, "Default": true, "Comment": true,
	"ReadOnly": true, "WriteOnly": true, "Examples": true, "Deprecated": true,
	// checked
	"Bool": true, "Ref": true, "Types": true, "Enum": true, "Const": true,
	"AllOf": true, "AnyOf": true,
	"Required": true, "Properties": true, "AdditionalProperties": true,
	"Items": true, "Items2020": true, "MinItems": true, "MaxItems": true,
	"MinLength": true, "MaxLength": true,
}

// schemaFieldsOutsideFastKeywords are the indexes of the exported fields of
// jsonschema.Schema that fastSchema does not handle.
var schemaFieldsOutsideFastKeywords = func() []int {
	var idx []int
	st := reflect.TypeFor[jsonschema.Schema]()
	for i := range st.NumField() {
		if f := st.Field(i); f.IsExported() && !fastKeywords[f.Name] {
			idx = append(idx, i)
		}
	}
	return idx
}()

// newFastSchema reduces a compiled schema; the result is never nil.
func newFastSchema(s *jsonschema.Schema) *fastSchema {
	return (&fastCompiler{done: map[*jsonschema.Schema]*fastSchema{}}).compile(s)
}

type fastCompiler struct {
	done map[*jsonschema.Schema]*fastSchema
}

func (c *fastCompiler) compile(s *jsonschema.Schema) *fastSchema {
	if s == nil {
		return &fastSchema{unprovable: true}
	}
	if f, ok := c.done[s]; ok {
		return f // shared or recursive: filled in, or being filled in, already
	}
	f := &fastSchema{minLength: -1, maxLength: -1, minItems: -1, maxItems: -1}
	c.done[s] = f
	if !c.fill(f, s) {
		*f = fastSchema{unprovable: true}
	}
	return f
}

// fill reduces s into f; false when s uses a keyword fastSchema does not check.
func (c *fastCompiler) fill(f *fastSchema, s *jsonschema.Schema) bool {
	v := reflect.ValueOf(s).Elem()
	for _, i := range schemaFieldsOutsideFastKeywords {
		if !v.Field(i).IsZero() {
			return false
		}
	}
	if s.Bool != nil {
		if !*s.Bool {
			return false
		}
		f.always = true
		return true
	}
	if s.Types != nil {
		for _, name := range s.Types.ToStrings() {
			t, ok := jsonTypeNames[name]
			if !ok {
				return false
			}
			f.types |= t
		}
	}
	if s.Enum != nil {
		f.hasEnum = true
		for _, e := range s.Enum.Values {
			if provableScalar(e) {
				f.enum = append(f.enum, e)
			}
		}
	}
	if s.Const != nil {
		if !provableScalar(*s.Const) {
			return false
		}
		f.hasConst, f.constVal = true, *s.Const
	}
	if s.MinLength != nil {
		f.minLength = *s.MinLength
	}
	if s.MaxLength != nil {
		f.maxLength = *s.MaxLength
	}
	f.required = s.Required
	if len(s.Properties) > 0 {
		f.properties = make(map[string]*fastSchema, len(s.Properties))
		for name, p := range s.Properties {
			f.properties[name] = c.compile(p)
		}
	}
	switch a := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		f.noAdditional = !a
	case *jsonschema.Schema:
		f.additional = c.compile(a)
	default:
		return false
	}
	switch items := s.Items.(type) {
	case nil:
	case *jsonschema.Schema:
		f.items = c.compile(items)
	default: // the tuple form
		return false
	}
	if s.Items2020 != nil {
		if f.items != nil {
			return false
		}
		f.items = c.compile(s.Items2020)
	}
	if s.MinItems != nil {
		f.minItems = *s.MinItems
	}
	if s.MaxItems != nil {
		f.maxItems = *s.MaxItems
	}
	if s.Ref != nil {
		f.ref = c.compile(s.Ref)
	}
	for _, sub := range s.AllOf {
		f.allOf = append(f.allOf, c.compile(sub))
	}
	for _, sub := range s.AnyOf {
		f.anyOf = append(f.anyOf, c.compile(sub))
	}
	f.always = f.types == 0 && !f.hasEnum && !f.hasConst && f.minLength < 0 && f.maxLength < 0 &&
		len(f.required) == 0 && len(f.properties) == 0 && f.additional == nil && !f.noAdditional &&
		f.items == nil && f.minItems < 0 && f.maxItems < 0 && f.ref == nil && len(f.allOf) == 0 && len(f.anyOf) == 0
	return true
}

// provableScalar: enum and const values compared here; numbers, arrays and objects are
// left to the library (JSON Schema compares numbers by value, 1 == 1.0).
func provableScalar(v any) bool {
	switch v.(type) {
	case nil, bool, string:
		return true
	}
	return false
}

// maxFastHops bounds the $ref, allOf and anyOf hops taken without descending into the
// instance, so a schema that refers to itself without consuming the instance (which
// the library reports as a cycle) ends as not proven.
const maxFastHops = 32

// proves reports whether v, a value decoded from JSON (numbers as json.Number or
// float64), is valid against f. false means "not proven", not "invalid".
func (f *fastSchema) proves(v any) bool { return f != nil && f.check(v, nil) }

// check proves v against f. inPlace holds the schemas already applied to v on the way
// here: meeting one again is a cycle, which ends as not proven, so the work at one value
// is bounded by the schema's size, not exponential in its branches.
func (f *fastSchema) check(v any, inPlace []*fastSchema) bool {
	if f.unprovable {
		return false
	}
	if f.always {
		return true
	}
	if len(inPlace) > maxFastHops || slices.Contains(inPlace, f) {
		return false
	}
	if f.types != 0 && !f.typeMatches(v) {
		return false
	}
	if f.hasEnum && !containsScalar(f.enum, v) {
		return false
	}
	if f.hasConst && !scalarEqual(f.constVal, v) {
		return false
	}
	switch v := v.(type) {
	case map[string]any:
		if !f.checkObject(v) {
			return false
		}
	case []any:
		if !f.checkArray(v) {
			return false
		}
	case string:
		if f.minLength >= 0 || f.maxLength >= 0 {
			n := utf8.RuneCountInString(v)
			if (f.minLength >= 0 && n < f.minLength) || (f.maxLength >= 0 && n > f.maxLength) {
				return false
			}
		}
	case json.Number, float64, nil, bool:
	default:
		return false // not a JSON value
	}
	inPlace = append(inPlace, f)
	if f.ref != nil && !f.ref.check(v, inPlace) {
		return false
	}
	for _, sub := range f.allOf {
		if !sub.check(v, inPlace) {
			return false
		}
	}
	if len(f.anyOf) > 0 {
		for _, sub := range f.anyOf {
			if sub.check(v, inPlace) {
				return true
			}
		}
		return false
	}
	return true
}

func (f *fastSchema) typeMatches(v any) bool {
	switch v := v.(type) {
	case nil:
		return f.types&typeNull != 0
	case bool:
		return f.types&typeBoolean != 0
	case string:
		return f.types&typeString != 0
	case map[string]any:
		return f.types&typeObject != 0
	case []any:
		return f.types&typeArray != 0
	case json.Number:
		return f.types&typeNumber != 0 || (f.types&typeInteger != 0 && isPlainInteger(string(v)))
	case float64:
		// An integral float64 may come from text such as 1.0000000000000001, which is
		// not an integer: only "number" is provable.
		return f.types&typeNumber != 0
	}
	return false
}

// isPlainInteger reports a JSON number written without fraction or exponent. Others
// (1.0, 1e2) may be integers too; the library decides those.
func isPlainInteger(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (f *fastSchema) checkObject(obj map[string]any) bool {
	for _, name := range f.required {
		if _, ok := obj[name]; !ok {
			return false
		}
	}
	if len(f.properties) == 0 && f.additional == nil && !f.noAdditional {
		return true
	}
	for name, value := range obj {
		if p, ok := f.properties[name]; ok {
			if !p.check(value, nil) {
				return false
			}
			continue
		}
		if f.noAdditional {
			return false
		}
		if f.additional != nil && !f.additional.check(value, nil) {
			return false
		}
	}
	return true
}

func (f *fastSchema) checkArray(arr []any) bool {
	if (f.minItems >= 0 && len(arr) < f.minItems) || (f.maxItems >= 0 && len(arr) > f.maxItems) {
		return false
	}
	if f.items != nil {
		for _, item := range arr {
			if !f.items.check(item, nil) {
				return false
			}
		}
	}
	return true
}

func containsScalar(values []any, v any) bool {
	for _, e := range values {
		if scalarEqual(e, v) {
			return true
		}
	}
	return false
}

// scalarEqual compares a string, boolean or null of the schema with v.
func scalarEqual(schemaValue, v any) bool {
	switch want := schemaValue.(type) {
	case nil:
		return v == nil
	case bool:
		got, ok := v.(bool)
		return ok && got == want
	case string:
		got, ok := v.(string)
		return ok && got == want
	}
	return false
}
