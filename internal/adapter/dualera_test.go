package adapter

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/testenv/dualera"
)

const echoSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`

// dualEraTools re-export the fixture's tools as team.*, served in eras by the remote,
// relaying elicitation.
func dualEraTools(url string, eras ...string) []adapterconfig.Tool {
	tools := plainDualEraTools(url, eras...)
	for _, tool := range tools {
		tool.Remote.Relay = []string{adapterconfig.RelayElicitation}
	}
	return tools
}

// plainDualEraTools are dualEraTools relaying nothing.
func plainDualEraTools(url string, eras ...string) []adapterconfig.Tool {
	tools := []adapterconfig.Tool{
		remoteTool("team.echo", echoSchema, url, adapterconfig.TransportStreamableHTTP, dualera.ToolEcho),
		remoteTool("team.confirm", objectSchema, url, adapterconfig.TransportStreamableHTTP, dualera.ToolConfirm),
		remoteTool("team.modern_only", objectSchema, url, adapterconfig.TransportStreamableHTTP, dualera.ToolModernOnly),
	}
	for _, tool := range tools {
		tool.Remote.Eras = eras
	}
	return tools
}

// confirmer answers the fixture's elicitation with {"ok":true}.
type confirmer struct {
	mu    sync.Mutex
	asked []string
}

func (c *confirmer) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	c.mu.Lock()
	c.asked = append(c.asked, req.Params.Message)
	c.mu.Unlock()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"ok": true}}}, nil
}

func (c *confirmer) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.asked...)
}

// eliciting connects an mcp-go client of protocol ("" negotiates 2026-07-28) that
// declares elicitation and answers it with c.
func eliciting(t *testing.T, baseURL, protocol string, c *confirmer) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(baseURL + adapterconfig.PathMCP)
	if err != nil {
		t.Fatal(err)
	}
	opts := []client.ClientOption{client.WithClientCapabilities(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}}),
		client.WithElicitationHandler(c)}
	if protocol != "" {
		opts = append(opts, client.WithProtocolVersion(protocol))
	}
	cl, err := startClient(t, client.NewClient(tr, opts...), protocol)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// modernCall posts a tools/call of protocol 2026-07-28 with extra params members and
// returns its result.
func modernCall(t *testing.T, baseURL, tool, extra string) json.RawMessage {
	t.Helper()
	return modernCallAs(t, baseURL, tool, extra, nil)
}

// modernCallAs is modernCall with headers (a caller's token).
func modernCallAs(t *testing.T, baseURL, tool, extra string, headers map[string]string) json.RawMessage {
	t.Helper()
	args := `{}`
	if tool == "team.echo" {
		args = `{"text":"hi"}`
	}
	return modernRequest(t, baseURL, "tools/call", tool, `"arguments":`+args+`,`, extra, headers)
}

// modernRequest sends method about name (a tool or prompt) in protocol 2026-07-28, with
// members and extra around the _meta in its params, and returns its result; or its
// error, with its HTTP status, as {"refusal": …}.
func modernRequest(t *testing.T, baseURL, method, name, members, extra string, headers map[string]string) json.RawMessage {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw-caller","version":"0"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"sampling":{}},"io.modelcontextprotocol/logLevel":"debug"}`
	msg := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{"name":"` + name + `",` + members + meta + extra + `}}`
	all := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}
	for k, v := range headers {
		all[k] = v
	}
	result, failed := answerOf(t, method, postRPC(t, baseURL+adapterconfig.PathMCP, all, msg))
	if failed != nil {
		refusal, _ := json.Marshal(map[string]any{"refusal": failed})
		return refusal
	}
	return result
}

// refusedState fails t unless r is the invalid-params error (HTTP 400) that refuses a
// requestState, its message naming why (fragment).
func refusedState(t *testing.T, what string, r inputRequired, fragment string) {
	t.Helper()
	if e := r.Refusal; e == nil || e.Code != mcp.INVALID_PARAMS || e.Status != http.StatusBadRequest ||
		!strings.HasPrefix(e.Message, gateway.MarkerInputRefused) || !strings.Contains(e.Message, fragment) {
		t.Errorf("%s: got %+v, want error %d (HTTP 400) %s…%s", what, r.Refusal, mcp.INVALID_PARAMS, gateway.MarkerInputRefused, fragment)
	}
}

type inputRequired struct {
	ResultType    string                     `json:"resultType"`
	RequestState  string                     `json:"requestState"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	IsError       bool                       `json:"isError"`
	Content       []struct{ Text string }    `json:"content"`
	Refusal       *answeredError             `json:"refusal"`
}

func parseResult(t *testing.T, raw json.RawMessage) inputRequired {
	t.Helper()
	var r inputRequired
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r
}

