package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapter/content"
	"github.com/cantus-dev/cantus-operator/internal/adapter/discovery"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/listing"
)

// Progressive discovery (spec.discovery in Search mode): tools/list answers the pinned
// tools and two meta-tools. The find meta-tool searches an index built here at every
// (re)load from the config — never per session, so a stateless client on any replica
// gets the same answers — and keeps only what the caller may call. The call meta-tool
// is no second way in: routeMetaCalls rewrites its request into a tools/call of the
// real tool before anything else reads it, so the call gets the real tool's span,
// rate, authorization, validation, approval answer, limits, metrics and audit line,
// from the one path every call takes.

// searchSet is what Search mode serves of one config.
type searchSet struct {
	cfg   *adapterconfig.Discovery
	index *discovery.Index
	// readOnly: every tool the call meta-tool can reach says it only reads.
	readOnly bool
}

// buildSearch indexes what cfg serves; nil when cfg lists every tool.
func buildSearch(cfg *adapterconfig.Config, set *content.Set) (*searchSet, error) {
	if !cfg.Searching() {
		return nil, nil
	}
	entries, err := listing.Tools(cfg)
	if err != nil {
		return nil, err
	}
	var skills []discovery.Skill
	for _, sk := range set.IndexedSkills() {
		skills = append(skills, discovery.Skill{Path: sk.Path, URI: sk.URI, Frontmatter: sk.Frontmatter, Body: sk.Body})
	}
	index, err := discovery.Build(entries, skills)
	if err != nil {
		return nil, err
	}
	return &searchSet{cfg: cfg.Discovery, index: index, readOnly: allReadOnly(entries)}, nil
}

// allReadOnly says whether every entry declares readOnlyHint: only then may the call
// meta-tool say it does not change anything, lest hosts skip their confirmation.
func allReadOnly(entries map[string]json.RawMessage) bool {
	for _, e := range entries {
		var t struct {
			Annotations struct {
				ReadOnlyHint *bool `json:"readOnlyHint"`
			} `json:"annotations"`
		}
		if json.Unmarshal(e, &t) != nil || t.Annotations.ReadOnlyHint == nil || !*t.Annotations.ReadOnlyHint {
			return false
		}
	}
	return true
}

// retire closes the index once the searches that started on it are done.
func (set *searchSet) retire() {
	if set != nil {
		set.index.Retire()
	}
}

// close closes the index now.
func (set *searchSet) close() {
	if set != nil {
		_ = set.index.Close() // an in-memory index: nothing to flush
	}
}

// sameSearch says whether a reload leaves the meta-tools' entries as they were.
func sameSearch(a, b *searchSet) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(a.cfg, b.cfg) && a.readOnly == b.readOnly && a.index.Tools() == b.index.Tools()
}

// metaToolNames are the meta-tools' names, for the metrics; none outside Search mode.
func metaToolNames(cfg *adapterconfig.Config) []string {
	if !cfg.Searching() {
		return nil
	}
	return []string{cfg.Discovery.FindToolName, cfg.Discovery.CallToolName}
}

// isMetaTool says whether name is a meta-tool of the current config. Meta-tools are
// for every caller whatever the rules: they find and reach only what the rules allow.
func (s *Server) isMetaTool(name string) bool {
	search := s.state.Load().search
	return search != nil && search.cfg.IsMetaTool(name)
}

// metaTools are the meta-tools' entries for mcp-go.
func (s *Server) metaTools(search *searchSet) []server.ServerTool {
	d := search.cfg
	find := mcp.Tool{
		Name: d.FindToolName,
		// No count of the tools: it would tell a caller how many it may not see.
		Description: fmt.Sprintf("Find the tools for a task among the tools this server serves (only a few are listed). "+
			"Describe the task in a few words; the answer holds the matching tools' full definitions, best first, each with why it matched, "+
			"and the agent skills that use them. Call a found tool with %s {\"name\": ..., \"arguments\": {...}}, or by its name.",
			d.CallToolName),
		RawInputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"query":{"type":"string","minLength":1,"maxLength":%d,"description":"The task, in words: what you need to do."},`+
			`"limit":{"type":"integer","minimum":1,"maximum":%d,"description":"How many tools to answer at most (default %d)."}},`+
			`"required":["query"],"additionalProperties":false}`, discovery.MaxQueryBytes, d.MaxLimit, d.DefaultLimit)),
		Annotations: mcp.ToolAnnotation{Title: "Find tools", ReadOnlyHint: mcp.ToBoolPtr(true), DestructiveHint: mcp.ToBoolPtr(false),
			IdempotentHint: mcp.ToBoolPtr(true), OpenWorldHint: mcp.ToBoolPtr(false)},
	}
	call := mcp.Tool{
		Name: d.CallToolName,
		Description: fmt.Sprintf("Call a tool that %s found, by its name, with the arguments its inputSchema describes. "+
			"It is the tool's own call: the same checks, limits and answer.", d.FindToolName),
		RawInputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"name":{"type":"string","minLength":1,"maxLength":128,"description":"The tool's name, as found."},` +
			`"arguments":{"type":"object","description":"The tool's arguments."}},` +
			`"required":["name"],"additionalProperties":false}`),
		// What it reaches may change or reach out, unless every tool only reads: hosts
		// that confirm such calls must not be bypassed.
		Annotations: mcp.ToolAnnotation{Title: "Call a found tool", ReadOnlyHint: mcp.ToBoolPtr(search.readOnly),
			DestructiveHint: mcp.ToBoolPtr(!search.readOnly), OpenWorldHint: mcp.ToBoolPtr(!search.readOnly)},
	}
	return []server.ServerTool{
		{Tool: find, Handler: s.serveCall(d.FindToolName, s.findTools)},
		{Tool: call, Handler: s.serveCall(d.CallToolName, s.callUnrouted)},
	}
}

