// Package adapter is the MCP server that runs in every SkillServer pod (and in the
// manager process under the local runtime). It serves the tools of one rendered Config.
package adapter

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapter/content"
	"github.com/cantus-dev/cantus-operator/internal/adapter/eventstore"
	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/adapter/subscribe"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/listing"
	"github.com/cantus-dev/cantus-operator/internal/memory"
)

// Defaults of the shutdown options.
const (
	DefaultShutdownGrace = 25 * time.Second
	DefaultDrainDelay    = time.Duration(0)
)

// Option configures a Server.
type Option func(*options)

type options struct {
	shutdownGrace time.Duration
	drainDelay    time.Duration
	logger        logr.Logger
	bearerToken   *string
	// bodyReadTimeout bounds reading one POST body; tests shorten it.
	bodyReadTimeout time.Duration
	// calls overrides the call limits; tests make them small.
	calls *admission.CallLimiter
	// listenStreams overrides admission.MaxListenStreams; tests make it small.
	listenStreams int
}

// withListenStreams bounds the listen streams the server keeps open (tests).
func withListenStreams(n int) Option {
	return func(o *options) { o.listenStreams = n }
}

// WithShutdownGrace bounds how long shutdown may take from the moment it begins: the
// drain delay and the in-flight calls both count against it. Default 25s, under
// Kubernetes' default terminationGracePeriodSeconds of 30.
func WithShutdownGrace(d time.Duration) Option {
	return func(o *options) { o.shutdownGrace = d }
}

// WithDrainDelay keeps accepting new calls this long after readiness starts failing,
// so that clients routed by not-yet-updated endpoints are still served. Default 0.
func WithDrainDelay(d time.Duration) Option {
	return func(o *options) { o.drainDelay = d }
}