func (r inputRequired) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// A 2026-07-28 caller (mcp-go's client) through a stateless gateway completes the
// remote's input-required round trip: it is asked the remote's elicitation, and its
// retry reaches the remote in 2026-07-28 with the remote's own requestState. Every
// request the remote got was of 2026-07-28, with the gateway's clientInfo and the
// caller's elicitation capability.
func TestDualEraGateway_ModernCallerCompletesTheRemotesInputRequiredRoundTrip(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, dualEraTools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)...))
	answers := &confirmer{}
	c := eliciting(t, gw.baseURL, "", answers)
	res := callTool(t, c, "team.confirm", map[string]any{})
	if res.IsError || textOf(res) != `confirmed: accept {"ok":true}` {
		t.Fatalf("got %q (isError %v), want the remote's confirmation", textOf(res), res.IsError)
	}
	if asked := answers.got(); len(asked) != 1 || asked[0] != "Confirm?" {
		t.Errorf("the caller was asked %q, want the remote's one elicitation", asked)
	}
	calls := remote.Calls(dualera.ToolConfirm)
	if len(calls) != 2 || calls[0].RequestState != "" || calls[1].RequestState != dualera.StateAsked {
		t.Fatalf("the remote got %+v, want a call and a retry with its own requestState", calls)
	}
	for _, call := range calls {
		if call.ProtocolHeader != adapterconfig.EraModern || call.McpMethod != "tools/call" || call.McpName != dualera.ToolConfirm ||
			call.MetaString(mcp.MetaKeyProtocolVersion) != adapterconfig.EraModern ||
			!strings.Contains(string(call.Meta[mcp.MetaKeyClientInfo]), `"cantus-adapter"`) ||
			!strings.Contains(string(call.Meta[mcp.MetaKeyClientCapabilities]), `"elicitation"`) {
			t.Errorf("the remote got %+v, want 2026-07-28 with its headers, the gateway's clientInfo and the caller's elicitation", call)
		}
	}
	if n := len(remote.Requests(string(mcp.MethodInitialize))); n != 0 {
		t.Errorf("the remote got %d initialize requests, want none (requests: %s)", n, remote.Methods())
	}
}

// The remote gets the caller's protocol version and log level, the caller's
// capabilities that the import relays (elicitation, not sampling), and the gateway's
// clientInfo, not the caller's.
func TestDualEraGateway_UpstreamMetaCarriesTheCallersLevelAndRelayedCapabilities(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, dualEraTools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)...))
	if r := parseResult(t, modernCall(t, gw.baseURL, "team.echo", "")); r.text() != "echo: hi" {
		t.Fatalf("got %q, want the echo", r.text())
	}
	calls := remote.Calls(dualera.ToolEcho)
	if len(calls) != 1 {
		t.Fatalf("the remote got %d calls", len(calls))
	}
	got := calls[0]
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(got.Meta[mcp.MetaKeyClientCapabilities], &caps)
	if got.MetaString(mcp.MetaKeyLogLevel) != "debug" || got.MetaString(mcp.MetaKeyProtocolVersion) != adapterconfig.EraModern ||
		caps["elicitation"] == nil || caps["sampling"] != nil || strings.Contains(string(got.Meta[mcp.MetaKeyClientInfo]), "raw-caller") {
		t.Errorf("the remote got _meta %s, want logLevel debug, elicitation only and the gateway's clientInfo", mustJSON(got.Meta))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The requestState the caller gets wraps the remote's, unreadable; a tampered one,
// one replayed, and one used for another tool are refused with a tool error and
// never reach the remote; the good one reaches it once, with the remote's state.
func TestDualEraGateway_RequestStateTamperedReplayedOrForAnotherToolIsRefused(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, dualEraTools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)...))
	first := parseResult(t, modernCall(t, gw.baseURL, "team.confirm", ""))
	if first.ResultType != string(mcp.ResultTypeInputRequired) || first.InputRequests[dualera.ElicitationKey] == nil {
		t.Fatalf("first answer %+v, want input_required with the remote's elicitation", first)
	}
	if first.RequestState == dualera.StateAsked || strings.Contains(first.RequestState, dualera.StateAsked) || first.RequestState == "" {
		t.Fatalf("requestState %q, want the gateway's own wrapping the remote's", first.RequestState)
	}
	answer := `,"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}}`
	retry := func(tool, state string) inputRequired {
		return parseResult(t, modernCall(t, gw.baseURL, tool, answer+`,"requestState":`+mustJSON(state)))
	}
	refused := func(what string, r inputRequired, fragment string) {
		t.Helper()
		refusedState(t, what, r, fragment)
	}
	tampered := []byte(first.RequestState)
	tampered[len("cantus-mrtr.")+3] ^= 1
	refused("tampered", retry("team.confirm", string(tampered)), "not one this gateway gave")
	refused("another tool", retry("team.echo", first.RequestState), "another tool")
	if ok := retry("team.confirm", first.RequestState); ok.IsError || ok.text() != `confirmed: accept {"ok":true}` {
		t.Fatalf("the good retry got %+v, want the confirmation", ok)
	}
	refused("replayed", retry("team.confirm", first.RequestState), "used already")
	if calls := remote.Calls(dualera.ToolConfirm); len(calls) != 2 || calls[1].RequestState != dualera.StateAsked {
		t.Errorf("the remote got %d calls of confirm (%+v), want the first and one good retry", len(calls), calls)
	}
	if n := len(remote.Calls(dualera.ToolEcho)); n != 0 {
		t.Errorf("the remote got %d calls of echo, want none", n)
	}
}

