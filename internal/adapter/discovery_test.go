package adapter

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/tracing"
)

// searchMode puts cfg in Search mode with the default meta-tool names.
func searchMode(cfg *adapterconfig.Config, pinned ...string) *adapterconfig.Config {
	cfg.Discovery = &adapterconfig.Discovery{Mode: adapterconfig.DiscoverySearch, Pinned: pinned,
		FindToolName: "find_tools", CallToolName: "call_tool", DefaultLimit: 5, MaxLimit: 20}
	return cfg
}

// describedTool is a template tool with a description to be found by.
func describedTool(name, description, schema, text string) adapterconfig.Tool {
	t := templateTool(name, schema, text)
	t.Description = description
	return t
}

// find calls find_tools and returns the names found, best first, and the answer.
func find(t *testing.T, c *client.Client, query string, limit int) ([]string, findAnswer) {
	t.Helper()
	args := map[string]any{"query": query}
	if limit > 0 {
		args["limit"] = limit
	}
	res := callTool(t, c, "find_tools", args)
	if res.IsError {
		t.Fatalf("find_tools %q: %s", query, textOf(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var answer findAnswer
	if err := json.Unmarshal(raw, &answer); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	if !json.Valid([]byte(textOf(res))) {
		t.Errorf("the text is not the structured content as JSON: %s", textOf(res))
	}
	var names []string
	for i, def := range answer.Tools {
		var d struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if json.Unmarshal(def, &d) != nil || d.Name != answer.Matches[i].Name || len(d.InputSchema) == 0 || answer.Matches[i].Reason == "" {
			t.Fatalf("found entry %d is not a full definition with a reason: %s / %+v", i, def, answer.Matches[i])
		}
		names = append(names, d.Name)
	}
	return names, answer
}

func bookTools() []adapterconfig.Tool {
	return []adapterconfig.Tool{
		describedTool("search_book", "Search the library catalogue for a book by title or author.", objectSchema, "found"),
		describedTool("checkout_book", "Check a book out of the library for a reader.", objectSchema, "checked out"),
		describedTool("list_branches", "List the library's branches and their opening hours.", objectSchema, "branches"),
	}
}

// A caller whose rules forbid a tool never finds it, nor reaches it through call_tool
// (refused, audited and counted under the tool's own name); the filter runs before the
// limit, so a caller still gets limit tools when that many are visible to it. The
// meta-tools are listed to every caller, the rest only when pinned.
func TestDiscovery_CallerNeverFindsAForbiddenTool(t *testing.T) {
	key := newClusterKey(t, "k1")
	logs := &logBuffer{}
	cfg := identityConfig(t, key,
		adapterconfig.AuthorizationRule{Tools: []string{"search_*", "list_*"}, ServiceAccounts: []string{"agents/*"}},
		adapterconfig.AuthorizationRule{Tools: []string{"checkout_book"}, ServiceAccounts: []string{"agents/librarian"}})
	cfg.Tools = bookTools()
	srv := serve(t, searchMode(cfg, "search_*"), WithLogger(funcr.New(logs.add, funcr.Options{})))
	visitor := connect(t, srv.baseURL, protocol20251125, bearerHeader(key.token(t, "agents", "visitor", "room")))
	librarian := connect(t, srv.baseURL, protocol20251125, bearerHeader(key.token(t, "agents", "librarian", "room")))

	if got := listNames(t, visitor); !slices.Equal(got, []string{"call_tool", "find_tools", "search_book"}) {
		t.Errorf("the visitor lists %v, want the pinned tool and the meta-tools", got)
	}
	if got, _ := find(t, librarian, "check out a book", 1); !slices.Equal(got, []string{"checkout_book"}) {
		t.Fatalf("the librarian finds %v, want [checkout_book]", got)
	}
	got, _ := find(t, visitor, "check out a book", 1)
	if !slices.Equal(got, []string{"search_book"}) {
		t.Errorf("the visitor finds %v: want the one visible tool that matches, never checkout_book", got)
	}
	if all, _ := find(t, visitor, "book library branches reader", 20); slices.Contains(all, "checkout_book") || len(all) != 2 {
		t.Errorf("the visitor finds %v", all)
	}

	refused := callTool(t, visitor, "call_tool", map[string]any{"name": "checkout_book", "arguments": map[string]any{}})
	wantToolError(t, refused, "not_allowed: ", `"checkout_book"`)
	wantSuccess(t, callTool(t, librarian, "call_tool", map[string]any{"name": "checkout_book"}), "checked out")
	for _, want := range []string{`"caller"="serviceaccount:agents/visitor" "tool"="checkout_book" "outcome"="refused"`,
		`"caller"="serviceaccount:agents/librarian" "tool"="checkout_book" "outcome"="ok"`,
		`"caller"="serviceaccount:agents/visitor" "tool"="find_tools" "outcome"="ok"`} {
		if len(logs.matching(want)) == 0 {
			t.Errorf("no audit line with %s in %v", want, logs.matching(`"tool call"`))
		}
	}
	if len(logs.matching(`"tool"="call_tool"`)) != 0 {
		t.Error("a routed call was audited under call_tool, not the tool's own name")
	}
	if body := metricsText(t, srv.Server); !strings.Contains(body, `cantus_adapter_tool_refusals_total{tool="checkout_book"} 1`) ||
		!strings.Contains(body, `cantus_adapter_tool_calls_total{tool="checkout_book"} 1`) {
		t.Errorf("the routed calls are not counted under the tool's name:\n%s", grepLines(body, "checkout_book"))
	}
}

// A definition withheld until approved is never found, and a call to it through
// call_tool gets the same definition_changed answer as a direct call.
func TestDiscovery_WithheldDefinitionIsNeverFound(t *testing.T) {
	cfg := searchMode(configWith(adapterconfig.TransportStreamableHTTP, true, bookTools()...))
	cfg.Withheld = []adapterconfig.WithheldTool{{Name: "delete_book", Reason: "definition_changed: tool delete_book of books/remote waits for approval"}}
	srv := serve(t, cfg)
	c := connect(t, srv.baseURL, "", nil)
	for _, q := range []string{"delete a book", "delete_book", "remove book from catalogue"} {
		if got, _ := find(t, c, q, 20); slices.Contains(got, "delete_book") {
			t.Fatalf("%q finds the withheld tool: %v", q, got)
		}
	}
	direct := callTool(t, c, "delete_book", nil)
	routed := callTool(t, c, "call_tool", map[string]any{"name": "delete_book", "arguments": map[string]any{}})
	wantToolError(t, routed, "definition_changed: ")
	if textOf(direct) != textOf(routed) {
		t.Errorf("call_tool answered %q, a direct call %q", textOf(routed), textOf(direct))
	}
}

// A call through call_tool is validated, limited and traced like a direct one.
func TestDiscovery_CallToolIsTheDirectCall(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
		_, _ = w.Write([]byte("slow done"))
	}))
	t.Cleanup(backend.Close)
	t.Cleanup(func() { close(release) })
	strict := `{"type":"object","properties":{"title":{"type":"string"}},"required":["title"],"additionalProperties":false}`
	cfg := searchMode(configWith(adapterconfig.TransportStreamableHTTP, true,
		describedTool("search_book", "Search the catalogue by title.", strict, "found {{.title}}"),
		httpTool("slow", objectSchema, backend.URL, 10*time.Second, 1024)))
	rec := recordSpans(t)
	srv := serve(t, cfg, func(o *options) { o.calls = admission.NewCallLimiter(1, 0, time.Millisecond) })
	c := connect(t, srv.baseURL, "", nil)

	direct := callTool(t, c, "search_book", map[string]any{"title": 7})
	routed := callTool(t, c, "call_tool", map[string]any{"name": "search_book", "arguments": map[string]any{"title": 7}})
	wantToolError(t, routed, markerInvalidArgs, "/title")
	if textOf(direct) != textOf(routed) {
		t.Errorf("validation: call_tool answered %q, a direct call %q", textOf(routed), textOf(direct))
	}
	wantSuccess(t, callTool(t, c, "call_tool", map[string]any{"name": "search_book", "arguments": map[string]any{"title": "Dune"}}), "found Dune")
	wantToolError(t, callTool(t, c, "call_tool", map[string]any{"arguments": map[string]any{}}), markerInvalidArgs, "name is required")
	wantToolError(t, callTool(t, c, "call_tool", map[string]any{"name": "call_tool"}), markerInvalidArgs, "cannot call itself")

	first := make(chan string, 1)
	go func() { first <- textOf(callTool(t, c, "call_tool", map[string]any{"name": "slow"})) }()
	<-arrived
	wantToolError(t, callTool(t, c, "call_tool", map[string]any{"name": "slow"}), "server_busy: ")
	release <- struct{}{}
	if got := <-first; got != "slow done" {
		t.Errorf("the running call answered %q", got)
	}

	var named []string
	for _, s := range rec.Ended() {
		named = append(named, s.Name())
		if s.Name() == "tools/call search_book" && s.SpanKind() == trace.SpanKindServer {
			for _, a := range s.Attributes() {
				if a.Key == tracing.GenAIToolName && a.Value.AsString() != "search_book" {
					t.Errorf("span tool name %q", a.Value.AsString())
				}
			}
		}
	}
	if n := countOf(named, "tools/call search_book"); n != 3 {
		t.Errorf("want 3 spans named for the tool (1 direct, 2 routed), got %d: %v", n, named)
	}
	if body := metricsText(t, srv.Server); !strings.Contains(body, `cantus_adapter_tool_calls_total{tool="search_book"} 3`) {
		t.Errorf("the calls are not counted under the tool's name:\n%s", grepLines(body, "search_book"))
	}
}