// WithLogger sets the logger. Default logr.Discard().
func WithLogger(l logr.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithBearerToken requires one of these tokens (one per line) on the MCP endpoints and
// overrides Config.BearerTokenFile.
func WithBearerToken(token string) Option {
	return func(o *options) { o.bearerToken = &token }
}

// Server is one adapter: the tools of a Config served over MCP, with health, readiness
// and metrics beside them.
type Server struct {
	// cfg is the config the server started with; Reload changes only its tools.
	cfg adapterconfig.Config
	// eventStore keeps the events of a stateful streamable HTTP server's streams; nil
	// otherwise.
	eventStore *eventstore.Store
	// state is the tool set being served; Reload swaps it.
	state atomic.Pointer[toolSet]
	// content serves what is served besides tools (skills, resources, prompts);
	// Reload swaps its set.
	content *content.Part
	remotes *gateway.Pool
	// declared remembers, on a stateless server, what callers declared at initialize
	// (gateway.Declared); nil on a stateful one, whose sessions hold it.
	declared *gateway.Declared
	// subscriptions relays resource subscriptions to the remotes.
	subscriptions *subscribe.Relay
	mcp           *server.MCPServer
	// reloadMu serializes Reload.
	reloadMu sync.Mutex

	memory  *memory.Store
	opts    options
	log     logr.Logger
	metrics *toolMetrics
	backend *http.Client
	gate    *admission.Gate
	calls   *admission.CallLimiter
	// callers rate-limits each caller's requests; nil without spec.limits.perCaller.
	callers *admission.CallerRates
	// listens bounds the subscriptions/listen streams open, and each caller's share.
	listens *admission.StreamShares
	// refusals keeps refusals from flooding the log.
	refusals *admission.RefusalLog
	handler  http.Handler
	// auth says who calls and what they may call; Reload updates it in place.
	auth *access.Authenticator
	// filter lets in the callers auth accepts and cuts their lists.
	filter *admission.Filter
	// found are the tools find_tools found for each session (Search mode).
	found *foundTools

	// sse is set for the sse transport; its streams carry the answers to calls, so
	// shutdown closes them only after the calls are done.
	sse        *server.SSEServer
	streamable *server.StreamableHTTPServer

	drain   drain
	serving atomic.Bool

	// streamsCtx is the parent of every long-lived stream (GET /mcp, GET /sse,
	// subscriptions/listen); cancelling it ends them so http.Server.Shutdown can finish.
	streamsCtx context.Context
	endStreams context.CancelFunc
}

// NewServer validates cfg and builds a Server, compiling schemas and parsing templates
// once.
func NewServer(cfg *adapterconfig.Config, opts ...Option) (*Server, error) {
	tools, err := compileConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("invalid adapter config: %w", err)
	}
	set, err := content.Load(cfg)
	if err != nil {
		return nil, fmt.Errorf("adapter config content: %w", err)
	}
	o := options{
		shutdownGrace: DefaultShutdownGrace,
		drainDelay:    DefaultDrainDelay,
		logger:        logr.Discard(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.shutdownGrace <= 0 {
		return nil, fmt.Errorf("shutdown grace %s must be greater than 0", o.shutdownGrace)
	}
	if o.drainDelay < 0 {
		return nil, fmt.Errorf("drain delay %s must not be negative", o.drainDelay)
	}
	auth, err := access.New(authSettings(cfg, o))
	if err != nil {
		return nil, err
	}

	search, err := buildSearch(cfg, set)
	if err != nil {
		return nil, fmt.Errorf("tool search: %w", err)
	}
	names := toolNamesOf(tools)
	if cfg.Memory != nil {
		names = append(names, cfg.Memory.ToolName)
	}
	names = append(names, metaToolNames(cfg)...)
	s := &Server{
		cfg:      *cfg,
		opts:     o,
		log:      o.logger.WithValues("server", cfg.Server.Name),
		metrics:  newToolMetrics(names),
		backend:  newBackendClient(),
		gate:     admission.NewGate(),
		calls:    admission.CallLimiterFor(cfg.Limits),
		callers:  admission.NewCallerRates(admission.PerCallerOf(cfg.Limits)),
		auth:     auth,
		refusals: new(admission.RefusalLog),
	}
	s.filter = admission.NewFilter(auth, s.log, s.refusals, mcpEndpoint(cfg.Transport))
	if o.calls != nil {
		s.calls = o.calls
	}
	share := admission.CallerShareOf(cfg.Limits)
	s.listens = admission.NewStreamShares(cmp.Or(o.listenStreams, admission.MaxListenStreams), share)
	s.remotes = gateway.NewPool(s.log, s.metrics.gateway, !cfg.Stateless)
	s.remotes.Answers().SetReplicas(cfg.Replicas)
	if cfg.Stateless && cfg.Transport != adapterconfig.TransportSSE {
		s.declared = gateway.NewDeclared()
	}
	s.remotes.LimitCallerShare(share)
	if err := s.remotes.UseRequestStateKeyFile(cfg.RequestStateKeyFile); err != nil {
		return nil, err
	}
	linked, err := s.remotes.PrepareAll(gatewayToolsOf(tools), set.ImportedItems())
	if err != nil {
		return nil, fmt.Errorf("remote tools: %w", err)
	}
	if cfg.Memory != nil {
		if s.memory, err = openMemory(cfg.Memory); err != nil {
			return nil, err
		}
	}
	s.remotes.Commit(linked)
	ts := newToolSet(tools, cfg.Withheld)
	ts.search = search
	s.state.Store(ts)
	set.ReportLeftOut(s.log, s.metrics.imageSkillsLeftOut)
	s.streamsCtx, s.endStreams = context.WithCancel(context.Background())
	s.subscriptions = subscribe.NewRelay(&s.cfg, s.log, s.refusals, share,
		subscribe.NotifySession(func() *server.MCPServer { return s.mcp }), subscriptionContent(s))
	s.content = content.New(set, content.Deps{
		Config: &s.cfg, Filter: s.filter, Log: s.log, Subscriptions: s.subscriptions,
		PostToBackend: s.postToBackend, Streamable: func() bool { return s.streamable != nil },
	})
	s.found = newFoundTools()
	s.mcp = s.newMCPServer()
	s.handler = s.buildHandler(s.mcp)
	// A remote's list change goes to every session with a stream and to the listen
	// streams that asked for that kind (mcp-go keeps off them a kind the server does
	// not declare): see gateway/listchanges.go.
	s.remotes.OnListChanged(func(method string) { s.mcp.SendNotificationToAllClients(method, nil) })
	return s, nil
}

// toolSet is the tools one config serves, besides the memory tool.
type toolSet struct {
	tools  []*compiledTool // config order
	byName map[string]*compiledTool
	// defs are the imported tools' tools/list entries, as their remotes defined them;
	// modernDefs those listed to callers of protocol 2026-07-28 (defs where no remote
	// defines a tool otherwise in that era).
	defs, modernDefs gateway.Definitions
	// remote is true when a tool forwards to a remote.
	remote bool
	// withheld maps the tools withheld until their definitions are approved to the
	// answer a call to one gets; they are never listed.
	withheld map[string]string
	// search is Search mode's index and meta-tools; nil when every tool is listed.
	search *searchSet
}

func newToolSet(tools []*compiledTool, withheld []adapterconfig.WithheldTool) *toolSet {
	remotes := gatewayToolsOf(tools)
	set := &toolSet{tools: tools, byName: make(map[string]*compiledTool, len(tools)), defs: gateway.DefinitionsOf(remotes), remote: len(remotes) > 0}
	set.modernDefs = gateway.ModernDefinitionsOf(remotes, set.defs)
	for _, t := range tools {
		set.byName[t.Name] = t
	}
	if len(withheld) > 0 {
		set.withheld = make(map[string]string, len(withheld))
		for _, w := range withheld {
			set.withheld[w.Name] = w.Reason
		}
	}
	return set
}

func toolNamesOf(tools []*compiledTool) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return names
}

// ToolNames returns the names of the served tools, in config order, the memory tool last.
func (s *Server) ToolNames() []string {
	names := toolNamesOf(s.state.Load().tools)
	if s.memory != nil {
		names = append(names, s.memory.ToolName())
	}
	return names
}

// Handler returns the adapter's routes: the MCP endpoint(s), /healthz and /readyz.
// /metrics is not among them: it names every tool, also those tools/list hides from a
// caller, so it is served on a port of its own (MetricsHandler) that the Service does
// not expose.
func (s *Server) Handler() http.Handler { return s.handler }

// MetricsHandler serves /metrics, to be mounted on the metrics port only.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(adapterconfig.PathMetrics, s.metrics.handler())
	return mux
}

