package adapter

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/tracing"
)

// tracedBackend is an http backend that keeps the traceparent of each call.
func tracedBackend(t *testing.T) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		mu.Unlock()
		_, _ = w.Write([]byte("looked up"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { tracing.Use(nil) })
	return rec
}

// spansOf returns the ended spans of trace id, waiting a moment for the last to end
// (a server span ends after its answer was written).
func spansOf(t *testing.T, rec *tracetest.SpanRecorder, id trace.TraceID, want int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	testkit.Eventually(t, testTimeout, fmt.Sprintf("%d spans of trace %s to end", want, id), func() error {
		got = got[:0]
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() == id {
				got = append(got, s)
			}
		}
		if len(got) < want {
			return fmt.Errorf("%d ended", len(got))
		}
		return nil
	})
	return got
}

func spanNamed(t *testing.T, spans []sdktrace.ReadOnlySpan, name string, kind trace.SpanKind) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name && s.SpanKind() == kind {
			if found != nil {
				t.Fatalf("two %s spans named %q", kind, name)
			}
			found = s
		}
	}
	if found == nil {
		var names []string
		for _, s := range spans {
			names = append(names, s.SpanKind().String()+" "+s.Name())
		}
		t.Fatalf("no %s span named %q among %v", kind, name, names)
	}
	return found
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

func wantChild(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("%s %q: parent %s, want %s %q (%s)", child.SpanKind(), child.Name(), child.Parent().SpanID(),
			parent.SpanKind(), parent.Name(), parent.SpanContext().SpanID())
	}
}

// TestTracing_OneTraceFromTheClientThroughAGatewayToAnHTTPBackend: a call through a
// gateway to a remote adapter whose tool POSTs to a backend is one trace: the gateway's
// server span, its client span to the remote, the remote's server span and its client
// span to the backend, each the parent of the next, under the span the client sent,
// whether the client sent it in the traceparent header (the gateway's pass-through
// path) or in params._meta (mcp-go's path); the backend gets the trace context too.
func TestTracing_OneTraceFromTheClientThroughAGatewayToAnHTTPBackend(t *testing.T) {
	rec := recordSpans(t)
	backend, backendSaw := tracedBackend(t)
	remote := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, httpTool("lookup", objectSchema, backend, 5*time.Second, 1<<20)))
	gateway := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, remoteTool("team.lookup", objectSchema, remote.baseURL+adapterconfig.PathMCP, adapterconfig.TransportStreamableHTTP, "lookup")))

	for i, tc := range []struct {
		name   string
		parent string // trace id, span id
		inMeta bool
	}{
		{name: "traceparent header", parent: "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"},
		{name: "params._meta", parent: "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", inMeta: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			traceparent := "00-" + tc.parent + "-01"
			var headers map[string]string
			if !tc.inMeta {
				headers = map[string]string{"traceparent": traceparent}
			}
			c := connect(t, gateway.baseURL, "2025-06-18", headers)
			req := mcp.CallToolRequest{}
			req.Params.Name = "team.lookup"
			req.Params.Arguments = map[string]any{"q": "dune"}
			if tc.inMeta {
				req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": traceparent}}
			}
			res, err := c.CallTool(testkit.Context(t, testTimeout), req)
			if err != nil {
				t.Fatal(err)
			}
			wantSuccess(t, res, "looked up")

			sent, _ := trace.TraceIDFromHex(tc.parent[:32])
			sentSpan, _ := trace.SpanIDFromHex(tc.parent[33:])
			spans := spansOf(t, rec, sent, 4)
			gwServer := spanNamed(t, spans, "tools/call team.lookup", trace.SpanKindServer)
			gwClient := spanNamed(t, spans, "tools/call lookup", trace.SpanKindClient)
			remoteServer := spanNamed(t, spans, "tools/call lookup", trace.SpanKindServer)
			backendClient := spanNamed(t, spans, "POST", trace.SpanKindClient)
			if gwServer.Parent().SpanID() != sentSpan || !gwServer.Parent().IsRemote() {
				t.Errorf("the gateway's server span has parent %v, want the client's span %s", gwServer.Parent(), sentSpan)
			}
			wantChild(t, gwClient, gwServer)
			wantChild(t, remoteServer, gwClient)
			wantChild(t, backendClient, remoteServer)
			if saw := backendSaw(); len(saw) != i+1 || saw[i] != "00-"+sent.String()+"-"+backendClient.SpanContext().SpanID().String()+"-01" {
				t.Errorf("the backend saw traceparent %v, want the backend client span's as the last", saw)
			}

			for key, want := range map[attribute.Key]string{
				tracing.MCPMethodName: "tools/call", tracing.GenAIToolName: "team.lookup", tracing.GenAIOperationName: "execute_tool",
				tracing.CallerKind: "anonymous", tracing.CallOutcome: "ok", tracing.JSONRPCRequestID: attr(gwServer, tracing.JSONRPCRequestID),
				tracing.MCPProtocolVersion: "2025-06-18",
			} {
				if got := attr(gwServer, key); got != want || got == "" {
					t.Errorf("gateway server span %s = %q, want %q", key, got, want)
				}
			}
			if got := attr(gwClient, tracing.ImportName); got != "team/upstream" {
				t.Errorf("gateway client span %s = %q", tracing.ImportName, got)
			}
			if got := attr(remoteServer, tracing.GenAIToolName); got != "lookup" {
				t.Errorf("remote server span %s = %q", tracing.GenAIToolName, got)
			}
		})
	}
}

