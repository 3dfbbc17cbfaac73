package access

import (
	"fmt"
	"path"
	"regexp"
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
	// tools and prompts are path.Match globs (names have no "/"); resources and skills
	// are URI globs whose * also matches "/".
	tools, prompts, serviceAccounts, groups []string
	resources, skills                       []*regexp.Regexp
	when                                    cel.Program
}

// ItemKind is what a rule's glob list governs.
type ItemKind int

// The kinds of things a rule allows.
const (
	ItemTool ItemKind = iota
	ItemPrompt
	// ItemResource: resource URIs, and resource templates' uriTemplates.
	ItemResource
	// ItemSkill: skill paths.
	ItemSkill
)

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
	if len(r.Tools)+len(r.Prompts)+len(r.Resources)+len(r.Skills) == 0 {
		return rule{}, fmt.Errorf("the rule allows nothing: name at least one tool, prompt, resource or skill glob")
	}
	for _, list := range []struct {
		field string
		globs []string
	}{{"tools", r.Tools}, {"prompts", r.Prompts}} {
		for _, g := range list.globs {
			if _, err := path.Match(g, ""); err != nil {
				return rule{}, fmt.Errorf("%s: %q is not a valid glob (use * and ? and [a-z])", list.field, g)
			}
		}
	}
	for _, sa := range r.ServiceAccounts {
		if ns, name, ok := strings.Cut(sa, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return rule{}, fmt.Errorf("serviceAccounts: %q must be namespace/name or namespace/*", sa)
		}
	}
	out := rule{tools: r.Tools, prompts: r.Prompts, serviceAccounts: r.ServiceAccounts, groups: r.Groups}
	var err error
	if out.resources, err = compileURIGlobs("resources", r.Resources); err != nil {
		return rule{}, err
	}
	if out.skills, err = compileURIGlobs("skills", r.Skills); err != nil {
		return rule{}, err
	}
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
	cost, err := estimatedCost(env, ast)
	if err != nil {
		return rule{}, fmt.Errorf("when: %w", err)
	}
	if cost > maxRuleCost {
		return rule{}, fmt.Errorf("when: its estimated cost is up to %d units, more than the %d a rule may cost "+
			"(assuming at most %d claims, each value at most %d characters or entries); avoid nested comprehensions over the claims",
			cost, maxRuleCost, maxClaims, maxClaimSize)
	}
	prg, err := env.Program(ast, cel.CostLimit(maxRuleCost), cel.EvalOptions(cel.OptTrackCost))
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
	return r.AllowsKind(c, ItemTool, tool)
}

// AllowsKind says whether the caller may use the thing of that kind and name (a tool or
// prompt name, a resource URI or template, a skill path), as Allows does for tools.
func (r *Rules) AllowsKind(c *Caller, kind ItemKind, name string) bool {
	allowed, _ := r.AllowsKindWithin(c, kind, name, nil)
	return allowed
}

// AllowsKindWithin is AllowsKind spending the CEL work from budget (nil: unbounded).
// Once the budget is spent, rules with an expression are not evaluated and do not
// allow: complete is then false, and the answer must not be remembered.
func (r *Rules) AllowsKindWithin(c *Caller, kind ItemKind, name string, budget *Budget) (allowed, complete bool) {
	if r == nil {
		return true, true
	}
	complete = true
	for i := range r.rules {
		ok, evaluated := r.rules[i].allows(c, kind, name, budget)
		if ok {
			return true, true
		}
		complete = complete && evaluated
	}
	return false, complete
}

// names says whether the rule's globs of that kind match name.
func (r *rule) names(kind ItemKind, name string) bool {
	switch kind {
	case ItemTool:
		return matchesAnyGlob(r.tools, name)
	case ItemPrompt:
		return matchesAnyGlob(r.prompts, name)
	case ItemResource:
		return matchesAnyPattern(r.resources, name)
	case ItemSkill:
		return matchesAnyPattern(r.skills, name)
	}
	return false
}

// allows says whether the rule allows the caller; evaluated is false when its
// expression was not run because the budget was spent.
func (r *rule) allows(c *Caller, kind ItemKind, name string, budget *Budget) (allowed, evaluated bool) {
	if c == nil || !r.names(kind, name) || !r.matchesCaller(c) {
		return false, true
	}
	if r.when == nil {
		return true, true
	}
	if !budget.take() {
		return false, false
	}
	claims := c.Claims
	if claims == nil {
		claims = map[string]any{}
	}
	out, details, err := r.when.Eval(map[string]any{"claims": claims})
	budget.spend(details)
	if err != nil {
		return false, true
	}
	ok, isBool := out.Value().(bool)
	return isBool && ok, true
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

func matchesAnyPattern(patterns []*regexp.Regexp, name string) bool {
	return slices.ContainsFunc(patterns, func(p *regexp.Regexp) bool { return p.MatchString(name) })
}

// compileURIGlobs compiles globs over URIs and paths: * matches any run of characters,
// "/" included, ? one character, [a-z] (or [^a-z]) a class.
func compileURIGlobs(field string, globs []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(globs))
	for _, g := range globs {
		re, err := regexp.Compile(uriGlobExpression(g))
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a valid glob (use * and ? and [a-z])", field, g)
		}
		out = append(out, re)
	}
	return out, nil
}

// uriGlobExpression is the regular expression of a URI glob, anchored at both ends.
func uriGlobExpression(glob string) string {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			b.WriteString("(?s:.*)")
		case '?':
			b.WriteString("(?s:.)")
		case '[':
			end := strings.IndexByte(glob[i+1:], ']')
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := glob[i+1 : i+1+end]
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return b.String()
}

func matchesAnyGlob(globs []string, name string) bool {
	return slices.ContainsFunc(globs, func(g string) bool {
		ok, _ := path.Match(g, name)
		return ok
	})
}
