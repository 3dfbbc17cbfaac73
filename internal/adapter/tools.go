package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"text/template"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// markerInvalidArgs begins the tool error result of a call with invalid arguments.
const markerInvalidArgs = "invalid arguments: "

// nonSuccessBodyExcerpt bounds how much of a failing backend's body reaches the client.
const nonSuccessBodyExcerpt = 512

// callTool runs one validated call of t. Failures are tool error results, never Go
// errors: the client reads them, and the server carries on.
func (s *Server) callTool(ctx context.Context, t *compiledTool, req mcp.CallToolRequest) *mcp.CallToolResult {
	args, instance, refused := validArguments(t, req)
	if refused != nil {
		return refused
	}
	switch {
	case t.Template != nil:
		return renderTemplate(t.template, instance)
	case t.HTTP != nil:
		return s.postToBackend(ctx, t.HTTP, args)
	case t.Remote != nil:
		return t.gateway.Call(ctx, req, args)
	default:
		// compileConfig guarantees a backend; reaching here is a programming error.
		return mcp.NewToolResultError(fmt.Sprintf("tool %q has no backend", t.Name))
	}
}

// validArguments returns req's arguments as JSON (argumentsJSON) and decoded
// (checkArguments), or the invalid_arguments result that refuses them.
func validArguments(t *compiledTool, req mcp.CallToolRequest) ([]byte, any, *mcp.CallToolResult) {
	args, err := argumentsJSON(req)
	if err != nil {
		return nil, nil, mcp.NewToolResultError(markerInvalidArgs + err.Error())
	}
	instance, msg := checkArguments(t, req, args)
	if msg != "" {
		return nil, nil, mcp.NewToolResultError(markerInvalidArgs + msg)
	}
	return args, instance, nil
}

// checkArguments validates the arguments (args is argumentsJSON(req)) against t's
// schema and returns them decoded with numbers as json.Number, for the template; or
// what is wrong with them. Arguments are decoded at most once per call, and not at all
// when mcp-go's decoding is the same value.
func checkArguments(t *compiledTool, req mcp.CallToolRequest, args []byte) (any, string) {
	// The template must see numbers as json.Number, which mcp-go's decoding does not
	// give; other backends use args and need the value only for validation.
	v, wire := wireArguments(req)
	if wire && nestsDeeperThan(v, adapterconfig.MaxArgumentDepth) {
		return nil, tooDeep
	}
	if wire && (t.Template == nil || !holdsNumber(v)) && t.fast.proves(v) {
		return v, ""
	}
	instance, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, fmt.Sprintf("arguments are not valid JSON: %v", err)
	}
	if nestsDeeperThan(instance, adapterconfig.MaxArgumentDepth) {
		return nil, tooDeep
	}
	if t.fast.proves(instance) {
		return instance, ""
	}
	return instance, schemaProblems(t.schema, instance)
}

// tooDeep refuses arguments whose validation work the schema cost check does not bound.
var tooDeep = fmt.Sprintf("arguments nest more than %d levels deep", adapterconfig.MaxArgumentDepth)

// wireArguments returns the arguments as mcp-go decoded them, when that is the JSON
// value of argumentsJSON(req): a request read from the wire carries its arguments both
// as RawArguments and decoded from those bytes as Arguments; absent or null arguments
// are the empty object.
func wireArguments(req mcp.CallToolRequest) (any, bool) {
	raw := bytes.TrimSpace(req.Params.RawArguments)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		if req.Params.Arguments == nil {
			return map[string]any{}, true
		}
		return nil, false // built in code: argumentsJSON marshals it
	}
	if raw[0] == '{' {
		if _, ok := req.Params.Arguments.(map[string]any); !ok {
			return nil, false
		}
	}
	return req.Params.Arguments, req.Params.Arguments != nil
}

// holdsNumber reports a number anywhere in v.
func holdsNumber(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if holdsNumber(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if holdsNumber(e) {
				return true
			}
		}
	case string, bool, nil:
	default:
		return true
	}
	return false
}