func countOf(items []string, want string) int {
	n := 0
	for _, it := range items {
		if it == want {
			n++
		}
	}
	return n
}

// A stateful 2025-11-25 client and a stateless 2026-07-28 client both list the
// meta-tools, find a tool by a task and call it.
func TestDiscovery_StatefulAndStatelessClientsDiscoverAndCall(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
		protocol  string
	}{{"stateful 2025-11-25", false, protocol20251125}, {"stateless 2026-07-28", true, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, searchMode(configWith(adapterconfig.TransportStreamableHTTP, tc.stateless, bookTools()...)))
			c := connect(t, srv.baseURL, tc.protocol, nil)
			if tc.protocol == "" && c.GetSessionId() != "" {
				t.Fatalf("the 2026-07-28 client holds session %q", c.GetSessionId())
			}
			if got := listNames(t, c); !slices.Equal(got, []string{"call_tool", "find_tools"}) {
				t.Fatalf("lists %v", got)
			}
			got, _ := find(t, c, "what time does the library open", 1)
			if !slices.Equal(got, []string{"list_branches"}) {
				t.Fatalf("found %v, want [list_branches]", got)
			}
			wantSuccess(t, callTool(t, c, "call_tool", map[string]any{"name": got[0], "arguments": map[string]any{}}), "branches")
			wantSuccess(t, callTool(t, c, got[0], map[string]any{}), "branches")
		})
	}
}

