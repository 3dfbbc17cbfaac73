// Package dualera is a remote MCP server for tests, on mcp-go, that serves protocol
// 2026-07-28 (stateless, server/discover, input-required results), 2025-11-25
// (initialize and sessions), or both, and records every request it gets.
//
// It serves a resource (ResourceURI) and a prompt (PromptName) in every era it
// serves; a prompt PromptConfirm listed, and served, only in 2026-07-28, which asks
// for an elicitation as confirm does, then says "confirmed: <content>"; and these
// tools:
//   - echo {text}: answers "echo: <text>" in every era it serves;
//   - confirm {}: asks for an elicitation (an input-required result whose
//     requestState is StateAsked), then answers "confirmed: <content>" with what the
//     elicitation answered, when the retry brings that state back;
//   - modern_only {}: listed, and callable, only in 2026-07-28; answers "modern";
//   - versioned {}: listed in every era, described LegacyDescription in 2025-11-25
//     and ModernDescription in 2026-07-28 (or as DescribeModern says); answers
//     "versioned";
//   - region {region}: its argument is marked x-mcp-header "Region" (SEP-2243), so a
//     call of 2026-07-28 without a matching Mcp-Param-Region header is refused;
//     answers "region: <region>".
package dualera

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// Eras the fixture serves.
type Eras int

const (
	// Both serves 2026-07-28 and 2025-11-25 on one stateless endpoint.
	Both Eras = iota
	// LegacyOnly serves 2025-11-25 with sessions and refuses server/discover as a
	// server before 2026-07-28 does (method not found).
	LegacyOnly
	// ModernOnly serves 2026-07-28 and refuses initialize.
	ModernOnly
)

// Tool names and the requestState the confirm tool asks with.
const (
	ToolEcho       = "echo"
	ToolConfirm    = "confirm"
	ToolModernOnly = "modern_only"
	ToolRegion     = "region"
	ToolVersioned  = "versioned"
	// LegacyDescription and ModernDescription describe versioned in each era.
	LegacyDescription = "described for 2025-11-25"
	ModernDescription = "described for 2026-07-28"
	// ResourceURI is a text resource reading "guide text"; PromptName a prompt
	// saying "hello prompt".
	ResourceURI = "docs://guide"
	PromptName  = "hello"
	// PromptConfirm is the prompt of 2026-07-28 only that asks before it is given.
	PromptConfirm = "confirm_prompt"
	// RegionSchema is region's inputSchema.
	RegionSchema = `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`
	StateAsked   = "remote-state-asked-once"
	// ElicitationKey names confirm's input request.
	ElicitationKey = "confirm"
)

// Request is one request the fixture got, as it came.
type Request struct {
	Method string
	// ProtocolHeader, McpMethod and McpName are the headers MCP-Protocol-Version,
	// Mcp-Method and Mcp-Name.
	ProtocolHeader, McpMethod, McpName string
	// Meta is params._meta.
	Meta map[string]json.RawMessage
	// Name is params.name; RequestState and InputResponses those of a retry.
	Name           string
	RequestState   string
	InputResponses json.RawMessage
	// Header is every header of the request.
	Header http.Header
}

// MetaString is the string under key in r's _meta, "" if none.
func (r Request) MetaString(key string) string {
	var s string
	_ = json.Unmarshal(r.Meta[key], &s)
	return s
}

// Remote is a running fixture.
type Remote struct {
	URL string // the MCP endpoint, …/mcp

	mu       sync.Mutex
	requests []Request
	// modernDescription describes versioned in 2026-07-28 (DescribeModern).
	modernDescription string
}

// DescribeModern changes how versioned is described to clients of 2026-07-28 from
// then on: its definition changes in that era only.
func (r *Remote) DescribeModern(description string) {
	r.mu.Lock()
	r.modernDescription = description
	r.mu.Unlock()
}

func (r *Remote) describedModern() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.modernDescription
}

