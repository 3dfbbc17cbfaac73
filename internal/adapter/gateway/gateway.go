// Package gateway is the adapter's gateway: the part of the MCP server that re-exports
// the tools of remote MCP servers (RemoteToolImports). It keeps one pooled client
// session per remote (Pool, remote.go), forwards calls and the remote's notifications
// about them (notifications.go), answers the common forwarded call without decoding the
// remote's result (passthrough.go), and lists imported tools exactly as their remote
// defined them (definitions.go).
//
// The server (package adapter) owns what every call gets — authorization, limits,
// metrics, audit, argument validation — and reaches the gateway through Tool, Pool and
// the Server interface of PassThrough.
package gateway

import (
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/callercred"
)

// Tool is one re-exported tool: its served name, its backend and, once a Pool linked
// it, the remote it calls.
type Tool struct {
	Name    string
	Backend *adapterconfig.RemoteBackend
	// Arguments checks a call's arguments against the tool's input schema and returns
	// them as JSON, or the result refusing the call. The server compiles the schemas;
	// the pass-through, which bypasses the server's tool handler, asks it here.
	Arguments func(mcp.CallToolRequest) ([]byte, *mcp.CallToolResult)

	remote *remote
	// paramTool is the remote's definition when its inputSchema marks arguments
	// x-mcp-header, whose values a call of protocol 2026-07-28 mirrors in Mcp-Param-*
	// headers; nil otherwise. Set by Pool.Prepare.
	paramTool *mcp.Tool
	// passesModern says a call of protocol 2026-07-28 may take the pass-through
	// (passesModernOf). Set by Pool.Prepare, so that no call reads the definition.
	passesModern bool
}

// Metrics count the gateway's connects and retries per remote (its URL without the
// query). Re-exported tools count in the server's per-tool series under their served
// name.
type Metrics struct {
	connects *prometheus.CounterVec
	retries  *prometheus.CounterVec
	// listChanges count the list_changed notifications each remote sent the gateway's
	// watch (listchanges.go).
	listChanges *prometheus.CounterVec
	// callerSessions and callerFailures are by import ("namespace/name"), never by
	// caller.
	callerSessions *prometheus.GaugeVec
	callerFailures *prometheus.CounterVec
	// relayed count what remotes asked the gateway's callers during their calls, by
	// import, kind and outcome (relay.go).
	relayed *prometheus.CounterVec
	// tokens count the token exchanges for callers and their cache.
	tokens *callercred.Metrics
}

// NewMetrics returns the gateway's metrics, to be registered with Collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		connects: counterVec("cantus_adapter_remote_connects_total",
			"Client sessions the adapter tried to open to remote MCP servers (re-exported tools), by remote and outcome.", "remote", "outcome"),
		retries: counterVec("cantus_adapter_remote_call_retries_total",
			"Calls of re-exported tools retried on a new session because the remote provably had not processed them, by remote.", "remote"),
		listChanges: counterVec("cantus_adapter_remote_list_changes_total",
			"Notifications that a list changed which remote MCP servers sent the gateway, by remote; each kind is passed on to callers at most once per 500 ms per remote.", "remote"),
		callerSessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cantus_adapter_caller_sessions",
			Help: "Callers whose own credential and session the gateway keeps for an import with callerCredentials, by import.",
		}, []string{"import"}),
		callerFailures: counterVec("cantus_adapter_caller_credential_failures_total",
			"Calls refused before reaching the remote because the caller's own credential could not be had, by import and code.", "import", "code"),
		relayed: counterVec("cantus_adapter_relayed_requests_total",
			"Requests remote MCP servers made of the gateway's callers during their calls, by import, kind (elicitation, sampling, roots, other) and outcome: asked (passed on to the caller) or refused (the import does not relay the kind, or the caller cannot be asked).",
			"import", "kind", "outcome"),
		tokens: callercred.NewMetrics(),
	}
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.connects, m.retries, m.listChanges, m.callerSessions, m.callerFailures, m.relayed}, m.tokens.Collectors()...)
}

// track creates a remote's series, so a rate() over a quiet remote reads 0, not absent.
func (m *Metrics) track(remote string) {
	m.connects.WithLabelValues(remote, "succeeded")
	m.connects.WithLabelValues(remote, "failed")
	m.retries.WithLabelValues(remote)
	m.listChanges.WithLabelValues(remote)
}

// Outcomes of a remote's request of a caller (Metrics.relayed).
const (
	relayAsked   = "asked"
	relayRefused = "refused"
)

// trackRelay creates the series of what backend's import relays, so that a rate() over
// a quiet import reads 0, not absent.
func (m *Metrics) trackRelay(backend *adapterconfig.RemoteBackend) {
	for _, kind := range backend.Relay {
		m.relayed.WithLabelValues(backend.Import, kind, relayAsked)
		m.relayed.WithLabelValues(backend.Import, kind, relayRefused)
	}
}

// countRelayed counts a request of method a remote of import made of a caller.
func (m *Metrics) countRelayed(importRef, method, outcome string) {
	kind, ok := relayedMethods[method]
	if !ok {
		kind = "other"
	}
	m.relayed.WithLabelValues(importRef, kind, outcome).Inc()
}
