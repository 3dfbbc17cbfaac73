// Package conformanceremote is a remote MCP server for tests, written on mcp-go, that
// serves what the server scenarios of the official conformance suite
// (@modelcontextprotocol/conformance, pinned in test/mcp-peers) call, in both protocol
// eras on one endpoint: 2025-11-25 with initialize and sessions, and 2026-07-28
// (server/discover, per-request _meta, input-required results).
//
// It is the project's own stand-in for the suite's reference server, which is not
// published on npm: its names, contents and answers are the ones the scenarios check
// for, learnt by reading the scenarios. Like the reference server, it lists some tools
// and a prompt only to clients of 2026-07-28 (the input-required diagnostics of
// SEP-2322 and the diagnostic tools of server-stateless), so an importer that only
// speaks 2025-11-25 never sees them.
//
// Tools that ask the caller something (sampling, elicitation, roots) are written the
// 2026-07-28 way, returning input-required results; mcp-go turns those into server
// requests on the session for a 2025-11-25 caller, so one handler serves both eras.
// What mcp-go v1.2.1 lacks the fixture answers before it: the Tasks extension of
// 2026-07-28 (tasks.go), a stream closed mid-call and resumed (polling.go), and a few
// refusals mcp-go cannot shape (modern.go). It passes every server scenario of the
// pinned suite but tasks-status-notifications, which records only a SKIPPED check.
package conformanceremote

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Content the scenarios look for.
const (
	// PNG is a 1×1 PNG, WAV a minimal WAV file, both base64.
	PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

	// WatchedResource is the resource resources-subscribe subscribes to.
	WatchedResource = "test://watched-resource"
	// ModernResource is listed to every era; its text says it is the modern one's.
	ModernResource = "test://stateless-static-text"
	// ModernPrompt is the prompt listed only in 2026-07-28 (SEP-2322 on prompts/get).
	ModernPrompt = "test_input_required_result_prompt"
)

// modernOnlyTools are listed, and callable, only by clients of 2026-07-28: the tools
// the input-required-result-* and server-stateless scenarios call.
var modernOnlyTools = []string{
	"test_missing_capability",
	"test_input_required_result_elicitation",
	"test_input_required_result_sampling",
	"test_input_required_result_list_roots",
	"test_input_required_result_request_state",
	"test_input_required_result_multiple_inputs",
	"test_input_required_result_multi_round",
	"test_input_required_result_tampered_state",
	"test_input_required_result_capabilities",
	"test_streaming_elicitation",
	"test_logging_tool",
	"test_trigger_tool_change",
	"test_trigger_prompt_change",
}

// Remote is a running fixture.
type Remote struct {
	// URL is the MCP endpoint, …/mcp.
	URL string

	mcp *server.MCPServer
	// key signs the requestState of the tampered-state tool.
	key []byte
	// reconnections are the calls of test_reconnection awaiting their resumption.
	reconnections reconnections
	// tasks are the tasks of the Tasks extension (tasks.go).
	tasks tasks
}

// Start runs the fixture until the test ends.
func Start(t testing.TB) *Remote {
	t.Helper()
	r := &Remote{key: make([]byte, 32)}
	if _, err := rand.Read(r.key); err != nil {
		t.Fatalf("conformanceremote: %v", err)
	}
	r.mcp = server.NewMCPServer("cantus-conformance-remote", "1.0.0",
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true),
		server.WithLogging(),
		server.WithCompletions(),
		server.WithExtensions(map[string]any{TasksExtension: map[string]any{}}),
		server.WithPromptCompletionProvider(noCompletions{}),
		server.WithResourceCompletionProvider(noCompletions{}),
		// SEP-2549: list and read results of 2026-07-28 carry caching hints.
		server.WithCacheHints(300000, mcp.CacheScopePublic),
		server.WithToolFilter(onlyModernSees(modernOnlyTools)),
		server.WithPromptFilter(func(ctx context.Context, prompts []mcp.Prompt) []mcp.Prompt {
			if server.IsModernRequest(ctx) {
				return prompts
			}
			return slices.DeleteFunc(prompts, func(p mcp.Prompt) bool { return p.Name == ModernPrompt })
		}),
	)
	r.addContentTools()
	r.addAskingTools()
	r.addModernTools()
	r.addTaskTools()
	r.addResources()
	r.addPrompts()
	// Stateful: a terminated session is remembered and answered 404 (server-session-lifecycle).
	handler := server.NewStreamableHTTPServer(r.mcp, server.WithStateful(true), server.WithEventStore(server.NewInMemoryEventStore()))
	srv := httptest.NewServer(r.intercept(handler))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	r.URL = srv.URL + "/mcp"
	return r
}