// Start runs a fixture serving eras until the test ends.
func Start(t testing.TB, eras Eras) *Remote {
	t.Helper()
	r := &Remote{modernDescription: ModernDescription}
	filter := server.WithToolFilter(func(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
		modern := server.IsModernRequest(ctx)
		out := tools[:0:0]
		for _, tool := range tools {
			switch {
			case tool.Name == ToolModernOnly && !modern:
				continue
			case tool.Name == ToolVersioned && modern:
				tool.Description = r.describedModern()
			}
			out = append(out, tool)
		}
		return out
	})
	promptFilter := server.WithPromptFilter(func(ctx context.Context, prompts []mcp.Prompt) []mcp.Prompt {
		if server.IsModernRequest(ctx) {
			return prompts
		}
		return slices.DeleteFunc(prompts, func(p mcp.Prompt) bool { return p.Name == PromptConfirm })
	})
	s := server.NewMCPServer("dualera", "1.0.0", server.WithToolCapabilities(false), server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false), filter, promptFilter)
	s.AddResource(mcp.NewResource(ResourceURI, "guide", mcp.WithMIMEType("text/plain")), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: ResourceURI, MIMEType: "text/plain", Text: "guide text"}}, nil
	})
	s.AddPrompt(mcp.NewPrompt(PromptName), func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return mcp.NewGetPromptResult("hello", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("hello prompt"))}), nil
	})
	s.AddPrompt(mcp.NewPrompt(PromptConfirm), confirmPrompt)
	s.AddTool(mcp.NewTool(ToolEcho, mcp.WithString("text", mcp.Required())), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo: " + req.GetString("text", "")), nil
	})
	s.AddTool(mcp.NewTool(ToolConfirm), confirm)
	s.AddTool(mcp.NewToolWithRawSchema(ToolRegion, "", []byte(RegionSchema)), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("region: " + req.GetString("region", "")), nil
	})
	s.AddTool(mcp.NewTool(ToolModernOnly), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("modern"), nil
	})
	s.AddTool(mcp.NewTool(ToolVersioned, mcp.WithDescription(LegacyDescription)), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("versioned"), nil
	})
	var opts []server.StreamableHTTPOption
	switch eras {
	case Both:
		opts = append(opts, server.WithStateLess(true))
	case ModernOnly:
		opts = append(opts, server.WithStateLess(true), server.WithStreamableHTTPProtocolVersions(mcp.ProtocolVersion20260728))
	case LegacyOnly:
		opts = append(opts, server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...))
	}
	handler := server.NewStreamableHTTPServer(s, opts...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		rec, ok := r.record(req, body)
		switch {
		case ok && eras == LegacyOnly && rec.Method == string(mcp.MethodServerDiscover):
			refuse(w, body, mcp.METHOD_NOT_FOUND, "Method not found")
			return
		case ok && eras == ModernOnly && rec.Method == string(mcp.MethodInitialize):
			refuse(w, body, mcp.INVALID_REQUEST, "this server speaks protocol 2026-07-28 only")
			return
		}
		handler.ServeHTTP(w, req)
	}))
	testkit.CloseAtEnd(t, srv)
	r.URL = srv.URL + "/mcp"
	return r
}

// confirm asks for an elicitation, then answers with what it got.
func confirm(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	answer := server.ElicitationResponse(req.Params.InputResponses, ElicitationKey)
	if answer == nil || req.Params.RequestState != StateAsked {
		return askToConfirm().ToolResult(), nil
	}
	return mcp.NewToolResultText(confirmation(answer)), nil
}

// confirmPrompt asks for an elicitation as confirm does, then gives a prompt saying
// what the elicitation answered.
func confirmPrompt(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	answer := server.ElicitationResponse(req.Params.InputResponses, ElicitationKey)
	if answer == nil || req.Params.RequestState != StateAsked {
		return askToConfirm().PromptResult(), nil
	}
	return mcp.NewGetPromptResult("confirmed", []mcp.PromptMessage{
		mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(confirmation(answer))),
	}), nil
}

// askToConfirm is the input request of confirm and confirmPrompt, with StateAsked.
func askToConfirm() *server.InputRequestBuilder {
	return server.NewInputRequestBuilder(StateAsked).Elicit(ElicitationKey, mcp.ElicitationParams{
		Message:         "Confirm?",
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
	})
}

// confirmation is "confirmed: <action> <content>" of an elicitation's answer.
func confirmation(answer *mcp.ElicitationResult) string {
	content, _ := json.Marshal(answer.Content)
	return fmt.Sprintf("confirmed: %s %s", answer.Action, content)
}

func (r *Remote) record(req *http.Request, body []byte) (Request, bool) {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Meta           map[string]json.RawMessage `json:"_meta"`
			Name           string                     `json:"name"`
			RequestState   string                     `json:"requestState"`
			InputResponses json.RawMessage            `json:"inputResponses"`
		} `json:"params"`
	}
	if req.Method != http.MethodPost || json.Unmarshal(body, &msg) != nil || msg.Method == "" {
		return Request{}, false
	}
	rec := Request{Method: msg.Method, ProtocolHeader: req.Header.Get("MCP-Protocol-Version"), McpMethod: req.Header.Get("Mcp-Method"),
		McpName: req.Header.Get("Mcp-Name"), Meta: msg.Params.Meta, Name: msg.Params.Name, RequestState: msg.Params.RequestState,
		InputResponses: msg.Params.InputResponses, Header: req.Header.Clone()}
	r.mu.Lock()
	r.requests = append(r.requests, rec)
	r.mu.Unlock()
	return rec, true
}

func refuse(w http.ResponseWriter, body []byte, code int, message string) {
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": code, "message": message}})
}

// Requests are the requests the fixture got of method ("" for all), in order.
func (r *Remote) Requests(method string) []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Request
	for _, req := range r.requests {
		if method == "" || req.Method == method {
			out = append(out, req)
		}
	}
	return out
}

// Calls are the tools/call requests of tool, in order.
func (r *Remote) Calls(tool string) []Request {
	var out []Request
	for _, req := range r.Requests(string(mcp.MethodToolsCall)) {
		if req.Name == tool {
			out = append(out, req)
		}
	}
	return out
}

// Methods lists the methods of every request, for messages.
func (r *Remote) Methods() string {
	var names []string
	for _, req := range r.Requests("") {
		names = append(names, req.Method+"@"+req.ProtocolHeader)
	}
	return strings.Join(names, " ")
}