// listedInMode keeps, in Search mode, the pinned tools the caller may call, those
// find_tools found for its session, and the meta-tools; otherwise every tool the
// caller may call.
func (s *Server) listedInMode(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	search := s.state.Load().search
	if search == nil {
		return s.filter.VisibleTools(ctx, tools)
	}
	session := sessionOf(ctx, sessionsBound(&s.cfg))
	var meta, pinned []mcp.Tool
	for _, t := range tools {
		switch {
		case search.cfg.IsMetaTool(t.Name):
			meta = append(meta, t)
		case search.cfg.Pins(t.Name), s.found.keep(session, t.Name):
			pinned = append(pinned, t)
		}
	}
	return append(s.filter.VisibleTools(ctx, pinned), meta...)
}

// findAnswer is the find meta-tool's structured content.
type findAnswer struct {
	// Tools are the found tools' definitions, as tools/list would list them.
	Tools   []json.RawMessage      `json:"tools"`
	Matches []findMatch            `json:"matches"`
	Skills  []discovery.FoundSkill `json:"skills,omitempty"`
	Call    string                 `json:"call"`
}

type findMatch struct {
	Name   string  `json:"name"`
	Reason string  `json:"reason"`
	Score  float64 `json:"score"`
}

// findTools answers a search with the tools the caller may call, cut to the limit
// after the caller's rules have judged them.
func (s *Server) findTools(ctx context.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
	set := s.state.Load()
	search := set.search
	if search == nil {
		return mcp.NewToolResultError("tool search is no longer served: the adapter config was reloaded; list the tools again")
	}
	query, limit, refused := findArguments(req, search.cfg)
	if refused != nil {
		return refused
	}
	see := discovery.Visibility{
		Tool: func(name string) bool {
			if _, withheld := set.withheld[name]; withheld {
				return false
			}
			if t := set.byName[name]; t != nil && t.gateway != nil && !t.gateway.ListedTo(ctx) {
				return false // not listed to this caller (its era, or what it can be asked)
			}
			return s.filter.Allows(ctx, access.ItemTool, name)
		},
		Skill: func(path string) bool { return s.filter.Allows(ctx, access.ItemSkill, path) },
	}
	found, err := search.index.Search(query, limit, see)
	if budget := admission.CELBudgetFrom(ctx); budget != nil {
		caller, _ := access.CallerFrom(ctx)
		s.filter.NoteCutList(caller, budget, search.cfg.FindToolName)
	}
	if err != nil {
		return mcp.NewToolResultError(markerInvalidArgs + err.Error())
	}
	answer := findAnswer{Tools: make([]json.RawMessage, 0, len(found.Tools)), Matches: make([]findMatch, 0, len(found.Tools)), Skills: found.Skills,
		Call: fmt.Sprintf(`call a found tool with %s {"name": <its name>, "arguments": {...}}, or by its name`, search.cfg.CallToolName)}
	names := make([]string, 0, len(found.Tools))
	for _, f := range found.Tools {
		answer.Tools = append(answer.Tools, f.Definition)
		answer.Matches = append(answer.Matches, findMatch{Name: f.Name, Reason: f.Reason, Score: f.Score})
		names = append(names, f.Name)
	}
	if s.found.add(sessionOf(ctx, sessionsBound(&s.cfg)), names) {
		if err := announceListChanged(ctx, s.mcp); err != nil {
			s.log.V(1).Info("could not tell the session its tool list changed", "error", err.Error())
		}
	}
	text, err := json.Marshal(answer)
	if err != nil {
		return mcp.NewToolResultError("encode the answer: " + err.Error())
	}
	return mcp.NewToolResultStructured(answer, string(text))
}