// argumentsJSON returns the call's arguments as JSON, preferring the bytes as they
// arrived so large integers keep their precision.
func argumentsJSON(req mcp.CallToolRequest) ([]byte, error) {
	if raw := bytes.TrimSpace(req.Params.RawArguments); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		return raw, nil
	}
	if req.Params.Arguments == nil {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(req.Params.Arguments)
	if err != nil {
		return nil, fmt.Errorf("arguments are not JSON: %w", err)
	}
	return b, nil
}

// schemaProblems validates a decoded instance against the tool's schema and describes
// what is wrong, naming each offending argument by its JSON pointer; "" means valid.
func schemaProblems(schema *jsonschema.Schema, instance any) string {
	err := schema.Validate(instance)
	if err == nil {
		return ""
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err.Error()
	}
	return adapterconfig.DescribeValidationError(verr)
}

// renderTemplate executes tmpl over the arguments, decoded with numbers as
// json.Number so that {{.n}} prints 1000000 as written rather than float64's 1e+06.
func renderTemplate(tmpl *template.Template, data any) *mcp.CallToolResult {
	var out strings.Builder
	if err := tmpl.Execute(&out, data); err != nil {
		return mcp.NewToolResultError(jsonrpc.MarkerTemplateFailed + err.Error())
	}
	return mcp.NewToolResultText(out.String())
}

// newBackendClient is shared by all http tools of a server: keep-alives and a deep idle
// pool matter because every call is a POST to the same few backends.
func newBackendClient() *http.Client {
	transport := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}
	return &http.Client{Transport: transport}
}

// postToBackend POSTs the arguments as a JSON object and returns the body as text.
func (s *Server) postToBackend(ctx context.Context, b *adapterconfig.HTTPBackend, args []byte) *mcp.CallToolResult {
	ctx, cancel := context.WithTimeout(ctx, b.Timeout.Duration)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.URL, bytes.NewReader(args))
	if err != nil {
		return mcp.NewToolResultError(jsonrpc.MarkerHTTPFailed + err.Error())
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.8")

	req, span := startBackendSpan(ctx, req)
	resp, err := s.backend.Do(req)
	endBackendSpan(span, resp, err)
	if err != nil {
		return mcp.NewToolResultError(jsonrpc.MarkerHTTPFailed + describeTransportError(ctx, b, err))
	}
	defer drainAndClose(resp.Body)

	body, err := io.ReadAll(io.LimitReader(resp.Body, b.MaxResponseBytes+1))
	if err != nil {
		return mcp.NewToolResultError(jsonrpc.MarkerHTTPFailed + "read response: " + describeTransportError(ctx, b, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return mcp.NewToolResultError(fmt.Sprintf("%s%d %s: %s", jsonrpc.MarkerHTTPFailed,
			resp.StatusCode, http.StatusText(resp.StatusCode), excerpt(body, nonSuccessBodyExcerpt)))
	}
	if int64(len(body)) > b.MaxResponseBytes {
		return mcp.NewToolResultError(fmt.Sprintf("%sresponse exceeds %d bytes", jsonrpc.MarkerHTTPFailed, b.MaxResponseBytes))
	}
	return mcp.NewToolResultText(string(body))
}

func describeTransportError(ctx context.Context, b *adapterconfig.HTTPBackend, err error) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("no response within the tool timeout %s: %v", b.Timeout.Duration, err)
	}
	return err.Error()
}

// excerpt returns at most n bytes of body as valid UTF-8, since tool results are JSON
// text.
func excerpt(body []byte, n int) string {
	if len(body) > n {
		body = body[:n]
	}
	return strings.ToValidUTF8(strings.TrimSpace(string(body)), "\uFFFD")
}

// drainAndClose reads a little of what is left so the connection can be reused.
func drainAndClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	_ = body.Close()
}

// nestsDeeperThan reports whether v, a decoded JSON value, nests deeper than limit.
func nestsDeeperThan(v any, limit int) bool {
	if limit < 0 {
		return true
	}
	switch v := v.(type) {
	case map[string]any:
		for _, m := range v {
			if nestsDeeperThan(m, limit-1) {
				return true
			}
		}
	case []any:
		for _, m := range v {
			if nestsDeeperThan(m, limit-1) {
				return true
			}
		}
	}
	return false
}
