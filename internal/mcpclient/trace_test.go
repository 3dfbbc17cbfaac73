package mcpclient_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/tracing"
)

// TestCallCarriesTheTraceContextInHeadersAndMeta: a traced tools/call sends the
// caller's span as W3C traceparent both in its HTTP header and in params._meta (beside
// the progress token when there is one); untraced, it sends neither.
func TestCallCarriesTheTraceContextInHeadersAndMeta(t *testing.T) {
	type seen struct {
		header string
		meta   map[string]any
	}
	var mu sync.Mutex
	var calls []seen
	rec := &recorder{}
	endpoint := startAdapter(t, "streamable-http", true, rec)
	target, _ := http.NewRequest(http.MethodGet, endpoint, nil)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
			mu.Lock()
			calls = append(calls, seen{header: r.Header.Get("traceparent"), meta: m.Params.Meta})
			mu.Unlock()
		}
		out, _ := http.NewRequestWithContext(r.Context(), r.Method, target.URL.String(), strings.NewReader(string(body)))
		out.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(proxy.Close)
	c, err := mcpclient.New(mcpclient.ClientOptions{URL: proxy.URL + target.URL.Path, Transport: "streamable-http"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Connect(testkit.Context(t, testBudget))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)

	// Untraced.
	if _, err := s.CallTool(testkit.Context(t, testBudget), "ping", nil); err != nil {
		t.Fatal(err)
	}
	// Traced, with and without a progress token.
	spans := tracetest.NewSpanRecorder()
	tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	t.Cleanup(func() { tracing.Use(nil) })
	ctx, span := tracing.Tracer().Start(testkit.Context(t, testBudget), "caller")
	defer span.End()
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if _, err := s.CallTool(ctx, "ping", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CallToolWith(ctx, "ping", nil, mcpclient.CallOptions{Progress: true, Notify: func(mcpclient.Message) {}}); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("saw %d calls, want 3", len(calls))
	}
	if calls[0].header != "" || calls[0].meta != nil {
		t.Errorf("untraced call sent traceparent %q and _meta %v", calls[0].header, calls[0].meta)
	}
	for i, c := range calls[1:] {
		if c.header != want || c.meta["traceparent"] != want {
			t.Errorf("traced call %d: header %q, _meta %v; want traceparent %s in both", i+1, c.header, c.meta, want)
		}
	}
	if _, ok := calls[1].meta["progressToken"]; ok {
		t.Errorf("a call without progress sent a progress token: %v", calls[1].meta)
	}
	if tok, _ := calls[2].meta["progressToken"].(string); !strings.HasPrefix(tok, "cantus-") {
		t.Errorf("the progress token went missing beside the trace context: %v", calls[2].meta)
	}
}
