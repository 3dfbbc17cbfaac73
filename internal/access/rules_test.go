package access

import (
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

func TestRulesAllowByGlobAccountGroupAndCEL(t *testing.T) {
	rules, err := CompileRules(&adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{
		{Tools: []string{"search_*"}, ServiceAccounts: []string{"agents/*"}},
		{Tools: []string{"checkout_book"}, ServiceAccounts: []string{"default/librarian"}},
		{Tools: []string{"audit_?og"}, Groups: []string{"auditors"}},
		{Tools: []string{"renew_book"}, When: "claims.email.endsWith('@example.com')"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	agent := &Caller{ServiceAccount: "agents/reader", Groups: []string{"system:serviceaccounts:agents"}}
	librarian := &Caller{ServiceAccount: "default/librarian"}
	auditor := &Caller{Kind: adapterconfig.IssuerOIDC, Subject: "a", Groups: []string{"auditors"}, Claims: map[string]any{"email": "a@elsewhere.org"}}
	alice := &Caller{Kind: adapterconfig.IssuerOIDC, Subject: "alice", Claims: map[string]any{"email": "alice@example.com"}}
	noEmail := &Caller{Kind: KindBearer}

	cases := []struct {
		caller *Caller
		tool   string
		want   bool
	}{
		{agent, "search_book", true},
		{agent, "checkout_book", false},
		{librarian, "checkout_book", true},
		{librarian, "search_book", false}, // default/ is not agents/
		{auditor, "audit_log", true},
		{auditor, "renew_book", false}, // the expression is false for its email
		{alice, "renew_book", true},
		{noEmail, "renew_book", false}, // the expression fails: no such claim
		{nil, "search_book", false},
	}
	for _, c := range cases {
		if got := rules.Allows(c.caller, c.tool); got != c.want {
			t.Errorf("%s on %s: allowed %v, want %v", c.caller, c.tool, got, c.want)
		}
	}
	var none *Rules
	if !none.Allows(noEmail, "anything") {
		t.Error("no rules must allow every authenticated caller")
	}
}

func TestCompileRulesSaysWhatIsWrong(t *testing.T) {
	cases := map[string]struct {
		rule adapterconfig.AuthorizationRule
		want string
	}{
		"bad glob":             {adapterconfig.AuthorizationRule{Tools: []string{"search_["}}, `rule 1: tools: "search_[" is not a valid glob`},
		"account without ns":   {adapterconfig.AuthorizationRule{Tools: []string{"*"}, ServiceAccounts: []string{"librarian"}}, "must be namespace/name or namespace/*"},
		"CEL syntax":           {adapterconfig.AuthorizationRule{Tools: []string{"*"}, When: "claims.email.endsWith("}, "rule 1: when:"},
		"CEL that is not bool": {adapterconfig.AuthorizationRule{Tools: []string{"*"}, When: "claims.email"}, "it must give a bool"},
		"no kind":              {adapterconfig.AuthorizationRule{}, "name at least one tool, prompt, resource or skill glob"},
		"bad prompt glob":      {adapterconfig.AuthorizationRule{Prompts: []string{"p["}}, `prompts: "p[" is not a valid glob`},
	}
	for name, c := range cases {
		_, err := CompileRules(&adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{c.rule}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
}

// An expression built to be slow is refused when it compiles (its estimated cost), and
// one whose claims are larger than the estimator assumed is cut off at run time by the
// cost limit and allows nothing.
func TestCostlyExpressionAllowsNothing(t *testing.T) {
	_, err := CompileRules(&adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{{
		Tools: []string{"*"},
		When:  "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, a+b+c+d+e > 0)))))",
	}}})
	if err == nil || !strings.Contains(err.Error(), "estimated cost is up to 1455551 units") {
		t.Fatalf("five nested comprehensions: %v, want a refusal naming the estimate", err)
	}

	rules, err := CompileRules(&adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{{
		Tools: []string{"*"},
		When:  "claims.groups.all(g, g.startsWith('team-'))",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	groups := make([]any, 50_000)
	for i := range groups {
		groups[i] = "team-x"
	}
	if rules.Allows(&Caller{Kind: KindBearer, Claims: map[string]any{"groups": groups}}, "x") {
		t.Fatal("an evaluation over the cost limit allowed the call")
	}
	if !rules.Allows(&Caller{Kind: KindBearer, Claims: map[string]any{"groups": []any{"team-x"}}}, "x") {
		t.Fatal("the rule does not allow a small token")
	}
}

// Each kind is governed by its own globs only: tools: ["*"] allows no prompt, resource
// or skill; URI and skill-path globs cross "/".
func TestRulesGovernEachKindByItsOwnGlobs(t *testing.T) {
	rules, err := CompileRules(&adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{
		{Tools: []string{"*"}, ServiceAccounts: []string{"agents/tools"}},
		{Prompts: []string{"review_*"}, Resources: []string{"docs://team/*"}, Skills: []string{"acme/*"}, ServiceAccounts: []string{"agents/reader"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tools := &Caller{ServiceAccount: "agents/tools"}
	reader := &Caller{ServiceAccount: "agents/reader"}
	cases := []struct {
		caller *Caller
		kind   ItemKind
		name   string
		want   bool
	}{
		{tools, ItemTool, "anything", true},
		{tools, ItemPrompt, "review_code", false},
		{tools, ItemResource, "docs://team/guide", false},
		{tools, ItemSkill, "acme/billing", false},
		{reader, ItemTool, "anything", false},
		{reader, ItemPrompt, "review_code", true},
		{reader, ItemPrompt, "deploy", false},
		{reader, ItemResource, "docs://team/a/b/c", true},
		{reader, ItemResource, "docs://other/guide", false},
		{reader, ItemSkill, "acme/billing/refunds", true},
		{reader, ItemSkill, "acmex/refunds", false},
	}
	for _, c := range cases {
		if got := rules.AllowsKind(c.caller, c.kind, c.name); got != c.want {
			t.Errorf("%s, kind %d, %s: allowed %v, want %v", c.caller, c.kind, c.name, got, c.want)
		}
	}
}