func (s *Server) newMCPServer() *server.MCPServer {
	opts := []server.ServerOption{
		// listChanged: Reload tells connected sessions when the tool list changes.
		server.WithToolCapabilities(true),
		server.WithLogging(),
		server.WithRecovery(),
		server.WithHooks(s.listHooks()),
	}
	if s.cfg.Server.Instructions != "" {
		opts = append(opts, server.WithInstructions(s.cfg.Server.Instructions))
	}
	opts = append(opts, s.content.Options()...)
	if servesTasks(&s.cfg) {
		exts := s.content.Extensions()
		if exts == nil {
			exts = map[string]any{}
		}
		exts[gateway.ExtensionTasks] = map[string]any{}
		opts = append(opts, server.WithExtensions(exts))
	}
	m := server.NewMCPServer(s.cfg.Server.Name, s.cfg.Server.Version, opts...)
	if entries := s.serverTools(s.state.Load()); len(entries) > 0 {
		m.AddTools(entries...)
	}
	s.content.Register(m)
	return m
}

// serverTools are the entries of set (and the memory tool) for mcp-go. Handlers look
// their tool up by name in the current set at call time, so a reload that changes
// only backends needs no new entries.
func (s *Server) serverTools(set *toolSet) []server.ServerTool {
	entries := make([]server.ServerTool, 0, len(set.tools)+1)
	for _, t := range set.tools {
		entries = append(entries, server.ServerTool{Tool: listing.Tool(&t.Tool), Handler: s.toolHandler(t.Name)})
	}
	for _, name := range slices.Sorted(maps.Keys(set.withheld)) {
		// Registered so that a call gets the reason, not "tool not found"; the list
		// hook keeps them out of every tools/list.
		entries = append(entries, server.ServerTool{Tool: mcp.Tool{Name: name, RawInputSchema: json.RawMessage(`{"type":"object"}`)}, Handler: s.withheldHandler(name)})
	}
	if s.memory != nil {
		entries = append(entries, s.memoryTool())
	}
	if set.search != nil {
		entries = append(entries, s.metaTools(set.search)...)
	}
	return entries
}

// withheldHandler answers a call of a tool withheld until its definition is approved,
// with the reason the current config gives (or as unknown once it is no longer withheld
// and not yet re-registered).
func (s *Server) withheldHandler(name string) server.ToolHandlerFunc {
	return func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caller, _ := access.CallerFrom(ctx)
		if !s.auth.Allows(caller, name) {
			return notAllowed(name), nil
		}
		reason, ok := s.state.Load().withheld[name]
		if !ok {
			reason = fmt.Sprintf("tool %q is no longer served: the adapter config was reloaded; list the tools again", name)
		}
		result := mcp.NewToolResultError(reason)
		s.filter.LogCall(caller, name, jsonrpc.OutcomeRefused, result, 0)
		return result, nil
	}
}

