package access

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// literalSquare is a rule expression whose work does not depend on the claims: two
// nested comprehensions over a 100-element list. Estimated 91,411 units, under the
// 100,000 a rule may cost; each evaluation costs 61,711.
func literalSquare() string {
	nums := make([]string, 100)
	for i := range nums {
		nums[i] = fmt.Sprint(i)
	}
	l := "[" + strings.Join(nums, ",") + "]"
	return l + ".all(i, " + l + ".all(j, i != j || i == j))"
}

// Costs are estimated when a rule compiles, with the claims' assumed sizes (64 claims,
// values of at most 1,024 characters or entries); a rule whose worst case passes
// 100,000 units is refused naming the rule and the estimate (issue 23 #1). Before, the
// nested comprehensions compiled and each evaluation ran into the runtime limit.
func TestRuleCostIsEstimatedWhenItCompiles(t *testing.T) {
	env, err := cel.NewEnv(cel.Variable("claims", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		expr string
		want uint64
	}{
		{"claims.email.endsWith('@example.com')", 4},
		{"'admins' in claims.groups", 1026},
		{"claims.groups.exists(g, g.startsWith('team-'))", 6147},
		{literalSquare(), 91411},
		{"claims.groups.all(a, claims.groups.all(b, a != b || a == b))", 223352835},
	} {
		ast, issues := env.Compile(tc.expr)
		if issues.Err() != nil {
			t.Fatal(issues.Err())
		}
		if got, err := estimatedCost(env, ast); err != nil || got != tc.want {
			t.Errorf("estimated cost of %.60s = %d (%v), want %d", tc.expr, got, err, tc.want)
		}
	}

	rules := func(when string) *adapterconfig.Authorization {
		return &adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{
			{Tools: []string{"a"}, When: "claims.sub != ''"},
			{Tools: []string{"*"}, When: when},
		}}
	}
	if _, err := CompileRules(rules(literalSquare())); err != nil {
		t.Errorf("a rule estimated at 91,411 units was refused: %v", err)
	}
	_, err = CompileRules(rules("claims.groups.all(a, claims.groups.all(b, a != b || a == b))"))
	if err == nil {
		t.Fatal("nested comprehensions over the claims compiled")
	}
	for _, want := range []string{"authorization rule 2", "estimated cost is up to 223352835 units", "more than the 100000"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}

// A budget bounds the CEL work of a batch of decisions: once spent, rules with an
// expression do not allow and the decision says it is not complete (issue 23 #1).
func TestBudgetBoundsTheCELWorkOfABatch(t *testing.T) {
	rules, err := CompileRules(&adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{
		{Tools: []string{"*"}, When: literalSquare()},
		{Tools: []string{"free"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	caller := &Caller{Subject: "alice"}

	one := NewBudget(1 << 40)
	if ok, complete := rules.AllowsKindWithin(caller, ItemTool, "t", one); !ok || !complete {
		t.Fatalf("one evaluation: allowed %v complete %v", ok, complete)
	}
	const perEvaluation = 61711
	if spent := uint64(1<<40) - one.left; spent != perEvaluation {
		t.Fatalf("one evaluation cost %d units, want %d", spent, perEvaluation)
	}

	budget := NewBudget(1_000_000)
	decided := 0
	for i := range 40 {
		ok, complete := rules.AllowsKindWithin(caller, ItemTool, fmt.Sprint("t", i), budget)
		if !complete {
			if ok {
				t.Fatal("an undecided item was allowed")
			}
			break
		}
		decided++
	}
	// 16 evaluations leave 12,624 units, so a 17th starts; then none.
	if want := 1_000_000/perEvaluation + 1; decided != want || !budget.Cut() {
		t.Errorf("decided %d items within 1,000,000 units (cut %v), want %d", decided, budget.Cut(), want)
	}
	if ok, complete := rules.AllowsKindWithin(caller, ItemTool, "free", budget); !ok || !complete {
		t.Errorf("a rule without an expression needs no budget: allowed %v complete %v", ok, complete)
	}
	if ok, _ := rules.AllowsKindWithin(caller, ItemTool, "t", nil); !ok {
		t.Error("without a budget the rule does not allow")
	}
}
