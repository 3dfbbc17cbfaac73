package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Transports, as the adapter config and the SkillServer API name them.
const (
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
)

// TSClientOptions drives test/mcp-peers/ts-client.mjs (the official TypeScript SDK
// Client).
type TSClientOptions struct {
	// URL is the full MCP endpoint, e.g. http://127.0.0.1:1234/mcp or …/sse.
	URL string
	// Transport is TransportStreamableHTTP (default) or TransportSSE.
	Transport string
	// Headers are sent with every request, e.g. {"Authorization": "Bearer x"}.
	Headers map[string]string
	// Call, when set, is the tool to call after listing; Args are its arguments
	// (anything encoding/json marshals to an object; nil sends {}).
	Call string
	Args any
	// Timeout bounds each MCP request (default 20s); ctx bounds the whole run.
	Timeout time.Duration
	// Progress asks for progress notifications about the call and collects them;
	// CancelAfterProgress > 0 cancels the call (notifications/cancelled) once that
	// many have arrived.
	Progress            bool
	CancelAfterProgress int
	// Elicit, when set, declares the elicitation capability and accepts every
	// elicitation/create with this content; Sample, when set, declares sampling and
	// answers every sampling/createMessage with this text.
	Elicit map[string]any
	Sample string
	// Declare names more capabilities to declare ("elicitation", "roots",
	// "sampling"; "elicitation-url" for URL-mode elicitation), to list what a server
	// offers clients that have them; the requests they bring are declined.
	Declare []string
	// Subscribe, when set, is a resource URI to subscribe to before the call;
	// WaitUpdated > 0 waits after the call until that many
	// notifications/resources/updated about it arrived (at most Timeout).
	Subscribe   string
	WaitUpdated int
	// CallErrorOK reports a call answered with a JSON-RPC error in
	// TSClientOutput.CallError rather than failing the run.
	CallErrorOK bool
}

// TSClientOutput is the JSON object ts-client.mjs prints.
type TSClientOutput struct {
	ServerInfo      Implementation             `json:"serverInfo"`
	ProtocolVersion string                     `json:"protocolVersion"`
	Capabilities    map[string]json.RawMessage `json:"capabilities"`
	Instructions    string                     `json:"instructions"`
	Tools           []Tool                     `json:"tools"`
	// Result is set when TSClientOptions.Call was and the call was not cancelled.
	Result *CallToolResult `json:"result,omitempty"`
	// Progress are the progress notifications' params about the call, Logs the
	// params of every notifications/message received, Cancelled whether the client
	// cancelled the call.
	Progress  []json.RawMessage `json:"progress,omitempty"`
	Logs      []json.RawMessage `json:"logs,omitempty"`
	Cancelled bool              `json:"cancelled,omitempty"`
	// Asked are the requests the server sent the client during the call.
	Asked []AskedRequest `json:"asked,omitempty"`
	// Updated are the URIs of the notifications/resources/updated received (with
	// TSClientOptions.Subscribe).
	Updated []string `json:"updated,omitempty"`
	// CallError is the JSON-RPC error the call was answered with (CallErrorOK).
	CallError *CallError `json:"callError,omitempty"`
}

// CallError is a JSON-RPC error as the SDK surfaced it.
type CallError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// AskedRequest is a request the server sent the client: its method and message (the
// elicitation's message, or the text of the first sampling message).
type AskedRequest struct {
	Method  string `json:"method"`
	Message string `json:"message"`
}

// Implementation is the serverInfo of an initialize answer.
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// Tool is one entry of tools/list, as the client received it.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	// Raw is the whole entry as the client listed it, every member included.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the whole entry in Raw besides the fields.
func (t *Tool) UnmarshalJSON(data []byte) error {
	type fields Tool
	var f fields
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("tool entry: %w", err)
	}
	*t = Tool(f)
	t.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// CallToolResult is a tools/call result.
type CallToolResult struct {
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	// Raw is the whole result as the client received it.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the whole result in Raw besides the fields.
func (r *CallToolResult) UnmarshalJSON(data []byte) error {
	type fields CallToolResult
	var f fields
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("tool result: %w", err)
	}
	*r = CallToolResult(f)
	r.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// Content is one content block of a tool result.
type Content struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
}

// Text joins the text blocks of the result.
func (r *CallToolResult) Text() string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolNames lists the names of the tools, in the server's order.
func (o TSClientOutput) ToolNames() []string {
	names := make([]string, 0, len(o.Tools))
	for _, t := range o.Tools {
		names = append(names, t.Name)
	}
	return names
}

// TSClient connects with the TypeScript SDK client, lists every tool, optionally calls
// one, and returns what the client saw. Any failure (connection, handshake, request)
// fails the test; a tool result with isError is returned, not a failure.
func TSClient(t testing.TB, ctx context.Context, opts TSClientOptions) TSClientOutput {
	t.Helper()
	out, err := TryTSClient(t, ctx, opts)
	if err != nil {
		t.Fatalf("peers: TypeScript SDK client against %s (%s): %v", opts.URL, opts.transport(), err)
	}
	return out
}

// TryTSClient is TSClient returning the failure instead, for tests that expect the
// connection to be refused (the error holds the client's stderr, e.g. "HTTP 401").
func TryTSClient(t testing.TB, ctx context.Context, opts TSClientOptions) (TSClientOutput, error) {
	t.Helper()
	if opts.URL == "" {
		t.Fatalf("peers: TSClientOptions.URL is required")
	}
	args := []string{filepath.Join(Dir(t), "ts-client.mjs"), "--url", opts.URL, "--transport", opts.transport()}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	args = append(args, "--timeout", strconv.FormatInt(timeout.Milliseconds(), 10))
	for k, v := range opts.Headers {
		args = append(args, "--header", k+": "+v)
	}
	if len(opts.Declare) > 0 {
		args = append(args, "--declare", strings.Join(opts.Declare, ","))
	}
	if opts.Subscribe != "" {
		args = append(args, "--subscribe", opts.Subscribe)
		if opts.WaitUpdated > 0 {
			args = append(args, "--wait-updated", strconv.Itoa(opts.WaitUpdated))
		}
	}
	if opts.Call != "" {
		args = append(args, "--call", opts.Call)
		if opts.Progress {
			args = append(args, "--progress")
		}
		if opts.CancelAfterProgress > 0 {
			args = append(args, "--cancel-after-progress", strconv.Itoa(opts.CancelAfterProgress))
		}
		if opts.Elicit != nil {
			b, err := json.Marshal(opts.Elicit)
			if err != nil {
				t.Fatalf("peers: TSClientOptions.Elicit: %v", err)
			}
			args = append(args, "--elicit", string(b))
		}
		if opts.Sample != "" {
			args = append(args, "--sample", opts.Sample)
		}
		if opts.CallErrorOK {
			args = append(args, "--call-error-ok")
		}
		if opts.Args != nil {
			b, err := json.Marshal(opts.Args)
			if err != nil {
				t.Fatalf("peers: TSClientOptions.Args: %v", err)
			}
			args = append(args, "--args", string(b))
		}
	}
	r := run(ctx, Dir(t), nil, Node(t), args...)
	if r.err != nil {
		return TSClientOutput{}, fmt.Errorf("ts-client.mjs: %w: %s", r.err, strings.TrimSpace(clip(r.stderr)))
	}
	var out TSClientOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		return TSClientOutput{}, fmt.Errorf("ts-client.mjs printed no JSON object: %w\n%s", err, r.describe())
	}
	return out, nil
}

func (o TSClientOptions) transport() string {
	if o.Transport == "" {
		return TransportStreamableHTTP
	}
	return o.Transport
}
