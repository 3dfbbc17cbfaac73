package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// Options configures one Probe.
type Options struct {
	// URL is the endpoint, e.g. http://host:port/mcp (streamable HTTP) or
	// http://host:port/sse (SSE). Only http and https; no credentials in it.
	URL string
	// Transport is TransportStreamableHTTP (default) or TransportSSE.
	Transport string
	// Headers are sent on every request to the URL's host. Their values may be
	// secrets: they never appear in errors, and they are not sent to another host
	// after a redirect, nor over plain http after a redirect from https.
	Headers map[string]string
	// CABundle (PEM), when set, is the only set of CAs TLS trusts.
	CABundle []byte
	// Timeout bounds the whole handshake: connecting, initialize, every tools/list
	// page and closing the session. Default DefaultTimeout.
	Timeout time.Duration
	// MaxMessageBytes bounds every response body (and every event of an SSE
	// stream). Default DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// MaxTools bounds the number of tools over all pages. Default DefaultMaxTools.
	MaxTools int
	// Dial, when set, replaces net.Dialer.DialContext for every connection, including
	// those made after a redirect (the operator passes a dialer that connects only to
	// the addresses its allowlist checked). TLS runs on top of the returned conn, with
	// the URL's host as the server name.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// CheckRedirect is called for every redirect target before it is followed; an
	// error refuses the redirect (Reason RedirectRefused) and the target gets no
	// request.
	CheckRedirect func(target *url.URL) error
}

// Result is what a successful handshake learnt.
type Result struct {
	ServerName      string `json:"serverName"`
	ServerVersion   string `json:"serverVersion"`
	ProtocolVersion string `json:"protocolVersion"`
	Instructions    string `json:"instructions,omitempty"`
	// Capabilities are the sorted names of the capabilities the server announced:
	// "tools", "logging", "prompts", "resources", "completions", …
	Capabilities []string `json:"capabilities"`
	// Tools are the tools of every page, in the server's order. A server that does
	// not announce the tools capability is not asked (and has none).
	Tools []Tool `json:"tools"`
}

// Tool is one entry of tools/list.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema holds the bytes exactly as the server sent them (nil if absent).
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// Raw is the whole tools/list entry as sent (title, annotations, outputSchema, …).
	Raw json.RawMessage `json:"-"`
}