// A reload into Search mode and out of it changes the list, and the index follows the
// new tools.
func TestDiscovery_ReloadRebuildsTheIndex(t *testing.T) {
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, bookTools()...)
	srv := serve(t, cfg)
	c := connect(t, srv.baseURL, "", nil)
	if got := listNames(t, c); len(got) != 3 {
		t.Fatalf("All mode lists %v", got)
	}
	next := searchMode(configWith(adapterconfig.TransportStreamableHTTP, true,
		append(bookTools(), describedTool("renew_loan", "Renew a reader's loan of a book.", objectSchema, "renewed"))...))
	if err := srv.Reload(next); err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, c); !slices.Equal(got, []string{"call_tool", "find_tools"}) {
		t.Fatalf("Search mode lists %v", got)
	}
	if got, _ := find(t, c, "renew my loan", 1); !slices.Equal(got, []string{"renew_loan"}) {
		t.Fatalf("found %v after the reload", got)
	}
	if err := srv.Reload(configWith(adapterconfig.TransportStreamableHTTP, true, bookTools()...)); err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, c); len(got) != 3 {
		t.Fatalf("back in All mode lists %v", got)
	}
}

// A tool named like a meta-tool is refused when the adapter loads its config.
func TestDiscovery_ToolNamedLikeAMetaToolIsRefused(t *testing.T) {
	cfg := searchMode(configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("find_tools", objectSchema, "x")))
	if _, err := NewServer(cfg); err == nil || !strings.Contains(err.Error(), `tool "find_tools" has the name of the discovery meta-tool "find_tools"`) {
		t.Fatalf("NewServer: %v", err)
	}
}