// A 2025-11-25 caller of a dual-era remote keeps the 2025-11-25 session (a tool that
// relays nothing).
func TestDualEraGateway_LegacyCallerKeepsTheLegacySession(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, false, plainDualEraTools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)...))
	c := connect(t, gw.baseURL, protocol20251125, nil)
	wantSuccess(t, callTool(t, c, "team.echo", map[string]any{"text": "hi"}), "echo: hi")
	calls := remote.Calls(dualera.ToolEcho)
	if len(calls) != 1 || calls[0].ProtocolHeader != adapterconfig.EraLegacy || calls[0].McpMethod != "" {
		t.Errorf("the remote got %+v, want one call on a 2025-11-25 session", calls)
	}
	if n := len(remote.Requests(string(mcp.MethodInitialize))); n == 0 {
		t.Errorf("the remote got no initialize request, want the 2025-11-25 session's")
	}
}

// A remote of 2025-11-25 only (no eras recorded) serves 2026-07-28 callers translated,
// as before.
func TestDualEraGateway_LegacyOnlyRemoteServesModernCallersTranslated(t *testing.T) {
	remote := dualera.Start(t, dualera.LegacyOnly)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, dualEraTools(remote.URL)...))
	c := connect(t, gw.baseURL, "", nil)
	wantSuccess(t, callTool(t, c, "team.echo", map[string]any{"text": "hi"}), "echo: hi")
	calls := remote.Calls(dualera.ToolEcho)
	if len(calls) != 1 || calls[0].ProtocolHeader != adapterconfig.EraLegacy {
		t.Errorf("the remote got %+v, want one call of 2025-11-25", calls)
	}
}

// A tool a remote serves only in 2026-07-28 is called in that era for a 2025-11-25
// caller too.
func TestDualEraGateway_ModernOnlyToolServesLegacyCallersTranslated(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	tools := dualEraTools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)
	tools[2].Remote.Eras = []string{adapterconfig.EraModern}
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, tools...))
	c := connect(t, gw.baseURL, protocol20251125, nil)
	wantSuccess(t, callTool(t, c, "team.modern_only", map[string]any{}), "modern")
	calls := remote.Calls(dualera.ToolModernOnly)
	if len(calls) != 1 || calls[0].ProtocolHeader != adapterconfig.EraModern {
		t.Errorf("the remote got %+v, want one call of 2026-07-28", calls)
	}
}

// A 2025-11-25 caller of a 2026-07-28-only remote is asked the remote's input request,
// and the answer completes the call: on its session on a stateful gateway, on its
// call's stream on a stateless one of one replica. A stateless gateway of several
// replicas refuses, saying why. Each counts what it did in
// cantus_adapter_relayed_requests_total.
func TestDualEraGateway_LegacyCallerIsAskedWhereItsAnswerComesBack(t *testing.T) {
	remote := dualera.Start(t, dualera.ModernOnly)
	relayed := func(srv *Server, outcome string) string {
		series := regexp.MustCompile(`cantus_adapter_relayed_requests_total\{import="[^"]+",kind="elicitation",outcome="` + outcome + `"\} (\d+)`)
		if m := series.FindStringSubmatch(metricsText(t, srv)); m != nil {
			return m[1]
		}
		return "absent"
	}
	for _, stateless := range []bool{false, true} {
		gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, stateless, dualEraTools(remote.URL, adapterconfig.EraModern)...))
		answers := &confirmer{}
		c := eliciting(t, gw.baseURL, protocol20251125, answers)
		wantSuccess(t, callTool(t, c, "team.confirm", map[string]any{}), `confirmed: accept {"ok":true}`)
		if asked := answers.got(); len(asked) != 1 {
			t.Errorf("stateless %v: the caller was asked %q, want one elicitation", stateless, asked)
		}
		if asked, refused := relayed(gw.Server, "asked"), relayed(gw.Server, "refused"); asked != "1" || refused != "0" {
			t.Errorf("stateless %v: relayed elicitations asked %s, refused %s; want 1 and 0", stateless, asked, refused)
		}
	}

	scaledOut := configWith(adapterconfig.TransportStreamableHTTP, true, dualEraTools(remote.URL, adapterconfig.EraModern)...)
	scaledOut.Replicas = 2
	gw := serve(t, scaledOut)
	c := eliciting(t, gw.baseURL, protocol20251125, &confirmer{})
	res := callTool(t, c, "team.confirm", map[string]any{})
	wantToolError(t, res, gateway.MarkerCallFailed, "stateless and runs 2 replicas")
	if asked, refused := relayed(gw.Server, "asked"), relayed(gw.Server, "refused"); asked != "0" || refused != "1" {
		t.Errorf("scaled out: relayed elicitations asked %s, refused %s; want 0 and 1", asked, refused)
	}
}

