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
	"reflect"
	"strings"
	"text/template"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Markers that begin tool error results, so agents and logs can tell the failing part.
const (
	markerTemplateFailed = "template_call_failed: "
	markerHTTPFailed     = "http_call_failed: "
	markerInvalidArgs    = "invalid arguments: "
)

// nonSuccessBodyExcerpt bounds how much of a failing backend's body reaches the client.
const nonSuccessBodyExcerpt = 512

// maxReportedSchemaErrors keeps an anyOf with many branches from producing a wall of text.
const maxReportedSchemaErrors = 5

var templateFuncs = template.FuncMap{
	"json":    templateJSON,
	"upper":   func(v any) string { return strings.ToUpper(fmt.Sprint(v)) },
	"lower":   func(v any) string { return strings.ToLower(fmt.Sprint(v)) },
	"default": templateDefault,
}

func templateJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("json: %w", err)
	}
	return string(b), nil
}

// templateDefault returns def when v is empty, so `{{ index . "x" | default "none" }}`
// covers an optional argument (index, unlike .x, does not fail on a missing key).
func templateDefault(def, v any) any {
	if v == nil {
		return def
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String, reflect.Map, reflect.Slice, reflect.Array:
		if rv.Len() == 0 {
			return def
		}
	}
	if rv.IsZero() {
		return def
	}
	return v
}

// callTool runs one validated call of t. Failures are tool error results, never Go
// errors: the client reads them, and the server carries on.
func (s *Server) callTool(ctx context.Context, t *compiledTool, req mcp.CallToolRequest) *mcp.CallToolResult {
	args, err := argumentsJSON(req)
	if err != nil {
		return mcp.NewToolResultError(markerInvalidArgs + err.Error())
	}
	instance, msg := checkArguments(t, req, args)
	if msg != "" {
		return mcp.NewToolResultError(markerInvalidArgs + msg)
	}
	switch {
	case t.Template != nil:
		return renderTemplate(t.template, instance)
	case t.HTTP != nil:
		return s.postToBackend(ctx, t.HTTP, args)
	case t.Remote != nil:
		return t.remote.call(ctx, t, args)
	default:
		// compileConfig guarantees a backend; reaching here is a programming error.
		return mcp.NewToolResultError(fmt.Sprintf("tool %q has no backend", t.Name))
	}
}

// checkArguments validates the arguments (args is argumentsJSON(req)) against t's
// schema and returns them decoded with numbers as json.Number, for the template; or
// what is wrong with them. Arguments are decoded at most once per call, and not at all
// when mcp-go's decoding is the same value.
func checkArguments(t *compiledTool, req mcp.CallToolRequest, args []byte) (any, string) {
	// The template must see numbers as json.Number, which mcp-go's decoding does not
	// give; other backends use args and need the value only for validation.
	v, wire := wireArguments(req)
	if wire && nestsDeeperThan(v, MaxArgumentDepth) {
		return nil, tooDeep
	}
	if wire && (t.Template == nil || !holdsNumber(v)) && t.fast.proves(v) {
		return v, ""
	}
	instance, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, fmt.Sprintf("arguments are not valid JSON: %v", err)
	}
	if nestsDeeperThan(instance, MaxArgumentDepth) {
		return nil, tooDeep
	}
	if t.fast.proves(instance) {
		return instance, ""
	}
	return instance, schemaProblems(t.schema, instance)
}

// tooDeep refuses arguments whose validation work the schema cost check does not bound.
var tooDeep = fmt.Sprintf("arguments nest more than %d levels deep", MaxArgumentDepth)

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

var schemaMessages = message.NewPrinter(language.English)

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
	return describeValidationError(verr)
}

// describeValidationError lists what is wrong, each problem prefixed with the JSON
// pointer of the offending value (none for the top level).
func describeValidationError(verr *jsonschema.ValidationError) string {
	var problems []string
	for _, leaf := range validationLeaves(verr) {
		if len(problems) == maxReportedSchemaErrors {
			problems = append(problems, "…")
			break
		}
		problems = append(problems, describeLeaf(leaf))
	}
	return strings.Join(problems, "; ")
}

// validationLeaves returns the errors that say what is wrong; inner nodes only say
// which subschema failed.
func validationLeaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var leaves []*jsonschema.ValidationError
	for _, c := range e.Causes {
		leaves = append(leaves, validationLeaves(c)...)
	}
	return leaves
}

func describeLeaf(e *jsonschema.ValidationError) string {
	what := e.ErrorKind.LocalizedString(schemaMessages)
	if len(e.InstanceLocation) == 0 {
		return what
	}
	return jsonPointer(e.InstanceLocation) + ": " + what
}

func jsonPointer(tokens []string) string {
	var sb strings.Builder
	for _, tok := range tokens {
		sb.WriteByte('/')
		sb.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return sb.String()
}

// renderTemplate executes tmpl over the arguments, decoded with numbers as
// json.Number so that {{.n}} prints 1000000 as written rather than float64's 1e+06.
func renderTemplate(tmpl *template.Template, data any) *mcp.CallToolResult {
	var out strings.Builder
	if err := tmpl.Execute(&out, data); err != nil {
		return mcp.NewToolResultError(markerTemplateFailed + err.Error())
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
func (s *Server) postToBackend(ctx context.Context, b *HTTPBackend, args []byte) *mcp.CallToolResult {
	ctx, cancel := context.WithTimeout(ctx, b.Timeout.Duration)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.URL, bytes.NewReader(args))
	if err != nil {
		return mcp.NewToolResultError(markerHTTPFailed + err.Error())
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.8")

	resp, err := s.backend.Do(req)
	if err != nil {
		return mcp.NewToolResultError(markerHTTPFailed + describeTransportError(ctx, b, err))
	}
	defer drainAndClose(resp.Body)

	body, err := io.ReadAll(io.LimitReader(resp.Body, b.MaxResponseBytes+1))
	if err != nil {
		return mcp.NewToolResultError(markerHTTPFailed + "read response: " + describeTransportError(ctx, b, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return mcp.NewToolResultError(fmt.Sprintf("%s%d %s: %s", markerHTTPFailed,
			resp.StatusCode, http.StatusText(resp.StatusCode), excerpt(body, nonSuccessBodyExcerpt)))
	}
	if int64(len(body)) > b.MaxResponseBytes {
		return mcp.NewToolResultError(fmt.Sprintf("%sresponse exceeds %d bytes", markerHTTPFailed, b.MaxResponseBytes))
	}
	return mcp.NewToolResultText(string(body))
}

func describeTransportError(ctx context.Context, b *HTTPBackend, err error) string {
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