// An agent skill answers a task it describes with the tools it uses: those its
// allowed-tools name and those its SKILL.md body names exactly.
func TestDiscovery_SkillBringsTheToolsItUses(t *testing.T) {
	dir := newContentDir(t)
	cfg := searchMode(configWith(adapterconfig.TransportStreamableHTTP, true,
		describedTool("fill_form", "Set the fields of a document.", objectSchema, "filled"),
		describedTool("extract_text", "Return the text of a document.", objectSchema, "text"),
		describedTool("list_branches", "List the library's branches.", objectSchema, "branches")))
	cfg.ContentDir = dir.dir
	body := "---\nname: pdf-forms\ndescription: Complete PDF forms for customers\nallowed-tools: fill_form\n---\n\nRead the form with extract_text first.\n"
	cfg.AgentSkills = []adapterconfig.AgentSkill{{Path: "pdf-forms",
		Frontmatter: json.RawMessage(`{"name":"pdf-forms","description":"Complete PDF forms for customers","allowed-tools":"fill_form"}`),
		Files:       []adapterconfig.SkillFile{{Path: "SKILL.md", Digest: dir.store([]byte(body)), Size: int64(len(body))}}}}
	srv := serve(t, cfg)
	c := connect(t, srv.baseURL, "", nil)
	got, answer := find(t, c, "complete a customer's PDF form", 5)
	if len(answer.Skills) != 1 || answer.Skills[0].Name != "pdf-forms" || answer.Skills[0].URI != "skill://pdf-forms/SKILL.md" ||
		!slices.Equal(answer.Skills[0].Tools, []string{"fill_form", "extract_text"}) {
		t.Fatalf("skills found: %+v", answer.Skills)
	}
	if len(got) < 2 || !slices.Contains(got, "fill_form") || !slices.Contains(got, "extract_text") || slices.Contains(got, "list_branches") {
		t.Fatalf("tools found: %v", got)
	}
	if i := slices.Index(got, "extract_text"); !strings.Contains(answer.Matches[i].Reason, `used by the skill "pdf-forms"`) {
		t.Errorf("reason %q", answer.Matches[i].Reason)
	}
}