// A tool whose remote definition marks an argument x-mcp-header is called in
// 2026-07-28 with the Mcp-Param-* header the remote requires (SEP-2243), and the
// result names the gateway, not the remote, as its server.
func TestDualEraGateway_ParamHeadersReachTheRemoteAndTheResultNamesTheGateway(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	tool := remoteTool("team.region", dualera.RegionSchema, remote.URL, adapterconfig.TransportStreamableHTTP, dualera.ToolRegion)
	tool.Remote.Eras = []string{adapterconfig.EraModern, adapterconfig.EraLegacy}
	tool.Remote.Definition = json.RawMessage(`{"inputSchema":` + dualera.RegionSchema + `}`)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, tool))
	msg := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"team.region","arguments":{"region":"eu-west"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	reply := postRPC(t, gw.baseURL+adapterconfig.PathMCP, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
		"Mcp-Name": "team.region", "Mcp-Param-Region": "eu-west"}, msg)
	if !strings.Contains(string(reply.body), "region: eu-west") {
		t.Fatalf("HTTP %d %s, want the remote's answer", reply.status, reply.body)
	}
	calls := remote.Calls(dualera.ToolRegion)
	if len(calls) != 1 || calls[0].Header.Get("Mcp-Param-Region") != "eu-west" || calls[0].ProtocolHeader != adapterconfig.EraModern {
		t.Errorf("the remote got %+v, want one 2026-07-28 call with Mcp-Param-Region", calls)
	}
	if strings.Contains(string(reply.body), `"name":"dualera"`) || !strings.Contains(string(reply.body), `"test-server"`) {
		t.Errorf("the result's _meta names %s, want the gateway (test-server) as its server", reply.body)
	}
}

// A remote of 2026-07-28 only serves its imported resource and prompt through the
// gateway: reads and gets go to it in that era, for a 2025-11-25 caller too.
func TestDualEraGateway_ModernOnlyRemoteServesReadsAndPrompts(t *testing.T) {
	remote := dualera.Start(t, dualera.ModernOnly)
	cfg := configWith(adapterconfig.TransportStreamableHTTP, false)
	resource := importedItem(dualera.ResourceURI, `{"uri":"docs://guide","name":"guide"}`, remote.URL, "")
	prompt := importedItem("team.hello", `{"name":"hello"}`, remote.URL, dualera.PromptName)
	for _, it := range []*adapterconfig.ImportedItem{&resource, &prompt} {
		it.Remote.Eras = []string{adapterconfig.EraModern}
	}
	cfg.Imported = &adapterconfig.ImportedContent{Resources: []adapterconfig.ImportedItem{resource}, Prompts: []adapterconfig.ImportedItem{prompt}}
	gw := serve(t, cfg)
	c := connect(t, gw.baseURL, protocol20251125, nil)
	ctx := testkit.Context(t, testTimeout)
	read := mcp.ReadResourceRequest{}
	read.Params.URI = dualera.ResourceURI
	res, err := c.ReadResource(ctx, read)
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("read: %v %+v", err, res)
	}
	if text, ok := res.Contents[0].(mcp.TextResourceContents); !ok || text.Text != "guide text" {
		t.Errorf("read %+v, want the remote's guide text", res.Contents[0])
	}
	get := mcp.GetPromptRequest{}
	get.Params.Name = "team.hello"
	got, err := c.GetPrompt(ctx, get)
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("prompt: %v %+v", err, got)
	}
	for _, method := range []string{"resources/read", "prompts/get"} {
		reqs := remote.Requests(method)
		if len(reqs) != 1 || reqs[0].ProtocolHeader != adapterconfig.EraModern || reqs[0].McpName == "" {
			t.Errorf("the remote got %s as %+v, want one of 2026-07-28 with Mcp-Name", method, reqs)
		}
	}
}