// listedTools leaves the withheld tools out of a tools/list answer.
func (s *Server) listedTools(tools []mcp.Tool) []mcp.Tool {
	withheld := s.state.Load().withheld
	if len(withheld) == 0 {
		return tools
	}
	listed := make([]mcp.Tool, 0, len(tools))
	for _, t := range tools {
		if _, hidden := withheld[t.Name]; !hidden {
			listed = append(listed, t)
		}
	}
	return listed
}

// listedToCaller leaves out of a tools/list answer the imported tools the caller
// could not use: those its remote lists only in the other protocol era, and those its
// remote lists only to clients able to answer what the gateway cannot ask this caller
// (gateway.Tool.ListedTo).
func (set *toolSet) listedToCaller(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if !set.remote {
		return tools
	}
	listed := make([]mcp.Tool, 0, len(tools))
	for _, t := range tools {
		if ct := set.byName[t.Name]; ct != nil && ct.gateway != nil && !ct.gateway.ListedTo(ctx) {
			continue
		}
		listed = append(listed, t)
	}
	return listed
}

// toolHandler serves a call of a configured tool, looked up in the current set at call
// time.
func (s *Server) toolHandler(name string) server.ToolHandlerFunc {
	return s.serveCall(name, func(ctx context.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
		if t := s.state.Load().byName[name]; t != nil {
			return s.callTool(ctx, t, req)
		}
		// Listed just before a reload removed it.
		return mcp.NewToolResultError(fmt.Sprintf("tool %q is no longer served: the adapter config was reloaded; list the tools again", name))
	})
}

// serveCall wraps a call with what every tool gets: authorization, in-flight tracking
// (so shutdown waits for it even on the sse transport, whose POST is answered before the
// call runs), the call limit, metrics and the audit line.
func (s *Server) serveCall(name string, run func(context.Context, mcp.CallToolRequest) *mcp.CallToolResult) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if !s.state.Load().remote {
			return s.runCall(ctx, name, func(ctx context.Context) *mcp.CallToolResult { return run(ctx, req) }), nil
		}
		// A forwarded call may have to be answered with a JSON-RPC error (a caller who
		// must connect an account: gateway.CallFailure).
		ctx, failure := gateway.WithCallFailure(ctx)
		result := s.runCall(ctx, name, func(ctx context.Context) *mcp.CallToolResult { return run(ctx, req) })
		if err := failure.Err(); err != nil {
			return nil, err
		}
		return result, nil
	}
}

// runCall is serveCall's work, shared with the calls a gateway passes through.
func (s *Server) runCall(ctx context.Context, name string, run func(context.Context) *mcp.CallToolResult) *mcp.CallToolResult {
	defer s.gate.Hold(ctx).Release()
	caller, _ := access.CallerFrom(ctx)
	if !s.isMetaTool(name) && !s.auth.Allows(caller, name) {
		s.metrics.observeRefusal(name)
		s.filter.LogCall(caller, name, jsonrpc.OutcomeRefused, nil, 0)
		refused := notAllowed(name)
		traceCall(ctx, caller, jsonrpc.OutcomeRefused, refused)
		return refused
	}
	if refused, reason := s.calls.Acquire(ctx); refused != nil {
		s.metrics.observeRejection(reason)
		s.filter.LogCall(caller, name, jsonrpc.OutcomeBusy, refused, 0)
		traceCall(ctx, caller, jsonrpc.OutcomeBusy, refused)
		return refused
	}
	defer s.calls.Release()
	start := time.Now()
	result := run(ctx)
	took := time.Since(start)
	s.metrics.observeCall(name, result.IsError, took)
	outcome := jsonrpc.OutcomeOK
	if result.IsError {
		outcome = jsonrpc.OutcomeError
	}
	s.filter.LogCall(caller, name, outcome, result, took)
	traceCall(ctx, caller, outcome, result)
	return result
}