// onlyModernSees hides names from clients of 2025-11-25.
func onlyModernSees(names []string) server.ToolFilterFunc {
	return func(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
		if server.IsModernRequest(ctx) {
			return tools
		}
		return slices.DeleteFunc(slices.Clone(tools), func(tool mcp.Tool) bool { return slices.Contains(names, tool.Name) })
	}
}

// text is a tool handler answering one text block.
func text(s string) server.ToolHandlerFunc {
	return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(s), nil
	}
}

// addContentTools adds the tools of the tools-call-* scenarios that only answer.
func (r *Remote) addContentTools() {
	s := r.mcp
	s.AddTool(mcp.NewTool("test_simple_text", mcp.WithDescription("Answers one text block.")),
		text("This is a simple text response for testing."))
	s.AddTool(mcp.NewTool("test_image_content", mcp.WithDescription("Answers one image block.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent(PNG, "image/png")}}, nil
		})
	s.AddTool(mcp.NewTool("test_audio_content", mcp.WithDescription("Answers one audio block.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewAudioContent(WAV, "audio/wav")}}, nil
		})
	s.AddTool(mcp.NewTool("test_embedded_resource", mcp.WithDescription("Answers one embedded resource.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewEmbeddedResource(mcp.TextResourceContents{
				URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content.",
			})}}, nil
		})
	s.AddTool(mcp.NewTool("test_multiple_content_types", mcp.WithDescription("Answers text, an image and a resource.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				mcp.NewTextContent("Multiple content types test:"),
				mcp.NewImageContent(PNG, "image/png"),
				mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}),
			}}, nil
		})
	s.AddTool(mcp.NewTool("test_error_handling", mcp.WithDescription("Always fails, as a tool error.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("This tool intentionally returns an error for testing"), nil
		})
	// Answered before mcp-go for a session (polling.go); mcp-go answers other callers.
	s.AddTool(mcp.NewTool(reconnectionTool, mcp.WithDescription("Closes its stream mid-call; the result comes when the client resumes (SEP-1699).")),
		text(reconnectionText))
	s.AddTool(mcp.NewTool("test_tool_with_logging", mcp.WithDescription("Logs three messages while it runs.")), logThrice)
	s.AddTool(mcp.NewTool("test_tool_with_progress", mcp.WithDescription("Reports progress 0, 50 and 100 of 100.")), reportProgress)
	// SEP-2243: region travels in the Mcp-Param-Region header too, which a call of
	// 2026-07-28 must repeat exactly (http-custom-header-server-validation).
	s.AddTool(mcp.NewToolWithRawSchema("test_custom_header", "Answers the region it was called for; the region is repeated in a header.",
		[]byte(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("region: " + req.GetString("region", "")), nil
		})
	s.AddTool(mcp.NewToolWithRawSchema("json_schema_2020_12_tool", "Has an input schema of JSON Schema 2020-12 (SEP-1613, SEP-2106).", []byte(schema2020)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args, _ := json.Marshal(req.GetArguments())
			return mcp.NewToolResultText("JSON Schema 2020-12 tool called with: " + string(args)), nil
		})
}

// schema2020 keeps the keywords json-schema-2020-12 checks are preserved: $schema,
// $defs with an $anchor, $ref, composition, conditionals, additionalProperties.
const schema2020 = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"},
    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
    "phone": {"type": "string"},
    "email": {"type": "string"}
  },
  "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
  "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
  "then": {"required": ["phone"]},
  "else": {"required": ["email"]},
  "additionalProperties": false
}`

// logThrice sends three log messages, a little apart, then answers.
func logThrice(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s := server.ServerFromContext(ctx)
	for i, message := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if i > 0 {
			pause(ctx)
		}
		if err := s.SendNotificationToClient(ctx, string(mcp.MethodNotificationMessage),
			map[string]any{"level": "info", "logger": "conformance-remote", "data": message}); err != nil {
			return nil, fmt.Errorf("log message %d: %w", i, err)
		}
		awaitWritten(ctx, i+1)
	}
	return mcp.NewToolResultText("Tool with logging executed successfully"), nil
}

// reportProgress reports progress under the caller's token, then answers the token.
func reportProgress(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	if token == nil {
		return mcp.NewToolResultText("no progress token"), nil
	}
	s := server.ServerFromContext(ctx)
	for i, progress := range []int{0, 50, 100} {
		if i > 0 {
			pause(ctx)
		}
		if err := s.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
			"progressToken": token, "progress": progress, "total": 100, "message": fmt.Sprintf("Completed step %d of 100", progress),
		}); err != nil {
			return nil, fmt.Errorf("progress %d: %w", progress, err)
		}
		awaitWritten(ctx, i+1)
	}
	return mcp.NewToolResultText(fmt.Sprint(token)), nil
}

// pause spaces notifications apart, as a tool that works between them would: the
// scenarios check they arrive before the result, in order.
func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(50 * time.Millisecond):
	}
}

// addAskingTools adds the tools of 2025-11-25 that ask the caller mid-call.
func (r *Remote) addAskingTools() {
	s := r.mcp
	s.AddTool(mcp.NewTool("test_sampling", mcp.WithDescription("Asks the client's model to answer a prompt."),
		mcp.WithString("prompt", mcp.Description("The prompt to send to the LLM"), mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if answer := server.SamplingResponse(req.Params.InputResponses, "sample"); answer != nil {
				return mcp.NewToolResultText("LLM response: " + sampledText(answer)), nil
			}
			return server.NewInputRequestBuilder("").Sample("sample", mcp.CreateMessageParams{
				Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(req.GetString("prompt", ""))}},
				MaxTokens: 100,
			}).ToolResult(), nil
		})
	s.AddTool(mcp.NewTool("test_elicitation", mcp.WithDescription("Asks the user for a response."),
		mcp.WithString("message", mcp.Description("The message to show the user"), mcp.Required())),
		elicit(func(req mcp.CallToolRequest) mcp.ElicitationParams {
			return mcp.ElicitationParams{Message: req.GetString("message", ""), RequestedSchema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"response": map[string]any{"type": "string", "description": "User's response"}},
				"required":   []string{"response"},
			}}
		}, "User response: action=%s, content=%s"))
	s.AddTool(mcp.NewTool("test_elicitation_sep1034_defaults", mcp.WithDescription("Elicits a form whose fields have defaults (SEP-1034).")),
		elicit(func(mcp.CallToolRequest) mcp.ElicitationParams {
			return mcp.ElicitationParams{Message: "Please review and update the form fields with defaults", RequestedSchema: jsonObject(sep1034Schema)}
		}, "Elicitation completed: action=%s, content=%s"))
	s.AddTool(mcp.NewTool("test_elicitation_sep1330_enums", mcp.WithDescription("Elicits every kind of enum field (SEP-1330).")),
		elicit(func(mcp.CallToolRequest) mcp.ElicitationParams {
			return mcp.ElicitationParams{Message: "Please select options from the enum fields", RequestedSchema: jsonObject(sep1330Schema)}
		}, "Elicitation completed: action=%s, content=%s"))
}

const sep1034Schema = `{"type":"object","required":[],"properties":{
  "name":{"type":"string","description":"User name","default":"John Doe"},
  "age":{"type":"integer","description":"User age","default":30},
  "score":{"type":"number","description":"User score","default":95.5},
  "status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},
  "verified":{"type":"boolean","description":"Verification status","default":true}}}`

const sep1330Schema = `{"type":"object","required":[],"properties":{
  "untitledSingle":{"type":"string","description":"Select one option","enum":["option1","option2","option3"]},
  "titledSingle":{"type":"string","description":"Select one option with titles","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},
  "legacyEnum":{"type":"string","description":"Select one option (legacy)","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},
  "untitledMulti":{"type":"array","description":"Select multiple options","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},
  "titledMulti":{"type":"array","description":"Select multiple options with titles","minItems":1,"maxItems":3,"items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}}}`

func jsonObject(s string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		panic(fmt.Sprintf("conformanceremote: a constant schema is not JSON: %v", err))
	}
	return m
}

// elicit is a tool that elicits what params says, then answers format with the
// action and the content the caller answered.
func elicit(params func(mcp.CallToolRequest) mcp.ElicitationParams, format string) server.ToolHandlerFunc {
	return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if answer := server.ElicitationResponse(req.Params.InputResponses, "user"); answer != nil {
			content, _ := json.Marshal(answer.Content)
			if answer.Content == nil {
				content = []byte("{}")
			}
			return mcp.NewToolResultText(fmt.Sprintf(format, answer.Action, content)), nil
		}
		return server.NewInputRequestBuilder("").Elicit("user", params(req)).ToolResult(), nil
	}
}

// sampledText is the text a sampling answer holds, "No response" if none.
func sampledText(answer *mcp.CreateMessageResult) string {
	if t, ok := mcp.AsTextContent(answer.Content); ok && t != nil {
		return t.Text
	}
	return "No response"
}

// answeredField is the string under field in an elicitation answer's content,
// "unknown" if there is none.
func answeredField(answer *mcp.ElicitationResult, field string) string {
	if answer == nil {
		return "unknown"
	}
	content, _ := answer.Content.(map[string]any)
	if s, ok := content[field].(string); ok {
		return s
	}
	return "unknown"
}

// noCompletions answers every completion request with no values: completion-complete
// checks the shape of the answer, not what it proposes.
type noCompletions struct{}

func (noCompletions) CompletePromptArgument(context.Context, string, mcp.CompleteArgument, mcp.CompleteContext) (*mcp.Completion, error) {
	return &mcp.Completion{Values: []string{}}, nil
}

func (noCompletions) CompleteResourceArgument(context.Context, string, mcp.CompleteArgument, mcp.CompleteContext) (*mcp.Completion, error) {
	return &mcp.Completion{Values: []string{}}, nil
}

// addResources adds the resources and the template of the resources-* scenarios.
func (r *Remote) addResources() {
	s := r.mcp
	static := func(uri, name, title, description, mime string, contents mcp.ResourceContents) {
		s.AddResource(mcp.NewResource(uri, name, mcp.WithResourceTitle(title), mcp.WithResourceDescription(description), mcp.WithMIMEType(mime)),
			func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{contents}, nil
			})
	}
	static("test://static-text", "static-text", "Static Text Resource", "A static text resource for testing", "text/plain",
		mcp.TextResourceContents{URI: "test://static-text", MIMEType: "text/plain", Text: "This is the content of the static text resource."})
	static("test://static-binary", "static-binary", "Static Binary Resource", "A static binary resource (image) for testing", "image/png",
		mcp.BlobResourceContents{URI: "test://static-binary", MIMEType: "image/png", Blob: PNG})
	static(WatchedResource, "watched-resource", "Watched Resource", "A resource clients may subscribe to", "text/plain",
		mcp.TextResourceContents{URI: WatchedResource, MIMEType: "text/plain", Text: "Watched resource content"})
	static(ModernResource, "Stateless Static Text", "Stateless Static Text", "A static text resource", "text/plain",
		mcp.TextResourceContents{URI: ModernResource, MIMEType: "text/plain", Text: "Static text content from the stateless draft path."})
	s.AddResourceTemplate(mcp.NewResourceTemplate("test://template/{id}/data", "template", mcp.WithTemplateTitle("Resource Template"),
		mcp.WithTemplateDescription("A resource template with parameter substitution"), mcp.WithTemplateMIMEType("application/json")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
			data, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "application/json", Text: string(data)}}, nil
		})
}

// addPrompts adds the prompts of the prompts-* scenarios and the input-required one.
func (r *Remote) addPrompts() {
	s := r.mcp
	user := func(c mcp.Content) mcp.PromptMessage { return mcp.NewPromptMessage(mcp.RoleUser, c) }
	s.AddPrompt(mcp.NewPrompt("test_simple_prompt", mcp.WithPromptTitle("Simple Test Prompt"), mcp.WithPromptDescription("A simple prompt without arguments")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("", []mcp.PromptMessage{user(mcp.NewTextContent("This is a simple prompt for testing."))}), nil
		})
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_arguments", mcp.WithPromptTitle("Prompt With Arguments"), mcp.WithPromptDescription("A prompt with required arguments"),
		mcp.WithArgument("arg1", mcp.ArgumentDescription("First test argument"), mcp.RequiredArgument()),
		mcp.WithArgument("arg2", mcp.ArgumentDescription("Second test argument"), mcp.RequiredArgument())),
		func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return mcp.NewGetPromptResult("", []mcp.PromptMessage{user(mcp.NewTextContent(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])))}), nil
		})
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_embedded_resource", mcp.WithPromptTitle("Prompt With Embedded Resource"),
		mcp.WithPromptDescription("A prompt that includes an embedded resource"),
		mcp.WithArgument("resourceUri", mcp.ArgumentDescription("URI of the resource to embed"), mcp.RequiredArgument())),
		func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("", []mcp.PromptMessage{
				user(mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."})),
				user(mcp.NewTextContent("Please process the embedded resource above.")),
			}), nil
		})
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_image", mcp.WithPromptTitle("Prompt With Image"), mcp.WithPromptDescription("A prompt that includes image content")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("", []mcp.PromptMessage{
				user(mcp.NewImageContent(PNG, "image/png")),
				user(mcp.NewTextContent("Please analyze the image above.")),
			}), nil
		})
	s.AddPrompt(mcp.NewPrompt(ModernPrompt, mcp.WithPromptDescription("Asks the user for context before it is rendered (SEP-2322).")),
		func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if answer := server.ElicitationResponse(req.Params.InputResponses, "user_context"); answer != nil {
				return mcp.NewGetPromptResult("", []mcp.PromptMessage{user(mcp.NewTextContent("Prompt with context: " + answeredField(answer, "context")))}), nil
			}
			return server.NewInputRequestBuilder("").Elicit("user_context", mcp.ElicitationParams{
				Message:         "What context should the prompt use?",
				RequestedSchema: jsonObject(`{"type":"object","properties":{"context":{"type":"string"}},"required":["context"]}`),
			}).PromptResult(), nil
		})
}

// sign returns payload as a requestState the fixture can verify: payload.hexMAC.
func (r *Remote) sign(payload map[string]any) string {
	data, _ := json.Marshal(payload)
	mac := hmac.New(sha256.New, r.key)
	mac.Write(data)
	return string(data) + "." + hex.EncodeToString(mac.Sum(nil))
}

// verify returns the payload of a state sign made, or nil if it was altered.
func (r *Remote) verify(state string) map[string]any {
	i := strings.LastIndexByte(state, '.')
	if i < 0 {
		return nil
	}
	got, err := hex.DecodeString(state[i+1:])
	if err != nil {
		return nil
	}
	mac := hmac.New(sha256.New, r.key)
	mac.Write([]byte(state[:i]))
	if !hmac.Equal(got, mac.Sum(nil)) {
		return nil
	}
	var payload map[string]any
	if json.Unmarshal([]byte(state[:i]), &payload) != nil {
		return nil
	}
	return payload
}

// nonce makes every requestState unique.
func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
