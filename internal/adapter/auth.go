package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// authSettings are what the config and options say about callers: WithBearerToken's
// tokens replace the config's token file.
func authSettings(cfg *adapterconfig.Config, o options) access.Settings {
	s := access.Settings{BearerTokenFile: cfg.BearerTokenFile, Auth: cfg.Auth}
	if o.bearerToken != nil {
		s.BearerTokens = []string{*o.bearerToken}
	}
	return s
}

// requireCaller lets a request through only with a token the authenticator accepts, and
// hands the caller to the tool handlers in the request's context.
func (s *Server) requireCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.auth.Enabled() {
			next.ServeHTTP(w, r)
			return
		}
		caller, err := s.auth.Authenticate(r)
		if err != nil {
			s.refuseUnauthenticated(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(access.WithCaller(r.Context(), caller)))
	})
}

// refuseUnauthenticated answers 401 and points OAuth-capable MCP clients at the
// protected resource metadata, which names the issuers they can get a token from.
func (s *Server) refuseUnauthenticated(w http.ResponseWriter, r *http.Request, err error) {
	challenge := fmt.Sprintf(`Bearer resource_metadata=%q`, baseURL(r)+adapterconfig.PathProtectedResource)
	say := "unauthorized: send Authorization: Bearer <token>"
	if errors.Is(err, access.ErrInvalidToken) {
		challenge += `, error="invalid_token"`
		// Why stays in the log: the caller learns only that this token does not open
		// the server, not which check it failed.
		say = "unauthorized: the bearer token was refused (another audience, expired, unknown, or revoked)"
		s.log.V(1).Info("refused a bearer token", "reason", err.Error())
	}
	w.Header().Set("WWW-Authenticate", challenge)
	http.Error(w, say, http.StatusUnauthorized)
}

// serveProtectedResource describes this server to OAuth clients (RFC 9728); without
// auth there is nothing to describe.
func (s *Server) serveProtectedResource(w http.ResponseWriter, r *http.Request) {
	if !s.auth.Enabled() {
		http.NotFound(w, r)
		return
	}
	endpoint := adapterconfig.PathMCP
	if s.cfg.Transport == adapterconfig.TransportSSE {
		endpoint = adapterconfig.PathSSE
	}
	doc := map[string]any{
		"resource":                 baseURL(r) + endpoint,
		"bearer_methods_supported": []string{"header"},
	}
	if servers := s.auth.AuthorizationServers(); len(servers) > 0 {
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

// listCELBudget is the CEL cost one request may spend on the rules, as a catalog
// request may (internal/catalog): past it, rules with an expression no longer allow
// (a list leaves the items left out). A request carries its budget in its context
// (withCELBudget); a list without one gets its own.
const listCELBudget = 1_000_000

type celBudgetKey struct{}

// withCELBudget is ctx carrying a fresh per-request CEL budget.
func withCELBudget(ctx context.Context) context.Context {
	return context.WithValue(ctx, celBudgetKey{}, access.NewBudget(listCELBudget))
}

// celBudgetFrom is the budget of ctx's request; nil (unbounded) without one.
func celBudgetFrom(ctx context.Context) *access.Budget {
	b, _ := ctx.Value(celBudgetKey{}).(*access.Budget)
	return b
}

// listBudget is the budget a list spends: its request's, or its own.
func listBudget(ctx context.Context) *access.Budget {
	if b := celBudgetFrom(ctx); b != nil {
		return b
	}
	return access.NewBudget(listCELBudget)
}

// visibleTools keeps the tools the request's caller may call; it runs on every
// tools/list answer, spending at most listCELBudget on the rules (past it, the tools
// left are not listed: fail closed).
func (s *Server) visibleTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if !s.auth.HasRules() {
		return tools
	}
	caller, _ := access.CallerFrom(ctx)
	budget := listBudget(ctx)
	visible := tools[:0:0]
	for _, t := range tools {
		if s.auth.AllowsKindWithin(caller, access.ItemTool, t.Name, budget) {
			visible = append(visible, t)
		}
	}
	s.noteCutList(caller, budget, "tools/list")
	return visible
}

// noteCutList logs, at most once per caller per refusalLogEvery, that a list left
// items out because its CEL budget ran out.
func (s *Server) noteCutList(caller *access.Caller, budget *access.Budget, method string) {
	if budget.Cut() {
		s.refusals.note(s.log, "list\x00"+caller.String(), time.Now(),
			"a list answer left items out: the rules' CEL work for one request ran out of its budget", "method", method, "budget", listCELBudget)
	}
}

// Outcomes of a call in the audit log.
const (
	outcomeOK      = "ok"
	outcomeError   = "error"
	outcomeRefused = "refused"
	outcomeBusy    = "busy"
)

// notAllowed is the answer to a call the rules do not allow. It names neither the
// rules nor any other caller.
func notAllowed(tool string) *mcp.CallToolResult {
	return mcp.NewToolResultError(fmt.Sprintf("not_allowed: tool %q is not allowed for this caller; ask the owner of the server for access", tool))
}

// logCall writes the audit line of a call when callers authenticate — caller, tool,
// outcome and latency, never arguments or tokens — and otherwise the call's debug line.
func (s *Server) logCall(caller *access.Caller, tool, outcome string, result *mcp.CallToolResult, took time.Duration) {
	if s.auth.Enabled() {
		s.log.Info("tool call", "caller", caller.String(), "tool", tool, "outcome", outcome, "latencyMs", took.Milliseconds())
		return
	}
	// Guarded: the arguments would be built even for a disabled level.
	if outcome == outcomeError {
		if l := s.log.V(1); l.Enabled() {
			l.Info("tool call failed", "tool", tool, "duration", took.String(), "error", strings.TrimSpace(resultText(result)))
		}
	} else if l := s.log.V(2); l.Enabled() {
		l.Info("tool call succeeded", "tool", tool, "duration", took.String())
	}
}
