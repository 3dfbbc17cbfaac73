package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// startAskingRemote serves, in process, a remote built with mcp-go whose tools ask
// their caller something: the diagnostic tools of the conformance suite's
// server-stateless scenario (test_missing_capability samples, test_streaming_elicitation
// elicits, test_logging_tool logs), ask (elicits args.question) and sample (samples
// args.prompt). Each asks the mcp-go way, with an input-required result, which mcp-go
// turns into the server request a 2025-11-25 client (the gateway) understands.
func startAskingRemote(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("asking-remote", "1.0.0", server.WithToolCapabilities(false), server.WithLogging())
	sampleTool := func(name, prompt string) server.ServerTool {
		return server.ServerTool{
			Tool: mcp.NewTool(name, mcp.WithString("prompt")),
			Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if answer := server.SamplingResponse(req.Params.InputResponses, "model"); answer != nil {
					text, _ := mcp.AsTextContent(answer.Content)
					if text == nil {
						return mcp.NewToolResultError("the sampling answer holds no text"), nil
					}
					return mcp.NewToolResultText("sampled: " + text.Text), nil
				}
				p := req.GetString("prompt", prompt)
				return server.NewInputRequestBuilder("").Sample("model", mcp.CreateMessageParams{
					Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(p)}},
					MaxTokens: 32,
				}).ToolResult(), nil
			},
		}
	}
	elicitTool := func(name, question string) server.ServerTool {
		return server.ServerTool{
			Tool: mcp.NewTool(name, mcp.WithString("question")),
			Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if answer := server.ElicitationResponse(req.Params.InputResponses, "user"); answer != nil {
					content, _ := json.Marshal(answer.Content)
					return mcp.NewToolResultText(fmt.Sprintf("answered %s: %s", answer.Action, content)), nil
				}
				return server.NewInputRequestBuilder("").Elicit("user", mcp.ElicitationParams{
					Message: req.GetString("question", question),
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
						"answer": map[string]any{"type": "string"},
					}},
				}).ToolResult(), nil
			},
		}
	}
	s.AddTools(
		sampleTool("test_missing_capability", "say hi"),
		sampleTool("sample", "say hi"),
		elicitTool("test_streaming_elicitation", "Continue?"),
		elicitTool("ask", "What is your answer?"),
		server.ServerTool{
			Tool: mcp.NewTool("test_logging_tool"),
			Handler: func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				srv := server.ServerFromContext(ctx)
				for i := range 3 {
					_ = srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationMessage),
						map[string]any{"level": "info", "logger": "asking-remote", "data": fmt.Sprintf("log %d", i)})
				}
				return mcp.NewToolResultText("logged 3 messages"), nil
			},
		},
	)
	s.AddPrompt(mcp.NewPrompt("greeting", mcp.WithPromptDescription("Says hello."), mcp.WithArgument("name")),
		func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("A greeting", []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Hello, "+req.Params.Arguments["name"]+"!")),
			}), nil
		})
	s.AddResource(mcp.NewResource(askingReadme, "readme", mcp.WithMIMEType("text/plain")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "read me"}}, nil
		})
	s.AddResourceTemplate(mcp.NewResourceTemplate(askingItems, "items", mcp.WithTemplateMIMEType("text/plain")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "item " + req.Params.URI}}, nil
		})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs.URL + "/mcp"
}

// The asking remote's resource and resource template.
const (
	askingReadme = "test://asking/readme"
	askingItems  = "test://asking/items/{id}"
)

// askingImported is the "imported" member of a gateway config that re-exports the
// asking remote's prompt, resource and template, with the definitions it lists.
func askingImported(remoteURL string) map[string]any {
	remote := remoteSpec{Import: "e2e/asking", URL: remoteURL, Transport: peers.TransportStreamableHTTP, Timeout: "20s"}
	prompt := remote
	prompt.RemoteName = "greeting"
	item := func(key string, definition string, r remoteSpec) map[string]any {
		return map[string]any{"key": key, "definition": json.RawMessage(definition), "remote": r}
	}
	return map[string]any{"imported": map[string]any{
		"prompts":           []any{item("greeting", `{"name":"greeting","description":"Says hello.","arguments":[{"name":"name"}]}`, prompt)},
		"resources":         []any{item(askingReadme, `{"uri":"`+askingReadme+`","name":"readme","mimeType":"text/plain"}`, remote)},
		"resourceTemplates": []any{item(askingItems, `{"uriTemplate":"`+askingItems+`","name":"items","mimeType":"text/plain"}`, remote)},
	}}
}