// listHooks filter every tools/list answer down to what its caller may call. A hook,
// not mcp-go's tool filter: that filter also runs before a call and would answer a
// refused call "tool not found" before serveCall can say why and audit it.
func (s *Server) listHooks() *server.Hooks {
	hooks := &server.Hooks{}
	hooks.AddOnError(traceError)
	hooks.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, result *mcp.ListToolsResult) {
		result.Tools = s.listedInMode(ctx, s.state.Load().listedToCaller(ctx, s.listedTools(result.Tools)))
	})
	if s.declared != nil {
		hooks.AddAfterInitialize(func(ctx context.Context, _ any, req *mcp.InitializeRequest, _ *mcp.InitializeResult) {
			s.declared.Remember(ctx, req.Params.Capabilities)
		})
	}
	if sessionsBound(&s.cfg) {
		// A session that ended (DELETE, a closed sse stream, mcp-go's idle sweep) ends
		// its upstream sessions.
		hooks.AddOnUnregisterSession(func(_ context.Context, session server.ClientSession) {
			s.remotes.EndSession(session.SessionID())
		})
		// The level a session asks for goes to its own upstream sessions.
		hooks.AddAfterSetLevel(func(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
			if session := server.ClientSessionFromContext(ctx); session != nil {
				s.remotes.SetSessionLogLevel(session.SessionID(), string(req.Params.Level))
			}
		})
		// Every answer on a session comes as an event stream, as remotes on the
		// official SDKs answer: each event has an id in the session's event store, so a
		// client whose connection broke resumes with Last-Event-ID, and several POSTs
		// are several streams (SEP-1699). A gateway thereby answers as its remotes do.
		hooks.AddOnRegisterSession(func(_ context.Context, session server.ClientSession) {
			if streamable, ok := session.(server.SessionWithStreamableHTTPConfig); ok {
				streamable.UpgradeToSSEWhenReceiveNotification()
			}
		})
	}
	s.content.Hooks(hooks)
	s.subscriptions.Hooks(hooks)
	return hooks
}

func (s *Server) buildHandler(m *server.MCPServer) http.Handler {
	mux := http.NewServeMux()
	protect := func(h http.Handler) http.Handler {
		// Traced after authentication: an unauthenticated request is refused before its
		// body is read, as it is without tracing.
		gated := s.gateMCP(h)
		if sessionsBound(&s.cfg) {
			gated = bindSessions(gated, s.log)
		}
		return s.filter.RequireCaller(s.routeMetaCalls(s.traceMCP(gated)))
	}
	transportLog := slog.New(logr.ToSlogHandler(s.log.WithName("mcp")))
	switch s.cfg.Transport {
	case adapterconfig.TransportSSE:
		// No base URL: the advertised message endpoint is then the relative
		// "/message?sessionId=…", which clients resolve against the URL they reached
		// /sse on, whatever host and port that was.
		s.sse = server.NewSSEServer(m,
			server.WithSSEContextFunc(s.requestContext),
			server.WithSSEEndpoint(adapterconfig.PathSSE),
			server.WithMessageEndpoint(adapterconfig.PathMessage),
			server.WithUseFullURLForMessageEndpoint(false),
			server.WithSessionIDGenerator(newSSESessionID),
		)
		mux.Handle(adapterconfig.PathSSE, protect(s.sse))
		mux.Handle(adapterconfig.PathMessage, protect(s.sse))
	default:
		opts := []server.StreamableHTTPOption{
			server.WithHTTPContextFunc(s.requestContext),
			server.WithEndpointPath(adapterconfig.PathMCP),
			server.WithStateLess(s.cfg.Stateless),
			server.WithStreamableHTTPLogger(transportLog),
		}
		if !s.cfg.Stateless {
			// Session ids name their owner (sessions.go); applied after
			// WithStateLess, which would otherwise replace it.
			opts = append(opts, server.WithSessionIdManagerResolver(boundSessionIDs{terminated: newTerminatedSessions()}))
			// Resumable streams: a client whose connection broke resumes with
			// Last-Event-ID; the store is bounded, since a session a client abandons
			// without DELETE keeps recording.
			s.eventStore = eventstore.New(eventstore.Limits{})
			opts = append(opts, server.WithEventStore(s.eventStore))
		}
		s.streamable = server.NewStreamableHTTPServer(m, opts...)
		mux.Handle(adapterconfig.PathMCP, protect(s.streamable))
	}
	mux.HandleFunc(adapterconfig.PathProtectedResource, s.filter.ServeProtectedResource)
	mux.HandleFunc(adapterconfig.PathHealthz, serveHealthz)
	mux.HandleFunc(adapterconfig.PathReadyz, s.drain.serveReadyz)
	return mux
}

func serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}

// mcpEndpoint is the path MCP clients connect to over transport.
func mcpEndpoint(transport string) string {
	if transport == adapterconfig.TransportSSE {
		return adapterconfig.PathSSE
	}
	return adapterconfig.PathMCP
}
