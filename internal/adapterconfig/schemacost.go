package adapterconfig

import (
	"fmt"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A JSON Schema can make validation exponential in the nesting of the arguments: every
// anyOf/allOf/oneOf branch that leads back into a schema multiplies the work at each
// level ({"anyOf":[{"$ref":"#"},{"$ref":"#"}]} under a property doubles it per level),
// and 70 bytes of schema can then pin a CPU for good. Such schemas are refused when a
// tool is loaded, and arguments nested deeper than the bound below are refused before
// validation, so that every call's validation work is bounded.
const (
	// MaxArgumentDepth is how deeply a call's arguments may nest (objects and arrays).
	MaxArgumentDepth = 32
	// maxSchemaCost bounds the schema evaluations one argument value can cause, counted
	// for the worst arguments up to MaxArgumentDepth. Ordinary schemas cost tens.
	maxSchemaCost = 1 << 14
)

// CheckInputSchema reports whether raw is an input schema the adapter would serve: an
// object schema that compiles and whose validation work is bounded. The operator uses it
// to skip a remote's tool instead of failing the whole server.
func CheckInputSchema(raw []byte) error {
	schema, err := CompileInputSchema(raw)
	if err != nil {
		return err
	}
	return checkSchemaCost(schema)
}

// errTooCostly names the problem and the fix.
var errTooCostly = fmt.Errorf("inputSchema is too costly to validate: its anyOf/allOf/oneOf branches and $refs "+
	"apply the same schema to one argument value many times over, multiplying at each level of nesting "+
	"(more than %d evaluations for arguments %d levels deep); use fewer branches that lead back to the same schema",
	maxSchemaCost, MaxArgumentDepth)

// checkSchemaCost simulates validating the worst arguments, one level of nesting at a
// time, and refuses the schema when that takes more than maxSchemaCost evaluations. A
// level holds the schemas applied to one value, with how many times each is applied;
// the next level follows the member or item for which that multiset is largest. A
// binary tree schema stays at one evaluation per value; a schema whose branches lead
// back to itself doubles per level and is refused.
func checkSchemaCost(root *jsonschema.Schema) error {
	budget := maxSchemaCost
	level := map[*jsonschema.Schema]int{root: 1}
	for depth := 0; depth <= MaxArgumentDepth && len(level) > 0; depth++ {
		reached := map[*jsonschema.Schema]int{}
		for s, n := range level {
			if !applyInPlace(s, n, reached, nil, &budget) {
				return errTooCostly
			}
		}
		level = worstChildLevel(reached)
	}
	return nil
}

// applyInPlace counts s and the subschemas it applies to the same value, n times each,
// and charges them to the budget. A schema met again on the way is a cycle the validator
// itself stops and reports, so it is not followed.
func applyInPlace(s *jsonschema.Schema, n int, reached map[*jsonschema.Schema]int, path []*jsonschema.Schema, budget *int) bool {
	if s == nil || slices.Contains(path, s) {
		return true
	}
	if *budget -= n; *budget < 0 {
		return false
	}
	reached[s] += n
	path = append(path, s)
	for _, sub := range sameValueSchemas(s) {
		if !applyInPlace(sub, n, reached, path, budget) {
			return false
		}
	}
	return true
}

// worstChildLevel returns the schemas applied to the member or item of a value that
// gets the most of them, given the schemas reached at that value.
func worstChildLevel(reached map[*jsonschema.Schema]int) map[*jsonschema.Schema]int {
	candidates := []func(*jsonschema.Schema) []*jsonschema.Schema{otherMemberSchemas, itemSchemas, leafSchemas}
	for _, name := range propertyNames(reached) {
		candidates = append(candidates, func(s *jsonschema.Schema) []*jsonschema.Schema { return memberSchemas(s, name) })
	}
	var worst map[*jsonschema.Schema]int
	worstTotal := 0
	for _, childSchemas := range candidates {
		next, total := map[*jsonschema.Schema]int{}, 0
		for s, n := range reached {
			for _, sub := range childSchemas(s) {
				if sub != nil {
					next[sub] += n
					total += n
				}
			}
		}
		if total > worstTotal {
			worst, worstTotal = next, total
		}
	}
	return worst
}

func propertyNames(reached map[*jsonschema.Schema]int) []string {
	seen := map[string]bool{}
	var names []string
	for s := range reached {
		for name := range s.Properties {
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	return names
}

// memberSchemas apply to the member called name (every pattern is assumed to match).
func memberSchemas(s *jsonschema.Schema, name string) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.UnevaluatedProperties}
	if sub, ok := s.Properties[name]; ok {
		out = append(out, sub)
	} else {
		out = append(out, schemaOf(s.AdditionalProperties))
	}
	for _, sub := range s.PatternProperties {
		out = append(out, sub)
	}
	return out
}

// otherMemberSchemas apply to a member no property names.
func otherMemberSchemas(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.UnevaluatedProperties, schemaOf(s.AdditionalProperties)}
	for _, sub := range s.PatternProperties {
		out = append(out, sub)
	}
	return out
}

// itemSchemas apply to an item of an array (every positional schema is assumed to).
func itemSchemas(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Items2020, s.Contains, s.UnevaluatedItems, schemaOf(s.AdditionalItems)}
	out = append(out, s.PrefixItems...)
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		out = append(out, items)
	case []*jsonschema.Schema:
		out = append(out, items...)
	}
	return out
}

// leafSchemas apply to a member's name or a string's decoded content.
func leafSchemas(s *jsonschema.Schema) []*jsonschema.Schema {
	return []*jsonschema.Schema{s.PropertyNames, s.ContentSchema}
}

// sameValueSchemas are the subschemas applied to the value s itself applies to.
func sameValueSchemas(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, sub := range s.DependentSchemas {
		out = append(out, sub)
	}
	for _, dep := range s.Dependencies {
		if sub, ok := dep.(*jsonschema.Schema); ok {
			out = append(out, sub)
		}
	}
	return out
}

func schemaOf(v any) *jsonschema.Schema {
	s, _ := v.(*jsonschema.Schema)
	return s
}