// askingGatewayTools re-export every tool of the asking remote (and, when everything
// is set, server-everything's elicitation and sampling tools), relaying what relay
// names.
func askingGatewayTools(remoteURL, everything string, relay ...string) []gatewayTool {
	remote := func(url, name string) *remoteSpec {
		return &remoteSpec{Import: "e2e/asking", URL: url, Transport: peers.TransportStreamableHTTP, RemoteName: name, Timeout: "20s", Relay: relay}
	}
	object := json.RawMessage(`{"type":"object"}`)
	tools := []gatewayTool{}
	for _, name := range []string{"test_missing_capability", "test_streaming_elicitation", "test_logging_tool", "ask", "sample"} {
		tools = append(tools, gatewayTool{Name: name, Description: "Re-exported " + name + ".", InputSchema: object, Remote: remote(remoteURL, name)})
	}
	if everything != "" {
		tools = append(tools,
			gatewayTool{Name: "everything_elicit", Description: "server-everything's elicitation tool.", InputSchema: object,
				Remote: remote(everything, "trigger-elicitation-request")},
			gatewayTool{Name: "everything_sample", Description: "server-everything's sampling tool.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"},"maxTokens":{"type":"number"}},"required":["prompt"]}`),
				Remote:      remote(everything, "trigger-sampling-request")})
	}
	return tools
}

// startAskingGateway starts the adapter binary as a gateway in front of tools.
func startAskingGateway(t *testing.T, ctx context.Context, stateless bool, tools []gatewayTool, more ...map[string]any) string {
	t.Helper()
	configPath := filepath.Join(t.TempDir(), adapterconfig.ConfigFileName)
	extra := map[string]any{}
	for _, m := range more {
		maps.Copy(extra, m)
	}
	writeGatewayConfigWith(t, configPath, adapterconfig.TransportStreamableHTTP, stateless, tools, extra)
	return peers.StartAdapter(t, ctx, configPath) + adapterconfig.PathMCP
}

// TestGatewayRelaysWhatTheRemoteAsks: the official TypeScript SDK client (protocol
// 2025-11-25) calls through a gateway tools whose remotes ask it something —
// server-everything's elicitation and sampling tools, and the mcp-go remote's — and
// answers; the remote gets the answer. A client that declares neither capability gets
// a clear error promptly, two callers eliciting at once each get only their own
// request, and an import that relays nothing refuses the remote. All of it holds on a
// stateful gateway, which asks on the caller's session, and on a stateless one of one
// replica, which routes the caller's answer back to the call itself.
func TestGatewayRelaysWhatTheRemoteAsks(t *testing.T) {
	ctx := testkit.Context(t, 2*gatewayTimeout)
	remoteURL := startAskingRemote(t)
	everything := peers.StartServerEverything(t, ctx, peers.TransportStreamableHTTP) + "/mcp"
	tools := askingGatewayTools(remoteURL, everything, adapterconfig.RelayElicitation, adapterconfig.RelaySampling)
	unrelayed := askingGatewayTools(remoteURL, "")[3] // ask, through an import that relays nothing
	unrelayed.Name = "ask_unrelayed"
	unrelayed.Remote.Import = "e2e/asking-quiet"
	quietEverything := askingGatewayTools(remoteURL, everything)[5] // everything_elicit, relaying nothing
	quietEverything.Name = "everything_elicit_quiet"
	quietEverything.Remote.Import = "e2e/everything-quiet"
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			gateway := startAskingGateway(t, ctx, stateless, append(tools, unrelayed, quietEverything))

			t.Run("server-everything elicitation", func(t *testing.T) {
				out := peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Call: "everything_elicit",
					Elicit: map[string]any{"name": "Ada Lovelace", "check": true, "email": "ada@example.com"}})
				if out.Result.IsError || !strings.Contains(out.Result.Text(), "Ada Lovelace") || !strings.Contains(out.Result.Text(), "accept") {
					t.Errorf("the elicitation tool answered %q, want the accepted content back", out.Result.Text())
				}
				if len(out.Asked) != 1 || out.Asked[0].Method != "elicitation/create" {
					t.Errorf("the client was asked %+v, want one elicitation/create", out.Asked)
				}
			})
			t.Run("server-everything sampling", func(t *testing.T) {
				out := peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Call: "everything_sample",
					Args: map[string]any{"prompt": "name a colour"}, Sample: "ultramarine"})
				if out.Result.IsError || !strings.Contains(out.Result.Text(), "ultramarine") {
					t.Errorf("the sampling tool answered %q, want the client's sample in it", out.Result.Text())
				}
				if len(out.Asked) != 1 || out.Asked[0].Method != "sampling/createMessage" || !strings.Contains(out.Asked[0].Message, "name a colour") {
					t.Errorf("the client was asked %+v, want one sampling/createMessage with the prompt", out.Asked)
				}
			})
			t.Run("a client without the capability gets an error, not a hang", func(t *testing.T) {
				started := time.Now()
				out := peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Call: "ask", Args: map[string]any{"question": "Anyone there?"}})
				took := time.Since(started)
				if !out.Result.IsError || !strings.Contains(out.Result.Text(), "did not declare the elicitation capability") {
					t.Errorf("a client without elicitation got %q (isError %v), want an error naming the capability", out.Result.Text(), out.Result.IsError)
				}
				t.Logf("answered in %s: %s", took.Round(time.Millisecond), out.Result.Text())
				if took > 5*time.Second {
					t.Errorf("the refusal took %s, want under 5 s", took)
				}
			})
			t.Run("two callers each get their own request", func(t *testing.T) {
				var wg sync.WaitGroup
				outs := make([]peers.TSClientOutput, 2)
				for i := range outs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						outs[i] = peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Call: "ask",
							Args:   map[string]any{"question": fmt.Sprintf("question for caller %d", i)},
							Elicit: map[string]any{"answer": fmt.Sprintf("answer of caller %d", i)}})
					}()
				}
				wg.Wait()
				for i, out := range outs {
					if len(out.Asked) != 1 || out.Asked[0].Message != fmt.Sprintf("question for caller %d", i) {
						t.Errorf("caller %d was asked %+v, want only its own question", i, out.Asked)
					}
					if want := fmt.Sprintf(`answered accept: {"answer":"answer of caller %d"}`, i); out.Result.Text() != want {
						t.Errorf("caller %d got %q, want %q", i, out.Result.Text(), want)
					}
				}
			})
			t.Run("what the probe listed is callable without relay", func(t *testing.T) {
				// server-everything registers its elicitation tool only for clients that declare
				// elicitation. The probe does; so does the gateway's session, relay or not, and
				// the remote's request is refused by name instead of the tool being unknown.
				out := peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Call: "everything_elicit_quiet", Elicit: map[string]any{"name": "x"}})
				if len(out.Asked) != 0 {
					t.Errorf("the client was asked %+v through an import that relays nothing", out.Asked)
				}
				if text := out.Result.Text(); !out.Result.IsError || strings.Contains(strings.ToLower(text), "not found") ||
					!strings.Contains(text, "has not enabled it for import e2e/everything-quiet") {
					t.Errorf("got %q (isError %v), want the refusal naming the import, not an unknown tool", text, out.Result.IsError)
				}
			})
			t.Run("an import that relays nothing refuses the remote", func(t *testing.T) {
				out := peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Call: "ask_unrelayed", Elicit: map[string]any{"answer": "x"}})
				if len(out.Asked) != 0 {
					t.Errorf("the client was asked %+v through an import that relays nothing", out.Asked)
				}
				if !out.Result.IsError || !strings.Contains(out.Result.Text(), "has not enabled it for import e2e/asking-quiet") {
					t.Errorf("got %q (isError %v), want the remote's failure naming the import", out.Result.Text(), out.Result.IsError)
				}
			})

		})
	}
}

// A stateless gateway of more than one replica cannot ask a caller of protocol
// 2025-11-25 (its answer could reach another replica): the remote is told so at once,
// and the caller gets the remote's failure saying why, not a hang.
func TestScaledOutStatelessGatewayTellsTheRemoteItCannotAskAnOlderCaller(t *testing.T) {
	ctx := testkit.Context(t, gatewayTimeout)
	gateway := startAskingGateway(t, ctx, true, askingGatewayTools(startAskingRemote(t), "", adapterconfig.RelayElicitation), map[string]any{"replicas": 3})
	started := time.Now()
	out := peers.TSClient(t, ctx, peers.TSClientOptions{URL: gateway, Call: "ask", Elicit: map[string]any{"answer": "x"}})
	if len(out.Asked) != 0 {
		t.Errorf("the client was asked %+v through a stateless gateway", out.Asked)
	}
	if !out.Result.IsError || !strings.Contains(out.Result.Text(), "this gateway is stateless and runs 3 replicas") {
		t.Errorf("got %q (isError %v), want the remote's failure saying the gateway is stateless with 3 replicas", out.Result.Text(), out.Result.IsError)
	}
	if took := time.Since(started); took > 5*time.Second {
		t.Errorf("the answer took %s, want under 5 s", took)
	}
}

// A stateless gateway of one replica asks a caller of protocol 2025-11-25 on its call's
// own stream, under an id nobody can guess, and takes the answer to that id only from
// the caller asked, and only once: another caller holding the id, a made-up id and a
// replayed answer are each refused 404, and the call still gets its own caller's answer.
func TestStatelessGatewayTakesAnAnswerOnlyFromTheCallerAsked(t *testing.T) {
	ctx := testkit.Context(t, gatewayTimeout)
	tokens := filepath.Join(t.TempDir(), "tokens")
	writeAtomically(t, tokens, []byte("alice-token\nmallory-token\n"))
	gateway := startAskingGateway(t, ctx, true, askingGatewayTools(startAskingRemote(t), "", adapterconfig.RelayElicitation),
		map[string]any{"bearerTokenFile": tokens})
	alice := legacyCaller{t: t, ctx: ctx, url: gateway, token: "alice-token"}
	mallory := legacyCaller{t: t, ctx: ctx, url: gateway, token: "mallory-token"}
	alice.post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{"elicitation": map[string]any{}},
		"clientInfo": map[string]any{"name": "alice", "version": "0"}}}).Body.Close()

	call := alice.post(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
		"params": map[string]any{"name": "ask", "arguments": map[string]any{"question": "Favourite colour?"}}})
	defer call.Body.Close()
	if ct := call.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("the call was answered %s, want an event stream carrying the question", ct)
	}
	events := bufio.NewScanner(call.Body)
	asked := nextMessage(t, events)
	id, _ := asked["id"].(string)
	if asked["method"] != "elicitation/create" || !strings.HasPrefix(id, "cantus-ask-") || len(id) < len("cantus-ask-")+20 {
		t.Fatalf("the caller was asked %v, want elicitation/create under an id of the gateway's", asked)
	}
	answer := func(id any) map[string]any {
		return map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"action": "accept", "content": map[string]any{"answer": "teal"}}}
	}
	for who, attempt := range map[string]struct {
		caller legacyCaller
		id     string
	}{"another caller": {mallory, id}, "a made-up id": {alice, "cantus-ask-made-up"}} {
		resp := attempt.caller.post(answer(attempt.id))
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "no call on this replica waits for this answer") {
			t.Errorf("%s answering: %d %s, want 404 saying no call waits for it", who, resp.StatusCode, body)
		}
	}
	resp := alice.post(answer(id))
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the caller's own answer got %d, want 202", resp.StatusCode)
	}
	var result struct {
		ID     int                `json:"id"`
		Result mcp.CallToolResult `json:"result"`
	}
	encoded, _ := json.Marshal(nextMessage(t, events))
	if err := json.Unmarshal(encoded, &result); err != nil || result.ID != 2 || len(result.Result.Content) != 1 ||
		mcp.GetTextFromContent(result.Result.Content[0]) != `answered accept: {"answer":"teal"}` {
		t.Errorf("the call answered %s, want the remote's result with the caller's answer", encoded)
	}
	replayed := alice.post(answer(id))
	replayed.Body.Close()
	if replayed.StatusCode != http.StatusNotFound {
		t.Errorf("a replayed answer got %d, want 404", replayed.StatusCode)
	}
}

// A caller of a stateless gateway that never answers does not hold its call past the
// remote's: when the import's timeout ends the remote's call, the caller's call ends
// too, with the timeout's failure, not when the caller gives up.
func TestStatelessGatewayEndsACallWhoseCallerNeverAnswers(t *testing.T) {
	ctx := testkit.Context(t, gatewayTimeout)
	tools := askingGatewayTools(startAskingRemote(t), "", adapterconfig.RelayElicitation)
	for i := range tools {
		tools[i].Remote.Timeout = "2s"
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	writeAtomically(t, tokens, []byte("alice-token\n"))
	alice := legacyCaller{t: t, ctx: ctx, url: startAskingGateway(t, ctx, true, tools, map[string]any{"bearerTokenFile": tokens}), token: "alice-token"}
	alice.post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{"elicitation": map[string]any{}},
		"clientInfo": map[string]any{"name": "alice", "version": "0"}}}).Body.Close()

	started := time.Now()
	call := alice.post(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
		"params": map[string]any{"name": "ask", "arguments": map[string]any{"question": "Still there?"}}})
	defer call.Body.Close()
	events := bufio.NewScanner(call.Body)
	if asked := nextMessage(t, events); asked["method"] != "elicitation/create" {
		t.Fatalf("the caller was asked %v, want elicitation/create", asked)
	}
	encoded, _ := json.Marshal(nextMessage(t, events)) // not answered: the call's own answer comes next
	took := time.Since(started)
	if !strings.Contains(string(encoded), `"isError":true`) || !strings.Contains(string(encoded), "within the tool timeout 2s") {
		t.Errorf("the call answered %s, want the failure of the import's timeout", encoded)
	}
	if took > 10*time.Second {
		t.Errorf("the call ended after %s, want soon after the import's 2 s timeout", took.Round(time.Millisecond))
	}
}

// legacyCaller posts JSON-RPC messages of protocol 2025-11-25 to a stateless server,
// with a bearer token.
type legacyCaller struct {
	t          *testing.T
	ctx        context.Context
	url, token string
}

func (c legacyCaller) post(message map[string]any) *http.Response {
	c.t.Helper()
	body, _ := json.Marshal(message)
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%v: %v", message["method"], err)
	}
	return resp
}

// nextMessage reads the next JSON-RPC message of an event stream.
func nextMessage(t *testing.T, events *bufio.Scanner) map[string]any {
	t.Helper()
	for events.Scan() {
		data, ok := strings.CutPrefix(events.Text(), "data: ")
		if !ok {
			continue
		}
		var message map[string]any
		if err := json.Unmarshal([]byte(data), &message); err != nil {
			t.Fatalf("an event holds no JSON message: %v: %s", err, data)
		}
		return message
	}
	t.Fatalf("the stream ended before the next message: %v", events.Err())
	return nil
}

// modernPost sends one request of protocol 2026-07-28 (no session; _meta carries the
// protocol version and the client's capabilities) and returns the HTTP status and the
// decoded answer.
func modernPost(t *testing.T, ctx context.Context, url string, id int, method string, params map[string]any, capabilities map[string]any) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(modernRequest(t, ctx, url, id, method, params, capabilities))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(rest, `"id"`) {
				data = []byte(rest)
			}
		}
	}
	var answer map[string]any
	if err := json.Unmarshal(data, &answer); err != nil {
		t.Fatalf("%s: the answer is not JSON: %v\n%s", method, err, data)
	}
	return resp.StatusCode, answer
}

// modernRequest is a POST of one request of protocol 2026-07-28: no session; _meta
// carries the protocol version and the client's capabilities, and the headers repeat
// the method (and the tool or prompt name).
func modernRequest(t *testing.T, ctx context.Context, url string, id int, method string, params map[string]any, capabilities map[string]any) *http.Request {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcp.ProtocolVersion20260728,
		"io.modelcontextprotocol/clientCapabilities": capabilities,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e-modern", "version": "0"},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20260728)
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	return req
}

// TestGatewayInputRequiredRoundTrip: a caller of protocol 2026-07-28 calls, through a
// stateless gateway, a tool whose remote elicits. It gets an input-required result with
// the remote's request, answers by calling again, and gets the remote's result; a
// requestState is good once and only for its own call; a caller that did not declare
// elicitation gets MissingRequiredClientCapabilityError with HTTP 400.
func TestGatewayInputRequiredRoundTrip(t *testing.T) {
	ctx := testkit.Context(t, gatewayTimeout)
	gateway := startAskingGateway(t, ctx, true, askingGatewayTools(startAskingRemote(t), "", adapterconfig.RelayElicitation))
	elicitation := map[string]any{"elicitation": map[string]any{}}

	status, first := modernPost(t, ctx, gateway, 1, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{"question": "Favourite number?"}}, elicitation)
	result, _ := first["result"].(map[string]any)
	if status != http.StatusOK || result == nil || result["resultType"] != "input_required" {
		t.Fatalf("first call: HTTP %d %v, want an input_required result", status, first)
	}
	requests, _ := result["inputRequests"].(map[string]any)
	state, _ := result["requestState"].(string)
	if len(requests) != 1 || state == "" {
		t.Fatalf("first call: %v, want one input request and a requestState", result)
	}
	var key string
	for k, v := range requests {
		key = k
		req, _ := v.(map[string]any)
		params, _ := req["params"].(map[string]any)
		if req["method"] != "elicitation/create" || params["message"] != "Favourite number?" {
			t.Errorf("the input request is %v, want the remote's elicitation/create", v)
		}
	}

	answer := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"answer": "42"}}}
	status, second := modernPost(t, ctx, gateway, 2, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{},
		"inputResponses": answer, "requestState": state}, elicitation)
	text := resultText(second)
	if status != http.StatusOK || text != `answered accept: {"answer":"42"}` {
		t.Errorf("retry: HTTP %d %q (%v), want the remote's result with the answer", status, text, second)
	}
	_, third := modernPost(t, ctx, gateway, 3, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{},
		"inputResponses": answer, "requestState": state}, elicitation)
	if text := resultText(third); !strings.HasPrefix(text, "mcp_input_expired: ") {
		t.Errorf("a requestState used twice: %q, want mcp_input_expired", text)
	}

	status, refused := modernPost(t, ctx, gateway, 4, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}}, map[string]any{})
	rpcErr, _ := refused["error"].(map[string]any)
	data, _ := rpcErr["data"].(map[string]any)
	required, _ := data["requiredCapabilities"].(map[string]any)
	if status != http.StatusBadRequest || rpcErr == nil || rpcErr["code"] != float64(mcp.MISSING_REQUIRED_CLIENT_CAPABILITY) || required["elicitation"] == nil || refused["id"] != float64(4) {
		t.Errorf("a caller without elicitation: HTTP %d %v, want -32021 naming elicitation with HTTP 400", status, refused)
	}
}

// resultText joins the text blocks of a JSON-RPC answer's tool result.
func resultText(answer map[string]any) string {
	result, _ := answer["result"].(map[string]any)
	content, _ := result["content"].([]any)
	var parts []string
	for _, c := range content {
		if block, ok := c.(map[string]any); ok && block["type"] == "text" {
			parts = append(parts, fmt.Sprint(block["text"]))
		}
	}
	return strings.Join(parts, "\n")
}

// gatewayConformanceScenarios are the scenarios of protocol 2026-07-28 run against a
// stateless gateway in front of the asking remote, whose diagnostic tools the
// server-stateless checks call through the gateway.
var gatewayConformanceScenarios = []string{"server-stateless", "caching", "http-header-validation", "dns-rebinding-protection"}

// gatewayNotApplicable are the checks the gateway cannot pass by construction, and why.
var gatewayNotApplicable = map[string]string{
	"sep-2575-server-sends-prompts-list-changed-on-subscription": "changes the remote's prompt list through a diagnostic tool the asking remote does not have; TestGatewayTransparency checks it against the conformance fixture, which has it",
	"sep-2575-server-sends-tools-list-changed-on-subscription":   "changes the remote's tool list through a diagnostic tool the asking remote does not have; TestGatewayTransparency checks it against the conformance fixture, which has it",
}

// TestGatewayConformance runs the conformance suite's scenarios of protocol 2026-07-28
// against a gateway: the four server-stateless checks that call the suite's diagnostic
// tools (undeclared capability, its HTTP 400, no independent requests on a stream, no
// log without a log level) pass through the gateway to the mcp-go remote that serves
// them; every check is SUCCESS, none skipped.
func TestGatewayConformance(t *testing.T) {
	ctx := testkit.Context(t, conformanceTimeout)
	remoteURL := startAskingRemote(t)
	gateway := startAskingGateway(t, ctx, true, askingGatewayTools(remoteURL, "", adapterconfig.RelayElicitation, adapterconfig.RelaySampling), askingImported(remoteURL))
	for _, scenario := range gatewayConformanceScenarios {
		t.Run(scenario, func(t *testing.T) {
			var counted []peers.Check
			for _, c := range peers.RunConformance(t, ctx, gateway, scenario) {
				if why, ok := gatewayNotApplicable[c.ID]; ok {
					t.Logf("not applicable %s (%s): %s", c.ID, c.Status, why)
					continue
				}
				counted = append(counted, c)
			}
			peers.RequireChecksPassed(t, scenario, counted)
		})
	}
}
