package access

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// maxRuleCost bounds one evaluation of a rule's CEL expression, so that an expression
// written to be slow cannot hold a call (or, in the local runtime, the operator).
const maxRuleCost = 100_000

// Rules are compiled authorization rules; a nil *Rules allows every call.
type Rules struct {
	rules []rule
}

type rule struct {
	tools, serviceAccounts, groups []string
	when                           cel.Program
}

// CompileRules checks and compiles the rules: tool globs, "namespace/name" or
// "namespace/*" accounts, and CEL expressions over "claims" that give a bool. A nil
// authorization compiles to nil, which allows everything.
func CompileRules(a *adapterconfig.Authorization) (*Rules, error) {
	if a == nil {
		return nil, nil
	}
	env, err := cel.NewEnv(cel.Variable("claims", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	out := &Rules{rules: make([]rule, 0, len(a.Rules))}
	for i, r := range a.Rules {
		compiled, err := compileRule(env, r)
		if err != nil {
			return nil, fmt.Errorf("authorization rule %d: %w", i+1, err)
		}
		out.rules = append(out.rules, compiled)
	}
	return out, nil
}

func compileRule(env *cel.Env, r adapterconfig.AuthorizationRule) (rule, error) {
	if len(r.Tools) == 0 {
		return rule{}, fmt.Errorf("tools: name at least one tool or glob")
	}
	for _, g := range r.Tools {
		if _, err := path.Match(g, ""); err != nil {
			return rule{}, fmt.Errorf("tools: %q is not a valid glob (use * and ? and [a-z])", g)
		}
	}
	for _, sa := range r.ServiceAccounts {
		if ns, name, ok := strings.Cut(sa, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return rule{}, fmt.Errorf("serviceAccounts: %q must be namespace/name or namespace/*", sa)
		}
	}
	out := rule{tools: r.Tools, serviceAccounts: r.ServiceAccounts, groups: r.Groups}
	if r.When == "" {
		return out, nil
	}
	ast, issues := env.Compile(r.When)
	if issues.Err() != nil {
		return rule{}, fmt.Errorf("when: %w", issues.Err())
	}
	if ast.OutputType() != cel.BoolType {
		return rule{}, fmt.Errorf("when: the expression gives %s, it must give a bool", ast.OutputType())
	}
	prg, err := env.Program(ast, cel.CostLimit(maxRuleCost))
	if err != nil {
		return rule{}, fmt.Errorf("when: %w", err)
	}
	out.when = prg
	return out, nil
}

// Allows says whether the caller may call the tool: some rule names the tool, matches
// the caller, and its expression (if any) is true. An expression that fails (a claim the
// token does not have) does not allow.
func (r *Rules) Allows(c *Caller, tool string) bool {
	if r == nil {
		return true
	}
	for i := range r.rules {
		if r.rules[i].allows(c, tool) {
			return true
		}
	}
	return false
}

func (r *rule) allows(c *Caller, tool string) bool {
	if c == nil || !matchesAnyGlob(r.tools, tool) || !r.matchesCaller(c) {
		return false
	}
	if r.when == nil {
		return true
	}
	claims := c.Claims
	if claims == nil {
		claims = map[string]any{}
	}
	out, _, err := r.when.Eval(map[string]any{"claims": claims})
	if err != nil {
		return false
	}
	allowed, isBool := out.Value().(bool)
	return isBool && allowed
}

func (r *rule) matchesCaller(c *Caller) bool {
	if len(r.serviceAccounts) == 0 && len(r.groups) == 0 {
		return true
	}
	for _, sa := range r.serviceAccounts {
		if c.ServiceAccount == "" {
			break
		}
		if ns, name, _ := strings.Cut(sa, "/"); sa == c.ServiceAccount || (name == "*" && strings.HasPrefix(c.ServiceAccount, ns+"/")) {
			return true
		}
	}
	return slices.ContainsFunc(r.groups, func(g string) bool { return slices.Contains(c.Groups, g) })
}

func matchesAnyGlob(globs []string, name string) bool {
	return slices.ContainsFunc(globs, func(g string) bool {
		ok, _ := path.Match(g, name)
		return ok
	})
}