// A prompt a dual-era remote lists only to clients of 2026-07-28, which asks for input
// before it is given, is listed only to those callers, and its input-required result
// reaches them with a sealed requestState whose retry gets the prompt: once, and not
// with an altered state. A caller of 2025-11-25 is neither listed it nor given it.
func TestDualEraGateway_APromptOfTheModernEraAsksOnlyItsCallers(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	cfg := configWith(adapterconfig.TransportStreamableHTTP, false)
	hello := importedItem("team.hello", `{"name":"team.hello"}`, remote.URL, dualera.PromptName)
	confirming := importedItem("team.confirm", `{"name":"team.confirm"}`, remote.URL, dualera.PromptConfirm)
	hello.Remote.Eras = []string{adapterconfig.EraModern, adapterconfig.EraLegacy}
	confirming.Remote.Eras = []string{adapterconfig.EraModern}
	for _, it := range []*adapterconfig.ImportedItem{&hello, &confirming} {
		it.Remote.RemoteEras, it.Remote.Relay = hello.Remote.Eras, []string{adapterconfig.RelayElicitation}
	}
	cfg.Imported = &adapterconfig.ImportedContent{Prompts: []adapterconfig.ImportedItem{hello, confirming}}
	gw := serve(t, cfg)
	ctx := testkit.Context(t, testTimeout)

	legacy := connect(t, gw.baseURL, protocol20251125, nil)
	listed, err := legacy.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil || len(listed.Prompts) != 1 || listed.Prompts[0].Name != "team.hello" {
		t.Errorf("a 2025-11-25 caller is listed %+v (%v), want team.hello alone", listed, err)
	}
	get := mcp.GetPromptRequest{}
	get.Params.Name = "team.confirm"
	if _, err := legacy.GetPrompt(ctx, get); err == nil || !strings.Contains(err.Error(), "not served to clients of protocol 2025-11-25") {
		t.Errorf("a 2025-11-25 caller's get: %v, want the refusal that names its era", err)
	}

	modern := connect(t, gw.baseURL, "", nil)
	if listed, err := modern.ListPrompts(ctx, mcp.ListPromptsRequest{}); err != nil || len(listed.Prompts) != 2 {
		t.Errorf("a 2026-07-28 caller is listed %+v (%v), want both prompts", listed, err)
	}
	asked := parseResult(t, modernRequest(t, gw.baseURL, "prompts/get", "team.confirm", "", "", nil))
	if asked.ResultType != string(mcp.ResultTypeInputRequired) || asked.InputRequests[dualera.ElicitationKey] == nil ||
		!strings.HasPrefix(asked.RequestState, "cantus-mrtr.") {
		t.Fatalf("the first get: %+v, want the remote's elicitation and a state the gateway sealed", asked)
	}
	answers := `,"inputResponses":{"` + dualera.ElicitationKey + `":{"action":"accept","content":{"ok":true}}}`
	tampered := parseResult(t, modernRequest(t, gw.baseURL, "prompts/get", "team.confirm", "", answers+`,"requestState":"`+asked.RequestState+`x"`, nil))
	refusedState(t, "an altered state", tampered, "not one this gateway gave")
	retry := answers + `,"requestState":"` + asked.RequestState + `"`
	given := modernRequest(t, gw.baseURL, "prompts/get", "team.confirm", "", retry, nil)
	if !strings.Contains(string(given), `confirmed: accept {\"ok\":true}`) {
		t.Errorf("the retry got %s, want the prompt the remote gives once confirmed", given)
	}
	refusedState(t, "a replayed state", parseResult(t, modernRequest(t, gw.baseURL, "prompts/get", "team.confirm", "", retry, nil)), "used already")
	if got := remote.Requests("prompts/get"); len(got) != 2 || got[1].ProtocolHeader != adapterconfig.EraModern {
		t.Errorf("the remote got %d prompts/get (%+v), want the first and the one good retry, in 2026-07-28", len(got), got)
	}
}

// A resource a dual-era remote lists only to clients of 2025-11-25 is listed and read
// only by those callers: a 2026-07-28 caller is neither listed it nor forwarded its
// read.
func TestDualEraGateway_AResourceOfTheOlderEraIsServedOnlyToItsCallers(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	cfg := configWith(adapterconfig.TransportStreamableHTTP, false)
	guide := importedItem(dualera.ResourceURI, `{"uri":"docs://guide","name":"guide"}`, remote.URL, "")
	guide.Remote.Eras = []string{adapterconfig.EraLegacy}
	guide.Remote.RemoteEras = []string{adapterconfig.EraModern, adapterconfig.EraLegacy}
	cfg.Imported = &adapterconfig.ImportedContent{Resources: []adapterconfig.ImportedItem{guide}}
	gw := serve(t, cfg)
	ctx := testkit.Context(t, testTimeout)
	read := mcp.ReadResourceRequest{}
	read.Params.URI = dualera.ResourceURI

	modern := connect(t, gw.baseURL, "", nil)
	if listed, err := modern.ListResources(ctx, mcp.ListResourcesRequest{}); err != nil || len(listed.Resources) != 0 {
		t.Errorf("a 2026-07-28 caller is listed %+v (%v), want nothing", listed, err)
	}
	if _, err := modern.ReadResource(ctx, read); err == nil || !strings.Contains(err.Error(), "not served to clients of protocol 2026-07-28") {
		t.Errorf("a 2026-07-28 caller's read: %v, want the refusal that names its era", err)
	}
	if got := remote.Requests("resources/read"); len(got) != 0 {
		t.Errorf("the remote got %d reads, want none", len(got))
	}

	legacy := connect(t, gw.baseURL, protocol20251125, nil)
	if listed, err := legacy.ListResources(ctx, mcp.ListResourcesRequest{}); err != nil || len(listed.Resources) != 1 {
		t.Errorf("a 2025-11-25 caller is listed %+v (%v), want the guide", listed, err)
	}
	if res, err := legacy.ReadResource(ctx, read); err != nil || len(res.Contents) != 1 {
		t.Errorf("a 2025-11-25 caller's read: %+v %v, want the guide", res, err)
	}
}