// Probe connects to opts.URL, runs the MCP handshake and lists every tool. All of it
// happens within opts.Timeout (and ctx). The error is always an *Error.
//
// Steps, streamable HTTP: POST initialize (protocol ProtocolVersion), POST
// notifications/initialized, POST tools/list until no nextCursor (only when the server
// announced tools), then DELETE the session when the server gave an Mcp-Session-Id.
// Answers may be application/json or a text/event-stream. After initialize every
// request carries MCP-Protocol-Version and the session id.
//
// SSE: GET the stream, wait for its endpoint event (which must be on the same origin),
// POST each message there and read the answers from the stream.
func Probe(ctx context.Context, opts Options) (*Result, error) {
	p, err := newProber(opts)
	if err != nil {
		return nil, err
	}
	p.budget = p.opts.Timeout
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < p.budget {
		p.budget = max(time.Until(deadline), 0).Round(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	defer p.transport.CloseIdleConnections()

	var s session
	if p.opts.Transport == TransportSSE {
		sse, err := p.openSSE(ctx)
		if err != nil {
			return nil, err
		}
		s = sse
	} else {
		s = &streamableSession{p: p, endpoint: p.url}
	}
	res, err := p.handshake(ctx, s)
	s.close(ctx)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// session is one MCP connection: streamable HTTP or SSE.
type session interface {
	// call sends a request and returns its result, or an *rpcAnswerError when the
	// server answered with a JSON-RPC error, or an *Error.
	call(ctx context.Context, method string, params any) (json.RawMessage, error)
	// notify sends a notification.
	notify(ctx context.Context, method string) error
	// close ends the session, best effort, within ctx.
	close(ctx context.Context)
}

// rpcAnswerError is a JSON-RPC error answer (possibly with a non-2xx HTTP status).
type rpcAnswerError struct {
	rpc    ErrorObject
	status string // "HTTP 400 Bad Request" when the answer came with a non-2xx status
}

func (e *rpcAnswerError) Error() string {
	s := fmt.Sprintf("%d %s", e.rpc.Code, ClipText(e.rpc.Message, 200))
	if e.status != "" {
		s = e.status + ": " + s
	}
	return s
}

type probeInitializeResult struct {
	ProtocolVersion string                     `json:"protocolVersion"`
	Capabilities    map[string]json.RawMessage `json:"capabilities"`
	ServerInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
	Instructions string `json:"instructions"`
}

type listToolsResult struct {
	Tools      []json.RawMessage `json:"tools"`
	NextCursor *string           `json:"nextCursor"`
}

func (p *prober) handshake(ctx context.Context, s session) (*Result, error) {
	raw, err := s.call(ctx, "initialize", InitializeParams(ClientName, ClientVersion))
	if err != nil {
		var rpcErr *rpcAnswerError
		if errors.As(err, &rpcErr) {
			return nil, p.fail(ReasonInitializeFailed, "server refused initialize: "+rpcErr.Error(), err)
		}
		return nil, err
	}
	var init probeInitializeResult
	if err := json.Unmarshal(raw, &init); err != nil || init.ProtocolVersion == "" {
		detail := "the answer to initialize is not an MCP InitializeResult (no protocolVersion)"
		if err != nil {
			detail = "the answer to initialize is not an MCP InitializeResult: " + jsonErrorText(err)
		}
		return nil, p.fail(ReasonProtocolError, detail, err)
	}
	if !acceptableVersion(init.ProtocolVersion) {
		return nil, p.fail(ReasonProtocolError, fmt.Sprintf(
			"server chose protocol version %q, which this client does not speak (it speaks %s and newer)",
			ClipText(init.ProtocolVersion, 40), strings.Join(SupportedProtocolVersions(), ", ")), nil)
	}
	p.protocolVersion.Store(&init.ProtocolVersion)

	res := &Result{
		ServerName:      init.ServerInfo.Name,
		ServerVersion:   init.ServerInfo.Version,
		ProtocolVersion: init.ProtocolVersion,
		Instructions:    init.Instructions,
		Capabilities:    []string{},
		Tools:           []Tool{},
	}
	for name := range init.Capabilities {
		res.Capabilities = append(res.Capabilities, name)
	}
	sort.Strings(res.Capabilities)

	if err := s.notify(ctx, "notifications/initialized"); err != nil {
		return nil, err
	}
	if _, ok := init.Capabilities["tools"]; !ok {
		return res, nil
	}
	tools, err := p.listTools(ctx, s)
	if err != nil {
		return nil, err
	}
	res.Tools = tools
	return res, nil
}

func (p *prober) listTools(ctx context.Context, s session) ([]Tool, error) {
	tools := []Tool{}
	seenNames := map[string]bool{}
	seenCursors := map[string]bool{}
	cursor := ""
	// Each page must bring a tool or end the listing, so more pages than that
	// means the server is looping.
	maxPages := p.opts.MaxTools + 1
	for page := 1; ; page++ {
		var params any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		raw, err := s.call(ctx, "tools/list", params)
		if err != nil {
			var rpcErr *rpcAnswerError
			if errors.As(err, &rpcErr) {
				return nil, p.fail(ReasonToolsListFailed, fmt.Sprintf("server refused tools/list (page %d): %s", page, rpcErr.Error()), err)
			}
			return nil, err
		}
		var list listToolsResult
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, p.fail(ReasonProtocolError, fmt.Sprintf("the answer to tools/list (page %d) is not a ListToolsResult: %s", page, jsonErrorText(err)), err)
		}
		if list.Tools == nil {
			return nil, p.fail(ReasonProtocolError, fmt.Sprintf("the answer to tools/list (page %d) has no tools array", page), nil)
		}
		if len(tools)+len(list.Tools) > p.opts.MaxTools {
			return nil, p.fail(ReasonResponseTooLarge, fmt.Sprintf("server lists more than %d tools (the limit); page %d brought the count to %d",
				p.opts.MaxTools, page, len(tools)+len(list.Tools)), nil)
		}
		for i, entry := range list.Tools {
			t, err := parseTool(entry)
			if err != nil {
				return nil, p.fail(ReasonProtocolError, fmt.Sprintf("tool %d of tools/list page %d: %v", i, page, err), err)
			}
			if seenNames[t.Name] {
				return nil, p.fail(ReasonProtocolError, fmt.Sprintf("server lists the tool %q twice", ClipText(t.Name, 80)), nil)
			}
			seenNames[t.Name] = true
			tools = append(tools, t)
		}
		if list.NextCursor == nil || *list.NextCursor == "" {
			return tools, nil
		}
		cursor = *list.NextCursor
		if seenCursors[cursor] {
			return nil, p.fail(ReasonToolsListFailed, fmt.Sprintf("server sent the same tools/list cursor twice (page %d); stopped to avoid a loop", page), nil)
		}
		seenCursors[cursor] = true
		if page >= maxPages {
			return nil, p.fail(ReasonToolsListFailed, fmt.Sprintf("tools/list did not end within %d pages", maxPages), nil)
		}
	}
}

func parseTool(entry json.RawMessage) (Tool, error) {
	var t struct {
		Name        *string         `json:"name"`
		Description *string         `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal(entry, &t); err != nil {
		return Tool{}, fmt.Errorf("not a tool object: %s", jsonErrorText(err))
	}
	if t.Name == nil || *t.Name == "" {
		return Tool{}, fmt.Errorf("a tool has no name")
	}
	tool := Tool{Name: *t.Name, InputSchema: t.InputSchema, Raw: entry}
	if t.Description != nil {
		tool.Description = *t.Description
	}
	if string(tool.InputSchema) == "null" {
		tool.InputSchema = nil
	}
	return tool, nil
}

var dateVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// acceptableVersion: a revision this client knows, or a newer date-shaped one.
func acceptableVersion(v string) bool {
	if slices.Contains(SupportedProtocolVersions(), v) {
		return true
	}
	return dateVersion.MatchString(v) && v > ProtocolVersion
}

// prober holds what one Probe shares between its requests.
type prober struct {
	opts            Options
	url             *url.URL
	transport       *Transport
	client          *http.Client
	redactor        Redactor
	budget          time.Duration // what the handshake had: Timeout, or less if ctx ended first
	nextID          atomic.Int64
	protocolVersion atomic.Pointer[string]
}

func (p *prober) negotiatedVersion() string {
	if v := p.protocolVersion.Load(); v != nil {
		return *v
	}
	return ""
}
