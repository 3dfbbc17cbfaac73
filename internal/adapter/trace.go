package adapter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/tracing"
)

// traceMCP makes the server span of each request to an MCP endpoint, parented by the
// trace context the request carries in params._meta or, lacking that, in its
// traceparent header. When tracing is off it only passes the request on.
func (s *Server) traceMCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tracer := tracing.Tracer()
		if tracer == nil {
			next.ServeHTTP(w, r)
			return
		}
		var head tracedRequest
		if r.Method == http.MethodPost {
			_, body, err := readBody(w, r, s.opts.readTimeout())
			if err != nil {
				admission.RefuseBody(w, err)
				return
			}
			tb := &tracedBody{body: body}
			tb.Reset(body)
			r.Body = tb
			_ = json.Unmarshal(body, &head) // a batch or garbage: a span without the MCP names
		}
		ctx := head.Params.Meta.Extract(tracing.ExtractHeaders(r.Context(), r.Header))
		ctx, span := tracer.Start(ctx, head.spanName(r), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(head.attributes(r)...))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r.WithContext(ctx))
		span.SetAttributes(tracing.HTTPStatusCode.Int(rec.status))
		if rec.status >= http.StatusBadRequest {
			span.SetAttributes(tracing.ErrorType.String(http.StatusText(rec.status)))
			span.SetStatus(codes.Error, http.StatusText(rec.status))
		}
	})
}

// tracedBody is a POST body traceMCP read, handed on so that the gate need not read it
// again (readBody).
type tracedBody struct {
	bytes.Reader
	body []byte
}

func (*tracedBody) Close() error { return nil }

// tracedRequest is what the server span names of a JSON-RPC request.
type tracedRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string       `json:"name"`
		URI  string       `json:"uri"`
		Meta tracing.Meta `json:"_meta"`
	} `json:"params"`
}

// spanName is "{mcp.method.name} {target}" as the MCP semantic conventions name it, the
// HTTP method for a request that is no JSON-RPC request (a GET stream, a DELETE).
func (h *tracedRequest) spanName(r *http.Request) string {
	switch {
	case h.Method == "":
		return r.Method
	case h.Params.Name != "" && (h.Method == string(mcp.MethodToolsCall) || h.Method == string(mcp.MethodPromptsGet)):
		return h.Method + " " + h.Params.Name
	}
	return h.Method
}

func (h *tracedRequest) attributes(r *http.Request) []attribute.KeyValue {
	attrs := []attribute.KeyValue{tracing.HTTPRequestMethod.String(r.Method), tracing.URLPath.String(r.URL.Path)}
	if h.Method != "" {
		attrs = append(attrs, tracing.MCPMethodName.String(h.Method), tracing.JSONRPCProtocolVersion.String("2.0"))
	}
	if len(h.ID) > 0 {
		var id any
		if json.Unmarshal(h.ID, &id) == nil && id != nil {
			attrs = append(attrs, tracing.JSONRPCRequestID.String(string(trimQuotes(h.ID))))
		}
	}
	switch h.Method {
	case string(mcp.MethodToolsCall):
		attrs = append(attrs, tracing.GenAIToolName.String(h.Params.Name), tracing.GenAIOperationName.String("execute_tool"))
	case string(mcp.MethodPromptsGet):
		attrs = append(attrs, tracing.GenAIPromptName.String(h.Params.Name))
	case string(mcp.MethodResourcesRead), string(mcp.MethodResourcesSubscribe), string(mcp.MethodResourcesUnsubscribe):
		attrs = append(attrs, tracing.MCPResourceURI.String(h.Params.URI))
	}
	if sid := r.Header.Get(mcpclient.HeaderSessionID); sid != "" {
		attrs = append(attrs, tracing.MCPSessionID.String(sid))
	}
	if v := r.Header.Get(mcpclient.HeaderProtocolVersion); v != "" {
		attrs = append(attrs, tracing.MCPProtocolVersion.String(v))
	}
	return attrs
}

func trimQuotes(b []byte) []byte {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		return b[1 : len(b)-1]
	}
	return b
}

// statusRecorder keeps the status of the answer for the span; it is an http.Flusher
// (event streams need it) and unwraps for http.ResponseController.
type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusRecorder) WriteHeader(status int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("the response writer cannot be hijacked")
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// traceCall puts what the server decided about a tool call on the request's span: who
// called (the kind of identity only, never the token or subject) and the outcome.
func traceCall(ctx context.Context, caller *access.Caller, outcome string, result *mcp.CallToolResult) {
	if !tracing.Enabled() {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	kind := "anonymous"
	if caller != nil {
		kind = caller.Kind
	}
	span.SetAttributes(tracing.CallerKind.String(kind), tracing.CallOutcome.String(outcome))
	if outcome != jsonrpc.OutcomeOK {
		// The MCP conventions' error.type for a tool result with isError true.
		errorType := "tool_error"
		if outcome != jsonrpc.OutcomeError {
			errorType = outcome
		}
		span.SetAttributes(tracing.ErrorType.String(errorType))
		span.SetStatus(codes.Error, excerpt([]byte(resultTextOrEmpty(result)), 128))
	}
}

func resultTextOrEmpty(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	return jsonrpc.ResultText(r)
}

// traceError marks the request's span with a JSON-RPC error mcp-go answered.
func traceError(ctx context.Context, _ any, _ mcp.MCPMethod, _ any, err error) {
	if !tracing.Enabled() {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || err == nil {
		return
	}
	span.SetAttributes(tracing.ErrorType.String("jsonrpc_error"))
	span.SetStatus(codes.Error, err.Error())
}

// startBackendSpan starts the client span of an http backend call and puts its trace
// context on req; the span is nil when tracing is off.
func startBackendSpan(ctx context.Context, req *http.Request) (*http.Request, trace.Span) {
	tracer := tracing.Tracer()
	if tracer == nil {
		return req, nil
	}
	ctx, span := tracer.Start(ctx, http.MethodPost, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		tracing.HTTPRequestMethod.String(http.MethodPost),
		tracing.URLFull.String(withoutQuery(req.URL)),
		tracing.ServerAddress.String(req.URL.Hostname()),
	))
	req = req.WithContext(ctx)
	tracing.InjectHeaders(ctx, req.Header)
	return req, span
}

// endBackendSpan ends a backend call's span with its answer's status or its error.
func endBackendSpan(span trace.Span, resp *http.Response, err error) {
	if span == nil {
		return
	}
	defer span.End()
	if err != nil {
		span.SetAttributes(tracing.ErrorType.String("transport_error"))
		// Not the *url.Error's own text: it quotes the URL with its query.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		span.SetStatus(codes.Error, err.Error())
		return
	}
	span.SetAttributes(tracing.HTTPStatusCode.Int(resp.StatusCode))
	if resp.StatusCode >= http.StatusBadRequest {
		span.SetAttributes(tracing.ErrorType.String(http.StatusText(resp.StatusCode)))
		span.SetStatus(codes.Error, resp.Status)
	}
}

// withoutQuery is u without query or user info: either may hold a secret.
func withoutQuery(u *url.URL) string {
	c := *u
	c.RawQuery, c.ForceQuery, c.User, c.Fragment = "", false, nil, ""
	return c.String()
}