// TestTracing_FailedCallsMarkTheirSpans: a tool result with isError marks the server
// span with error.type tool_error and an error status; a refused call with its outcome.
func TestTracing_FailedCallsMarkTheirSpans(t *testing.T) {
	rec := recordSpans(t)
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, httpTool("explode", objectSchema, failingBackend(t), 5*time.Second, 1<<20)))
	traceparent := "00-11111111111111111111111111111111-2222222222222222-01"
	c := connect(t, srv.baseURL, "2025-06-18", map[string]string{"traceparent": traceparent})
	wantToolError(t, callTool(t, c, "explode", map[string]any{}), jsonrpc.MarkerHTTPFailed)
	id, _ := trace.TraceIDFromHex("11111111111111111111111111111111")
	spans := spansOf(t, rec, id, 3)
	server := spanNamed(t, spans, "tools/call explode", trace.SpanKindServer)
	if attr(server, tracing.ErrorType) != "tool_error" || server.Status().Code.String() != "Error" || attr(server, tracing.CallOutcome) != "error" {
		t.Errorf("server span: error.type %q, status %v, outcome %q", attr(server, tracing.ErrorType), server.Status(), attr(server, tracing.CallOutcome))
	}
	backend := spanNamed(t, spans, "POST", trace.SpanKindClient)
	if attr(backend, tracing.HTTPStatusCode) != "500" || backend.Status().Code.String() != "Error" {
		t.Errorf("backend span: status code %q, status %v", attr(backend, tracing.HTTPStatusCode), backend.Status())
	}
}

// TestTracing_BackendSpanKeepsTheURLsQueryOut: a backend URL's query may hold a key; the
// client span names the URL without it, also when the call fails.
func TestTracing_BackendSpanKeepsTheURLsQueryOut(t *testing.T) {
	rec := recordSpans(t)
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, httpTool("down", objectSchema, "http://127.0.0.1:1/search?key=backend-secret", time.Second, 1<<20)))
	c := connect(t, srv.baseURL, "2025-06-18", map[string]string{"traceparent": "00-33333333333333333333333333333333-4444444444444444-01"})
	wantToolError(t, callTool(t, c, "down", map[string]any{}), jsonrpc.MarkerHTTPFailed)
	id, _ := trace.TraceIDFromHex("33333333333333333333333333333333")
	backend := spanNamed(t, spansOf(t, rec, id, 3), "POST", trace.SpanKindClient)
	if got := attr(backend, tracing.URLFull); got != "http://127.0.0.1:1/search" {
		t.Errorf("url.full = %q, want the URL without its query", got)
	}
	if strings.Contains(backend.Status().Description, "backend-secret") || backend.Status().Code.String() != "Error" {
		t.Errorf("backend span status %v names the query or is not an error", backend.Status())
	}
}

// readCounter is a request body that counts the reads of it.
type readCounter struct {
	r     io.Reader
	reads int
}

func (c *readCounter) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// TestTracing_AuthenticatesBeforeReadingTheBody: with tracing on, a request without a
// valid token is still refused before its body is read (up to 16 MiB of it otherwise,
// for anyone), and an authenticated call's span names the kind of identity only.
func TestTracing_AuthenticatesBeforeReadingTheBody(t *testing.T) {
	rec := recordSpans(t)
	const token = "good-token-1234"
	srv := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("greet", helloSchema, "Hello, {{.name}}!")), WithBearerToken(token))

	body := &readCounter{r: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet"}}`)}
	req := httptest.NewRequest(http.MethodPost, adapterconfig.PathMCP, body)
	req.Header.Set("Content-Type", "application/json")
	answer := httptest.NewRecorder()
	srv.Handler().ServeHTTP(answer, req)
	if answer.Code != http.StatusUnauthorized || body.reads != 0 {
		t.Errorf("unauthenticated POST: %d with %d reads of its body, want 401 and none", answer.Code, body.reads)
	}

	c := connect(t, srv.baseURL, "2025-06-18", map[string]string{"Authorization": "Bearer " + token, "traceparent": "00-55555555555555555555555555555555-6666666666666666-01"})
	wantSuccess(t, callTool(t, c, "greet", map[string]any{"name": "Ada"}), "Hello, Ada!")
	id, _ := trace.TraceIDFromHex("55555555555555555555555555555555")
	server := spanNamed(t, spansOf(t, rec, id, 2), "tools/call greet", trace.SpanKindServer)
	if got := attr(server, tracing.CallerKind); got != "bearer" {
		t.Errorf("%s = %q, want bearer", tracing.CallerKind, got)
	}
	for _, kv := range server.Attributes() {
		if strings.Contains(kv.Value.String(), token) {
			t.Errorf("attribute %s holds the token", kv.Key)
		}
	}
}
