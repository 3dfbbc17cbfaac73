package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Filter is the auth filter in front of the MCP endpoints: it lets in only callers the
// authenticator accepts, and cuts the lists to what each caller may see.
type Filter struct {
	auth     *access.Authenticator
	log      logr.Logger
	refusals *RefusalLog
	// endpoint is the MCP endpoint the protected resource metadata names.
	endpoint string
}

// NewFilter is the filter of auth on a server whose MCP endpoint is endpoint; refusals
// keeps its notes from flooding log.
func NewFilter(auth *access.Authenticator, log logr.Logger, refusals *RefusalLog, endpoint string) *Filter {
	return &Filter{auth: auth, log: log, refusals: refusals, endpoint: endpoint}
}

// RequireCaller lets a request through only with a token the authenticator accepts, and
// hands the caller to the tool handlers in the request's context.
func (f *Filter) RequireCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !f.auth.Enabled() {
			next.ServeHTTP(w, r)
			return
		}
		caller, err := f.auth.Authenticate(r)
		if err != nil {
			f.refuseUnauthenticated(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(access.WithCaller(r.Context(), caller)))
	})
}

// refuseUnauthenticated answers 401 and points OAuth-capable MCP clients at the
// protected resource metadata, which names the issuers they can get a token from.
func (f *Filter) refuseUnauthenticated(w http.ResponseWriter, r *http.Request, err error) {
	challenge := fmt.Sprintf(`Bearer resource_metadata=%q`, baseURL(r)+adapterconfig.PathProtectedResource)
	say := "unauthorized: send Authorization: Bearer <token>"
	if errors.Is(err, access.ErrInvalidToken) {
		challenge += `, error="invalid_token"`
		// Why stays in the log: the caller learns only that this token does not open
		// the server, not which check it failed.
		say = "unauthorized: the bearer token was refused (another audience, expired, unknown, or revoked)"
		f.log.V(1).Info("refused a bearer token", "reason", err.Error())
	}
	w.Header().Set("WWW-Authenticate", challenge)
	http.Error(w, say, http.StatusUnauthorized)
}

// ServeProtectedResource describes this server to OAuth clients (RFC 9728); without
// auth there is nothing to describe.
func (f *Filter) ServeProtectedResource(w http.ResponseWriter, r *http.Request) {
	if !f.auth.Enabled() {
		http.NotFound(w, r)
		return
	}
	doc := map[string]any{
		"resource":                 baseURL(r) + f.endpoint,
		"bearer_methods_supported": []string{"header"},
	}
	if servers := f.auth.AuthorizationServers(); len(servers) > 0 {
		doc["authorization_servers"] = servers
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

// baseURL is the scheme and host the client reached this server by.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// ListCELBudget is the CEL cost one request may spend on the rules, as a catalog
// Request may (internal/catalog): past it, rules with an expression no longer allow
// (a list leaves the items left out). A request carries its budget in its context
// (WithCELBudget); a list without one gets its own.
const ListCELBudget = 1_000_000

type celBudgetKey struct{}

// WithCELBudget is ctx carrying a fresh per-request CEL budget.
func WithCELBudget(ctx context.Context) context.Context {
	return context.WithValue(ctx, celBudgetKey{}, access.NewBudget(ListCELBudget))
}

// CELBudgetFrom is the budget of ctx's request; nil (unbounded) without one.
func CELBudgetFrom(ctx context.Context) *access.Budget {
	b, _ := ctx.Value(celBudgetKey{}).(*access.Budget)
	return b
}

// ListBudget is the budget a list spends: its request's, or its own.
func ListBudget(ctx context.Context) *access.Budget {
	if b := CELBudgetFrom(ctx); b != nil {
		return b
	}
	return access.NewBudget(ListCELBudget)
}

// VisibleTools keeps the tools the request's caller may call; it runs on every
// tools/list answer, spending at most ListCELBudget on the rules (past it, the tools
// left are not listed: fail closed).
func (f *Filter) VisibleTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	return Visible(ctx, f, "tools/list", tools, func(t mcp.Tool) (access.ItemKind, string) { return access.ItemTool, t.Name })
}

// NoteCutList logs, at most once per caller per RefusalLogEvery, that a list left
// items out because its CEL budget ran out.
func (f *Filter) NoteCutList(caller *access.Caller, budget *access.Budget, method string) {
	if budget.Cut() {
		f.refusals.Note(f.log, "list\x00"+caller.String(), time.Now(),
			"a list answer left items out: the rules' CEL work for one request ran out of its budget", "method", method, "budget", ListCELBudget)
	}
}

// Visible keeps the items the request's caller may use, spending at most
// ListCELBudget on the rules (past it, the items left are not listed: fail closed).
func Visible[T any](ctx context.Context, f *Filter, method string, items []T, item func(T) (access.ItemKind, string)) []T {
	if !f.auth.HasRules() {
		return items
	}
	caller, _ := access.CallerFrom(ctx)
	budget := ListBudget(ctx)
	out := items[:0:0]
	for _, it := range items {
		if kind, name := item(it); f.auth.AllowsKindWithin(caller, kind, name, budget) {
			out = append(out, it)
		}
	}
	f.NoteCutList(caller, budget, method)
	return out
}

// Allows says whether the request's caller may use the item, spending the request's
// CEL budget (WithCELBudget), so that a request judging many items (skills/list) is
// bounded as the list hooks are.
func (f *Filter) Allows(ctx context.Context, kind access.ItemKind, name string) bool {
	if !f.auth.HasRules() {
		return true
	}
	caller, _ := access.CallerFrom(ctx)
	return f.auth.AllowsKindWithin(caller, kind, name, CELBudgetFrom(ctx))
}

// LogRead writes the audit line of a read or get when callers authenticate.
func (f *Filter) LogRead(ctx context.Context, method, what, outcome string) {
	if !f.auth.Enabled() {
		return
	}
	caller, _ := access.CallerFrom(ctx)
	f.log.Info("read", "caller", caller.String(), "method", method, "target", what, "outcome", outcome)
}

// LogCall writes the audit line of a call when callers authenticate — caller, tool,
// outcome and latency, never arguments or tokens — and otherwise the call's debug line.
func (f *Filter) LogCall(caller *access.Caller, tool, outcome string, result *mcp.CallToolResult, took time.Duration) {
	if f.auth.Enabled() {
		f.log.Info("tool call", "caller", caller.String(), "tool", tool, "outcome", outcome, "latencyMs", took.Milliseconds())
		return
	}
	// Guarded: the arguments would be built even for a disabled level.
	if outcome == jsonrpc.OutcomeError {
		if l := f.log.V(1); l.Enabled() {
			l.Info("tool call failed", "tool", tool, "duration", took.String(), "error", strings.TrimSpace(jsonrpc.ResultText(result)))
		}
	} else if l := f.log.V(2); l.Enabled() {
		l.Info("tool call succeeded", "tool", tool, "duration", took.String())
	}
}