// findArguments reads the find meta-tool's query and limit.
func findArguments(req mcp.CallToolRequest, d *adapterconfig.Discovery) (string, int, *mcp.CallToolResult) {
	args := req.GetArguments()
	for k := range args {
		if k != "query" && k != "limit" {
			return "", 0, mcp.NewToolResultError(markerInvalidArgs + fmt.Sprintf("unknown argument %q: %s takes query and limit", k, d.FindToolName))
		}
	}
	query, ok := args["query"].(string)
	if !ok || query == "" {
		return "", 0, mcp.NewToolResultError(markerInvalidArgs + "query is required: a string describing the task")
	}
	limit := d.DefaultLimit
	if raw, given := args["limit"]; given {
		n, isNumber := raw.(float64)
		if !isNumber || n != float64(int(n)) || n < 1 || int(n) > d.MaxLimit {
			return "", 0, mcp.NewToolResultError(markerInvalidArgs + fmt.Sprintf("limit must be an integer from 1 to %d", d.MaxLimit))
		}
		limit = int(n)
	}
	return query, limit, nil
}

// callUnrouted answers a call of the call meta-tool that routeMetaCalls could not
// route: its arguments do not name a tool to call.
func (s *Server) callUnrouted(_ context.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
	search := s.state.Load().search
	name, ok := req.GetArguments()["name"].(string)
	switch {
	case !ok || name == "":
		return mcp.NewToolResultError(markerInvalidArgs + "name is required: the name of the tool to call, as found")
	case search != nil && name == search.cfg.CallToolName:
		return mcp.NewToolResultError(markerInvalidArgs + fmt.Sprintf("%s cannot call itself", name))
	}
	return mcp.NewToolResultError(markerInvalidArgs + "arguments must be an object, and name and arguments the only members")
}

// routeMetaCalls turns a call of the call meta-tool into the call of the tool it names,
// before the request is traced, rate-limited or served: from there on it is that
// tool's call, with the same id, _meta (progress token, trace context, request state)
// and arguments.
func (s *Server) routeMetaCalls(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		search := s.state.Load().search
		if search == nil || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		_, body, err := readBody(w, r, s.opts.readTimeout())
		if err != nil {
			admission.RefuseBody(w, err)
			return
		}
		if routed, ok := routeCall(body, search.cfg.CallToolName); ok {
			body = routed.body
			r.ContentLength = int64(len(body))
			s.routeHeaders(r.Header, routed)
		}
		tb := &tracedBody{body: body}
		tb.Reset(body)
		r.Body = tb
		next.ServeHTTP(w, r)
	})
}

// routeHeaders makes the standard headers of a 2026-07-28 request (SEP-2243) those of
// the routed call: Mcp-Name names the real tool, and the parameters its schema
// mirrors in headers are mirrored from the routed arguments, as its client would have.
func (s *Server) routeHeaders(h http.Header, routed routedCall) {
	if h.Get(mcp.HeaderName) == "" {
		return // an earlier protocol: no standard headers
	}
	if v, ok := mcp.EncodeHeaderValue(routed.name); ok {
		h.Set(mcp.HeaderName, v)
	}
	t := s.state.Load().byName[routed.name]
	if t == nil {
		return
	}
	tool := listing.Tool(&t.Tool)
	for name, value := range mcp.GenerateParamHeaders(&tool, routed.params) {
		h.Set(name, value)
	}
}

// routedCall is a call of the call meta-tool rewritten into the call it names.
type routedCall struct {
	body   []byte
	name   string
	params json.RawMessage
}

// routeCall rewrites body when it is a tools/call of the call meta-tool callName whose
// arguments name another tool: into a tools/call of that tool.
func routeCall(body []byte, callName string) (routedCall, bool) {
	if !bytes.Contains(body, []byte(callName)) {
		return routedCall{}, false
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil {
		return routedCall{}, false // a batch, or not JSON: served (and refused) as it is
	}
	var method string
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["method"], &method) != nil || method != string(mcp.MethodToolsCall) || json.Unmarshal(msg["params"], &params) != nil {
		return routedCall{}, false
	}
	var name string
	if json.Unmarshal(params["name"], &name) != nil || name != callName {
		return routedCall{}, false
	}
	var inner struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(params["arguments"], &members) != nil || json.Unmarshal(params["arguments"], &inner) != nil ||
		inner.Name == "" || inner.Name == callName || !onlyNameAndArguments(members) ||
		(len(inner.Arguments) > 0 && !bytes.HasPrefix(bytes.TrimSpace(inner.Arguments), []byte("{"))) {
		return routedCall{}, false // the meta-tool's own handler says what is wrong
	}
	params["name"], _ = json.Marshal(inner.Name)
	if len(inner.Arguments) > 0 {
		params["arguments"] = inner.Arguments
	} else {
		delete(params, "arguments")
	}
	rawParams, err := json.Marshal(params)
	if err != nil {
		return routedCall{}, false
	}
	msg["params"] = rawParams
	routed, err := json.Marshal(msg)
	if err != nil {
		return routedCall{}, false
	}
	return routedCall{body: routed, name: inner.Name, params: rawParams}, true
}

func onlyNameAndArguments(members map[string]json.RawMessage) bool {
	for k := range members {
		if k != "name" && k != "arguments" {
			return false
		}
	}
	return true
}
