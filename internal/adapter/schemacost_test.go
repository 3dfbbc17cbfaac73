package adapter

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Self-reference at one value: the validator reports the cycle as invalid arguments, and
// the server keeps serving. Before the fix, the fast path followed the four branches 32 hops
// deep (4^32 evaluations) and one call pinned a CPU.
func TestSelfReferencingAnyOfAnswersAndTheServerStaysResponsive(t *testing.T) {
	const schema = `{"type":"object","anyOf":[{"$ref":"#"},{"$ref":"#"},{"$ref":"#"},{"$ref":"#"}]}`
	r := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true,
		templateTool("loop", schema, "ok"), templateTool("echo", objectSchema, "pong")))
	c := connect(t, r.baseURL, "", nil)

	for _, args := range []any{map[string]any{}, map[string]any{"a": map[string]any{"b": 1}}} {
		// The library reports the cycle; the answer names it.
		wantToolError(t, callTool(t, c, "loop", args), "invalid arguments: ", "reference cycle")
	}
	wantSuccess(t, callTool(t, c, "echo", map[string]any{}), "pong")
}

// Branches that lead back into the schema under a property double the work per level of
// the arguments: such a schema is refused at load, naming the problem.
func TestBranchingRecursiveSchemasAreRefusedAtLoad(t *testing.T) {
	costly := []string{
		`{"type":"object","properties":{"a":{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}}}`,
		`{"type":"object","properties":{"a":{"allOf":[{"$ref":"#"},{"$ref":"#"}]}}}`,
		// No recursion, but 20 levels of two-way branches through $defs: 2^20 paths.
		chainedBranches(20),
	}
	for _, schema := range costly {
		err := adapterconfig.CheckInputSchema([]byte(schema))
		if err == nil || !strings.Contains(err.Error(), "too costly to validate") {
			t.Errorf("adapterconfig.CheckInputSchema(%.60s…) = %v, want too costly", schema, err)
		}
		if err := adapterconfig.Validate(configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("t", schema, "x"))); err == nil {
			t.Errorf("Validate accepted a tool with schema %.60s…", schema)
		}
	}
}

// Ordinary recursion (a linked list, a binary tree) costs one evaluation per value and is
// served.
func TestLinearRecursiveSchemasAreServed(t *testing.T) {
	const binaryTree = `{"type":"object","properties":{"left":{"$ref":"#"},"right":{"$ref":"#"}}}`
	if err := adapterconfig.CheckInputSchema([]byte(binaryTree)); err != nil {
		t.Fatalf("adapterconfig.CheckInputSchema(binary tree) = %v", err)
	}
	const tree = `{"type":"object","$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"child":{"$ref":"#/$defs/node"}},"required":["name"]}},"properties":{"root":{"$ref":"#/$defs/node"}}}`
	if err := adapterconfig.CheckInputSchema([]byte(tree)); err != nil {
		t.Fatalf("adapterconfig.CheckInputSchema(tree) = %v", err)
	}
	r := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("tree", tree, "ok")))
	c := connect(t, r.baseURL, "", nil)
	wantSuccess(t, callTool(t, c, "tree", map[string]any{"root": nested(10)}), "ok")
	wantToolError(t, callTool(t, c, "tree", map[string]any{"root": map[string]any{"child": map[string]any{}}}), "invalid arguments: ", "name")
}

// Arguments deeper than adapterconfig.MaxArgumentDepth are refused before any validation.
func TestArgumentsNestedTooDeeplyAreRefused(t *testing.T) {
	r := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("any", objectSchema, "ok")))
	c := connect(t, r.baseURL, "", nil)
	wantSuccess(t, callTool(t, c, "any", map[string]any{"root": nested(adapterconfig.MaxArgumentDepth - 2)}), "ok")
	wantToolError(t, callTool(t, c, "any", map[string]any{"root": nested(adapterconfig.MaxArgumentDepth + 1)}), "invalid arguments: ", "nest more than 32 levels")
}

func nested(depth int) map[string]any {
	node := map[string]any{"name": "leaf"}
	for range depth {
		node = map[string]any{"name": "n", "child": node}
	}
	return node
}

func chainedBranches(levels int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","$ref":"#/$defs/d0","$defs":{`)
	for i := range levels {
		if i > 0 {
			b.WriteString(",")
		}
		next := `{"type":"object"}`
		if i+1 < levels {
			next = `{"$ref":"#/$defs/d` + strconv.Itoa(i+1) + `"}`
		}
		b.WriteString(`"d` + strconv.Itoa(i) + `":{"anyOf":[` + next + `,` + next + `]}`)
	}
	b.WriteString(`}}`)
	return b.String()
}