// A plain 2026-07-28 call of a tool that relays nothing is answered by the
// pass-through exactly as mcp-go answers one it serves (a call with a log level, which
// the pass-through leaves to mcp-go): the remote's result with the gateway named in
// _meta and a resultType. A failed remote result is marked as mcp-go's path marks it.
func TestDualEraGateway_PassThroughAnswersModernCallsAsMCPGoDoes(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, plainDualEraTools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)...))
	call := func(tool, args, meta string) json.RawMessage {
		msg := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}` + meta + `}}}`
		reply := postRPC(t, gw.baseURL+adapterconfig.PathMCP, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool}, msg)
		var answer struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(reply.body, &answer); err != nil || answer.Result == nil {
			t.Fatalf("HTTP %d %s: no result", reply.status, reply.body)
		}
		return answer.Result
	}
	for _, tc := range []struct{ tool, args string }{
		{"team.echo", `{"text":"hi"}`},
		{"team.echo", `{"text":7}`},     // refused by the gateway's validation
		{"team.modern_only", `{"x":1}`}, // answered by the remote
	} {
		passed := call(tc.tool, tc.args, "")
		served := call(tc.tool, tc.args, `,"io.modelcontextprotocol/logLevel":"emergency"`)
		if !testkit.JSONEqual(t, passed, served) {
			t.Errorf("%s %s: the pass-through answered\n%s\nmcp-go\n%s", tc.tool, tc.args, passed, served)
		}
		if !strings.Contains(string(passed), `"test-server"`) || !strings.Contains(string(passed), `"resultType":"complete"`) {
			t.Errorf("%s: %s does not name the gateway or has no resultType", tc.tool, passed)
		}
	}
	calls := remote.Calls(dualera.ToolEcho)
	if len(calls) != 2 || calls[0].ProtocolHeader != adapterconfig.EraModern || calls[0].MetaString(mcp.MetaKeyLogLevel) != "" ||
		calls[1].MetaString(mcp.MetaKeyLogLevel) != "emergency" {
		t.Errorf("the remote got %+v, want two 2026-07-28 calls of echo, the second with the log level", calls)
	}
}

// A requestState given to one caller is refused to another (each authenticated by its
// own service-account token), and the remote never sees the other's retry; the caller
// it was given to completes the round trip with it.
func TestDualEraGateway_RequestStateOfAnotherCallerIsRefused(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	key := newClusterKey(t, "k1")
	cfg := identityConfig(t, key)
	cfg.Tools = dualEraTools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)
	gw := serve(t, cfg)
	ada := bearerHeader(key.saToken(t, "agents", "ada", "uid-ada", "room"))
	bo := bearerHeader(key.saToken(t, "agents", "bo", "uid-bo", "room"))
	first := parseResult(t, modernCallAs(t, gw.baseURL, "team.confirm", "", ada))
	if first.ResultType != string(mcp.ResultTypeInputRequired) {
		t.Fatalf("ada's call got %+v, want input_required", first)
	}
	answer := `,"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":` + mustJSON(first.RequestState)
	refusedState(t, "bo's retry with ada's state", parseResult(t, modernCallAs(t, gw.baseURL, "team.confirm", answer, bo)), "another caller")
	if r := parseResult(t, modernCallAs(t, gw.baseURL, "team.confirm", answer, ada)); r.IsError || r.text() != `confirmed: accept {"ok":true}` {
		t.Errorf("ada's retry got %+v, want the confirmation", r)
	}
	if n := len(remote.Calls(dualera.ToolConfirm)); n != 2 {
		t.Errorf("the remote got %d calls of confirm, want ada's two", n)
	}
}

// Two gateways reading one requestStateKeyFile take each other's requestStates (a
// retry may land on any replica), and a gateway with another key refuses them; a key
// file that is missing or too short stops the server from starting.
func TestDualEraGateway_ReplicasSharingAKeyFileTakeEachOthersStates(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	keyFile, otherKeyFile := filepath.Join(t.TempDir(), "mrtr-key"), filepath.Join(t.TempDir(), "other-key")
	if err := os.WriteFile(keyFile, []byte("a-key-of-more-than-thirty-two-bytes-for-tests\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(otherKeyFile, []byte("another-key-of-more-than-thirty-two-bytes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	replica := func(keyFile string) *running {
		cfg := configWith(adapterconfig.TransportStreamableHTTP, true, dualEraTools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)...)
		cfg.RequestStateKeyFile = keyFile
		return serve(t, cfg)
	}
	one, two, other := replica(keyFile), replica(keyFile), replica(otherKeyFile)
	first := parseResult(t, modernCall(t, one.baseURL, "team.confirm", ""))
	answer := `,"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":` + mustJSON(first.RequestState)
	refusedState(t, "the retry on a gateway with another key", parseResult(t, modernCall(t, other.baseURL, "team.confirm", answer)), "not one this gateway gave")
	if r := parseResult(t, modernCall(t, two.baseURL, "team.confirm", answer)); r.IsError || r.text() != `confirmed: accept {"ok":true}` {
		t.Errorf("the retry on the other replica got %+v, want the confirmation", r)
	}
	for _, content := range []string{"", "short"} {
		cfg := configWith(adapterconfig.TransportStreamableHTTP, true, dualEraTools(remote.URL, adapterconfig.EraModern)...)
		cfg.RequestStateKeyFile = filepath.Join(t.TempDir(), "key")
		if content != "" {
			if err := os.WriteFile(cfg.RequestStateKeyFile, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := NewServer(cfg); err == nil || !strings.Contains(err.Error(), "request state key file") {
			t.Errorf("key file %q: NewServer got %v, want it refused", content, err)
		}
	}
}

// A remote whose handshake found 2026-07-28 but that refuses the era now (the
// operator has not probed it again yet) gets the call in 2025-11-25 instead, once
// it refused the version.
// Both the pass-through (a tool relaying nothing) and mcp-go's path (a relaying one)
// do so.
func TestDualEraGateway_RemoteThatStoppedServingModernGetsTheCallInLegacy(t *testing.T) {
	for name, tools := range map[string]func(string, ...string) []adapterconfig.Tool{"pass-through": plainDualEraTools, "relaying": dualEraTools} {
		remote := dualera.Start(t, dualera.LegacyOnly)
		gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, tools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)...))
		c := eliciting(t, gw.baseURL, "", &confirmer{})
		wantSuccess(t, callTool(t, c, "team.echo", map[string]any{"text": "hi"}), "echo: hi")
		calls := remote.Calls(dualera.ToolEcho)
		if len(calls) != 2 || calls[0].ProtocolHeader != adapterconfig.EraModern || calls[1].ProtocolHeader != adapterconfig.EraLegacy {
			t.Errorf("%s: the remote got %+v, want a refused 2026-07-28 call and the 2025-11-25 one", name, calls)
		}
	}
}

// A 2025-11-25 caller of a relaying tool of a dual-era remote whose 2025-11-25 side
// keeps no session (a stateless mcp-go server) is served through 2026-07-28: the
// remote's input request is asked of the caller on its session, and the answer
// completes the call (natively, the answer could not find its way back to the remote).
func TestDualEraGateway_LegacyCallerOfStatelessDualRemoteIsAskedThroughModern(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, false, dualEraTools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)...))
	answers := &confirmer{}
	c := eliciting(t, gw.baseURL, protocol20251125, answers)
	wantSuccess(t, callTool(t, c, "team.confirm", map[string]any{}), `confirmed: accept {"ok":true}`)
	if asked := answers.got(); len(asked) != 1 {
		t.Errorf("the caller was asked %q, want one elicitation", asked)
	}
	calls := remote.Calls(dualera.ToolConfirm)
	if len(calls) != 2 || calls[0].ProtocolHeader != adapterconfig.EraModern || calls[1].RequestState != dualera.StateAsked {
		t.Errorf("the remote got %+v, want a 2026-07-28 call and its retry", calls)
	}
	wantSuccess(t, callTool(t, c, "team.echo", map[string]any{"text": "hi"}), "echo: hi")
}

// eraTools re-export echo (listed in both eras), modern_only (listed only in
// 2026-07-28) and versioned (described otherwise in each era) of a dual-era remote, as
// the operator renders them from the import's status.
func eraTools(url string) []adapterconfig.Tool {
	both := []string{adapterconfig.EraModern, adapterconfig.EraLegacy}
	echo := remoteTool("team.echo", echoSchema, url, adapterconfig.TransportStreamableHTTP, dualera.ToolEcho)
	modernOnly := remoteTool("team.modern_only", objectSchema, url, adapterconfig.TransportStreamableHTTP, dualera.ToolModernOnly)
	versioned := remoteTool("team.versioned", objectSchema, url, adapterconfig.TransportStreamableHTTP, dualera.ToolVersioned)
	echo.Remote.Eras, echo.Remote.RemoteEras = both, both
	modernOnly.Remote.Eras, modernOnly.Remote.RemoteEras = []string{adapterconfig.EraModern}, both
	versioned.Remote.Eras, versioned.Remote.RemoteEras = both, both
	versioned.Remote.Definition = json.RawMessage(`{"description":"` + dualera.LegacyDescription + `","inputSchema":{"type":"object"}}`)
	versioned.Remote.ModernDefinition = json.RawMessage(`{"description":"` + dualera.ModernDescription + `","inputSchema":{"type":"object"}}`)
	return []adapterconfig.Tool{echo, modernOnly, versioned}
}

// listedDescriptions maps each tool c is listed to its description.
func listedDescriptions(t *testing.T, c *client.Client) map[string]string {
	t.Helper()
	res, err := c.ListTools(testkit.Context(t, testTimeout), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	out := map[string]string{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool.Description
	}
	return out
}

// Each caller is listed what the dual-era remote lists to its era: a 2026-07-28 caller
// (mcp-go's client) sees the tool the remote lists only in that era and calls it, and
// sees the 2026-07-28 description of a tool described otherwise in each era; a
// 2025-11-25 caller sees neither the modern-only tool nor that description, and its
// call of the modern-only tool by name is refused before it reaches the remote.
// Stateless and stateful gateways alike.
func TestDualEraGateway_EachCallerIsListedWhatTheRemoteListsToItsEra(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		t.Run(map[bool]string{true: "stateless", false: "stateful"}[stateless], func(t *testing.T) {
			remote := dualera.Start(t, dualera.Both)
			gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, stateless, eraTools(remote.URL)...))

			modern := connect(t, gw.baseURL, "", nil)
			if got := listedDescriptions(t, modern); len(got) != 3 || got["team.versioned"] != dualera.ModernDescription {
				t.Errorf("a 2026-07-28 caller is listed %v, want echo, modern_only and versioned described %q", got, dualera.ModernDescription)
			}
			wantSuccess(t, callTool(t, modern, "team.modern_only", map[string]any{}), "modern")
			calls := remote.Calls(dualera.ToolModernOnly)
			if len(calls) != 1 || calls[0].ProtocolHeader != adapterconfig.EraModern {
				t.Fatalf("the remote got %+v, want one call of 2026-07-28", calls)
			}

			legacy := connect(t, gw.baseURL, protocol20251125, nil)
			got := listedDescriptions(t, legacy)
			if _, listed := got["team.modern_only"]; listed || len(got) != 2 || got["team.versioned"] != dualera.LegacyDescription {
				t.Errorf("a 2025-11-25 caller is listed %v, want echo and versioned described %q, not modern_only", got, dualera.LegacyDescription)
			}
			wantToolError(t, callTool(t, legacy, "team.modern_only", map[string]any{}), "", "not served to clients of protocol 2025-11-25")
			if n := len(remote.Calls(dualera.ToolModernOnly)); n != 1 {
				t.Errorf("the remote got %d calls of modern_only, want only the 2026-07-28 caller's", n)
			}
			wantSuccess(t, callTool(t, legacy, "team.versioned", map[string]any{}), "versioned")
		})
	}
}

// A tool its remote lists only to clients declaring elicitation is listed to the
// callers the gateway can ask for it, as the remote lists it to its own clients: a
// caller that declared elicitation (of 2026-07-28, or of 2025-11-25 on a stateful
// gateway or a stateless one of one replica), and not one that did not, nor a
// 2025-11-25 caller of a stateless gateway of several replicas, which cannot be asked.
func TestDualEraGateway_AToolNeedingElicitationIsListedOnlyToCallersThatCanBeAsked(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		t.Run(map[bool]string{true: "stateless", false: "stateful"}[stateless], func(t *testing.T) {
			remote := dualera.Start(t, dualera.Both)
			tools := dualEraTools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)
			tools[1].Remote.Needs = []string{adapterconfig.RelayElicitation}
			gw := serve(t, configWith(adapterconfig.TransportStreamableHTTP, stateless, tools...))
			listed := func(c *client.Client) bool {
				_, ok := listedDescriptions(t, c)["team.confirm"]
				return ok
			}
			if !listed(eliciting(t, gw.baseURL, "", &confirmer{})) {
				t.Error("a 2026-07-28 caller declaring elicitation is not listed team.confirm")
			}
			if listed(connect(t, gw.baseURL, "", nil)) {
				t.Error("a 2026-07-28 caller declaring nothing is listed team.confirm")
			}
			if !listed(eliciting(t, gw.baseURL, protocol20251125, &confirmer{})) {
				t.Error("a 2025-11-25 caller declaring elicitation is not listed team.confirm")
			}
			if listed(connect(t, gw.baseURL, protocol20251125, nil)) {
				t.Error("a 2025-11-25 caller declaring nothing is listed team.confirm")
			}
			if stateless {
				scaledOut := configWith(adapterconfig.TransportStreamableHTTP, true, tools...)
				scaledOut.Replicas = 2
				if err := gw.Reload(scaledOut); err != nil {
					t.Fatalf("scaling out is not applied in place: %v", err)
				}
				if listed(eliciting(t, gw.baseURL, protocol20251125, &confirmer{})) {
					t.Error("a 2025-11-25 caller declaring elicitation is listed team.confirm once the stateless gateway runs 2 replicas")
				}
			}
		})
	}
}

// In Search mode the find meta-tool finds for each caller only what it is listed: a
// 2025-11-25 caller does not find the tool a dual-era remote lists only in 2026-07-28,
// a 2026-07-28 caller does.
func TestDualEraGateway_FindFindsOnlyWhatTheCallersEraIsListed(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	gw := serve(t, searchMode(configWith(adapterconfig.TransportStreamableHTTP, true, eraTools(remote.URL)...)))
	if names, _ := find(t, connect(t, gw.baseURL, "", nil), "modern_only", 20); !slices.Contains(names, "team.modern_only") {
		t.Errorf("a 2026-07-28 caller found %v, want team.modern_only among them", names)
	}
	if names, _ := find(t, connect(t, gw.baseURL, protocol20251125, nil), "modern_only", 20); slices.Contains(names, "team.modern_only") {
		t.Errorf("a 2025-11-25 caller found %v, want no team.modern_only", names)
	}
}

// A reload that changes only the eras an imported tool is listed in tells connected
// sessions the list changed, and the tool leaves a 2025-11-25 caller's list.
func TestDualEraGateway_AReloadChangingAToolsErasTellsSessions(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	both := []string{adapterconfig.EraModern, adapterconfig.EraLegacy}
	tools := eraTools(remote.URL)
	tools[1].Remote.Eras = both // modern_only, as if the remote listed it in both eras
	srv, err := NewServer(configWith(adapterconfig.TransportStreamableHTTP, false, tools...))
	if err != nil {
		t.Fatal(err)
	}
	baseURL, streams := servedWithStreams(t, srv)
	c, changed := listening(t, baseURL, adapterconfig.TransportStreamableHTTP, streams)
	if !slices.Contains(listedNames(t, c), "team.modern_only") {
		t.Fatal("team.modern_only is not listed while its remote lists it in 2025-11-25")
	}
	if err := srv.Reload(configWith(adapterconfig.TransportStreamableHTTP, false, eraTools(remote.URL)...)); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	testkit.Receive(t, testTimeout, "notifications/tools/list_changed after the tool's eras changed", changed)
	if slices.Contains(listedNames(t, c), "team.modern_only") {
		t.Error("team.modern_only is still listed to a 2025-11-25 caller after its remote listed it in 2026-07-28 only")
	}
}
