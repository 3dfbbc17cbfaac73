package access

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
)

// What the cost estimator assumes of a token's claims, as Kubernetes assumes sizes for
// CRD validation rules: a rule whose worst case under these sizes costs more than
// maxRuleCost is refused when it compiles. Tokens are not checked against them; the
// runtime limit still stops one evaluation at maxRuleCost.
const (
	// maxClaims is the most entries the claims map is assumed to hold.
	maxClaims = 64
	// maxClaimSize is the assumed size of any value within the claims: characters of a
	// string (1 KiB), or entries of a list or map.
	maxClaimSize = 1024
)

// claimsSizes gives the checker's cost estimator the sizes above.
type claimsSizes struct{}

func (claimsSizes) EstimateSize(node checker.AstNode) *checker.SizeEstimate {
	path := node.Path()
	if len(path) == 0 || path[0] != "claims" {
		return nil
	}
	if len(path) == 1 {
		return &checker.SizeEstimate{Min: 0, Max: maxClaims}
	}
	return &checker.SizeEstimate{Min: 0, Max: maxClaimSize}
}

func (claimsSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// estimatedCost is the most an expression can cost under the assumed claim sizes.
func estimatedCost(env *cel.Env, ast *cel.Ast) (uint64, error) {
	est, err := env.EstimateCost(ast, claimsSizes{})
	if err != nil {
		return 0, fmt.Errorf("estimate its cost: %w", err)
	}
	return est.Max, nil
}

// Budget bounds the CEL work of a batch of decisions, such as one catalog request that
// judges every tool of every server for one caller: once it is spent, expressions are
// no longer evaluated and their rules do not allow (fail closed). Safe for concurrent
// use; a nil Budget is unbounded.
type Budget struct {
	mu   sync.Mutex
	left uint64
	cut  bool
}

// NewBudget returns a budget of units of CEL cost.
func NewBudget(units uint64) *Budget { return &Budget{left: units} }

// take says whether an evaluation may start; it records the cut when not.
func (b *Budget) take() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left == 0 {
		b.cut = true
		return false
	}
	return true
}

// spend charges what an evaluation cost. One evaluation may overrun what is left by at
// most maxRuleCost, the runtime limit of each.
func (b *Budget) spend(details *cel.EvalDetails) {
	if b == nil || details == nil || details.ActualCost() == nil {
		return
	}
	cost := *details.ActualCost()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left -= min(cost, b.left)
}

// Cut says whether some decision was refused because the budget was spent.
func (b *Budget) Cut() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cut
}