// routeCall keeps everything of the request but the name and arguments: the id, the
// _meta (progress token, trace context) and any other parameter (request state), so
// that progress, cancellation and input-required answers belong to the real call.
func TestDiscovery_RouteCallKeepsTheRequestButTheTool(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":"r-7","method":"tools/call","params":{"name":"call_tool","arguments":{"name":"search_book","arguments":{"title":"Dune","n":12345678901234567890}},` +
		`"_meta":{"progressToken":9,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},"requestState":"opaque"}}`)
	routed, ok := routeCall(body, "call_tool")
	if !ok {
		t.Fatal("not routed")
	}
	var got struct {
		ID     string `json:"id"`
		Method string `json:"method"`
		Params struct {
			Name         string          `json:"name"`
			Arguments    json.RawMessage `json:"arguments"`
			Meta         json.RawMessage `json:"_meta"`
			RequestState string          `json:"requestState"`
		} `json:"params"`
	}
	if err := json.Unmarshal(routed.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "r-7" || got.Method != "tools/call" || got.Params.Name != "search_book" || routed.name != "search_book" ||
		string(got.Params.Arguments) != `{"title":"Dune","n":12345678901234567890}` || got.Params.RequestState != "opaque" ||
		!strings.Contains(string(got.Params.Meta), `"progressToken":9`) {
		t.Fatalf("routed %s", routed.body)
	}
	for _, notRouted := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_book","arguments":{"name":"call_tool"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":"x","arguments":[1]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":"x","extra":1}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":"x"}}}]`,
	} {
		if _, ok := routeCall([]byte(notRouted), "call_tool"); ok {
			t.Errorf("routed %s", notRouted)
		}
	}
}

// find_tools judges its candidates within the request's CEL budget, as tools/list
// does: past it, the rest are not found (fail closed), however many were asked for.
func TestDiscovery_FindSpendsTheRequestsCELBudget(t *testing.T) {
	key := newClusterKey(t, "k1")
	cfg := identityConfig(t, key, adapterconfig.AuthorizationRule{Tools: []string{"*"}, When: costlyRule()})
	cfg.Tools = nil
	for i := range 40 {
		cfg.Tools = append(cfg.Tools, describedTool(fmt.Sprintf("tool_%02d", i), "Look up a book in the catalogue.", objectSchema, "x"))
	}
	r := serve(t, searchMode(cfg))
	c := connect(t, r.baseURL, protocol20251125, bearerHeader(key.token(t, "agents", "a", "room")))
	found, _ := find(t, c, "look up a book", 20)
	if got, want := len(found), admission.ListCELBudget/61711+1; got != want {
		t.Errorf("find_tools found %d of 40 tools, want the %d the CEL budget of one request pays for", got, want)
	}
}

// The sse transport, whose answers travel on the event stream, discovers and calls too.
func TestDiscovery_SSEClientDiscoversAndCalls(t *testing.T) {
	srv := serve(t, searchMode(configWith(adapterconfig.TransportSSE, false, bookTools()...)))
	c := connectSSE(t, srv.baseURL, protocol20251125)
	if got := listNames(t, c); !slices.Equal(got, []string{"call_tool", "find_tools"}) {
		t.Fatalf("lists %v", got)
	}
	got, _ := find(t, c, "borrow a book", 1)
	if !slices.Equal(got, []string{"checkout_book"}) {
		t.Fatalf("found %v", got)
	}
	wantSuccess(t, callTool(t, c, "call_tool", map[string]any{"name": "checkout_book"}), "checked out")
}

// A gateway's imported tools are found and called through call_tool, for a 2025-11-25
// client (whose stateless calls the gateway passes through to the remote) and a
// 2026-07-28 one.
func TestDiscovery_GatewayFindsAndCallsImportedTools(t *testing.T) {
	counter, runs := countingBackend(t)
	remote := startRemoteAdapter(t, configWith(adapterconfig.TransportStreamableHTTP, true, remoteTools(t, counter)...), "")
	gw := serve(t, searchMode(configWith(adapterconfig.TransportStreamableHTTP, true, gatewayTools(remote.endpoint(adapterconfig.TransportStreamableHTTP), adapterconfig.TransportStreamableHTTP)...)))
	for _, protocol := range []string{protocol20251125, ""} {
		c := connect(t, gw.baseURL, protocol, nil)
		got, _ := find(t, c, "re-exported greet", 1)
		if !slices.Equal(got, []string{"team.hello"}) {
			t.Fatalf("found %v", got)
		}
		wantSuccess(t, callTool(t, c, "call_tool", map[string]any{"name": "team.hello", "arguments": map[string]any{"name": "Ada"}}), "Hello, Ada!")
		wantToolError(t, callTool(t, c, "call_tool", map[string]any{"name": "team.hello", "arguments": map[string]any{"name": 7}}), markerInvalidArgs, "/name")
		callTool(t, c, "call_tool", map[string]any{"name": "team.count"})
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the remote ran team.count %d times, want 2", n)
	}
}

// A client that keeps a session is told when find_tools found it tools
// (notifications/tools/list_changed, on the find's own stream), and its tools/list then
// holds them beside the pinned ones, so it can offer them to its model directly. The
// list of another session does not change, a find that finds nothing new announces
// nothing, and a stateless client's list stays the pinned tools.
func TestDiscovery_FoundToolsJoinTheSessionsList(t *testing.T) {
	srv := serve(t, searchMode(configWith(adapterconfig.TransportStreamableHTTP, false, bookTools()...)))
	c := connect(t, srv.baseURL, protocol20251125, nil)
	changed := make(chan struct{}, 8)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	other := connect(t, srv.baseURL, protocol20251125, nil)

	got, _ := find(t, c, "what time does the library open", 1)
	if !slices.Equal(got, []string{"list_branches"}) {
		t.Fatalf("found %v, want [list_branches]", got)
	}
	testkit.Receive(t, testTimeout, "notifications/tools/list_changed after the find", changed)
	if listed := listNames(t, c); !slices.Equal(listed, []string{"call_tool", "find_tools", "list_branches"}) {
		t.Fatalf("the finding session lists %v", listed)
	}
	if listed := listNames(t, other); !slices.Equal(listed, []string{"call_tool", "find_tools"}) {
		t.Fatalf("another session lists %v", listed)
	}
	find(t, c, "what time does the library open", 1)
	if len(changed) > 0 {
		t.Fatal("a find of nothing new announced a list change")
	}

	stateless := serve(t, searchMode(configWith(adapterconfig.TransportStreamableHTTP, true, bookTools()...)))
	sc := connect(t, stateless.baseURL, "", nil)
	find(t, sc, "what time does the library open", 1)
	if listed := listNames(t, sc); !slices.Equal(listed, []string{"call_tool", "find_tools"}) {
		t.Fatalf("a stateless client lists %v", listed)
	}
}

// A session's list gains at most maxFoundPerSession found tools; finds beyond them
// still answer.
func TestDiscovery_FoundToolsPerSessionAreBounded(t *testing.T) {
	found := newFoundTools()
	names := make([]string, maxFoundPerSession+5)
	for i := range names {
		names[i] = fmt.Sprintf("tool_%d", i)
	}
	if !found.add("s1", names) {
		t.Fatal("nothing added")
	}
	kept := 0
	for _, n := range names {
		if found.keep("s1", n) {
			kept++
		}
	}
	if kept != maxFoundPerSession {
		t.Fatalf("kept %d found tools, want %d", kept, maxFoundPerSession)
	}
	if found.add("s1", []string{"one_more"}) || found.keep("s2", "tool_0") || found.keep("", "tool_0") {
		t.Fatal("a full session gained a tool, or another session sees the first's")
	}
}
