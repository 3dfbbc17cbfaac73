package gateway

import (
	"context"
	"net/url"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cantus-dev/cantus-operator/internal/tracing"
)

// startForwardSpan starts the client span of a call forwarded to the remote; the
// session carries its trace context on, in the request's headers and params._meta.
// The span is nil when tracing is off.
func (r *remote) startForwardSpan(ctx context.Context, t *Tool) (context.Context, trace.Span) {
	tracer := tracing.Tracer()
	if tracer == nil {
		return ctx, nil
	}
	host := ""
	if u, err := url.Parse(r.name); err == nil {
		host = u.Hostname()
	}
	return tracer.Start(ctx, string(mcp.MethodToolsCall)+" "+t.Backend.RemoteName, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			tracing.MCPMethodName.String(string(mcp.MethodToolsCall)),
			tracing.GenAIToolName.String(t.Backend.RemoteName),
			tracing.GenAIOperationName.String("execute_tool"),
			tracing.ServerAddress.String(host),
			tracing.URLFull.String(r.name),
			tracing.ImportName.String(t.Backend.Import),
		))
}

// endForwardSpan ends a forwarded call's span: failed when the call failed or the
// remote's result is an error.
func endForwardSpan(span trace.Span, failed *mcp.CallToolResult, raw []byte) {
	if span == nil {
		return
	}
	defer span.End()
	switch {
	case failed != nil:
		span.SetAttributes(tracing.ErrorType.String("call_failed"))
		span.SetStatus(codes.Error, firstText(failed))
	case raw != nil && !successfulToolResult(raw):
		span.SetAttributes(tracing.ErrorType.String("tool_error"))
		span.SetStatus(codes.Error, "the remote's tool result is an error")
	}
}

func firstText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if text, ok := mcp.AsTextContent(c); ok {
			if len(text.Text) > 128 {
				return text.Text[:128]
			}
			return text.Text
		}
	}
	return ""
}
