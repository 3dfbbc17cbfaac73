package tracing

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// useRecorder turns tracing on for the test with an in-memory exporter.
func useRecorder(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { Use(nil) })
	return rec
}

const sentTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestMetaCarriesTheTraceContextBothWays(t *testing.T) {
	useRecorder(t)
	// In: a _meta as an MCP client sends it becomes the parent of the server's span.
	var params struct {
		Meta Meta `json:"_meta"`
	}
	if err := json.Unmarshal([]byte(`{"name":"x","_meta":{"traceparent":"`+sentTraceparent+`","tracestate":"vendor=abc","progressToken":7}}`), &params); err != nil {
		t.Fatal(err)
	}
	ctx := params.Meta.Extract(context.Background())
	remote := trace.SpanContextFromContext(ctx)
	if !remote.IsValid() || !remote.IsRemote() || remote.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		remote.SpanID().String() != "00f067aa0ba902b7" || !remote.IsSampled() || remote.TraceState().Get("vendor") != "abc" {
		t.Fatalf("extracted span context = %+v, want the one in _meta", remote)
	}
	ctx, span := Tracer().Start(ctx, "tools/call x")
	defer span.End()

	// Out: the span's context goes into the _meta of the next request, same trace, the
	// span as parent, the tracestate kept.
	out := MetaOf(ctx)
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + span.SpanContext().SpanID().String() + "-01"
	if out.Traceparent != want || out.Tracestate != "vendor=abc" {
		t.Fatalf("MetaOf = %+v, want traceparent %s and tracestate vendor=abc", out, want)
	}
	raw, _ := json.Marshal(struct {
		Meta Meta `json:"_meta"`
	}{out})
	if string(raw) != `{"_meta":{"traceparent":"`+want+`","tracestate":"vendor=abc"}}` {
		t.Fatalf("encoded _meta = %s", raw)
	}
}

func TestMetaIgnoresWhatIsNoTraceContext(t *testing.T) {
	useRecorder(t)
	for _, tp := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		if sc := trace.SpanContextFromContext(Meta{Traceparent: tp}.Extract(context.Background())); sc.IsValid() {
			t.Errorf("traceparent %q gave a valid span context %v", tp, sc)
		}
	}
	if m := MetaOf(context.Background()); m != (Meta{}) {
		t.Errorf("MetaOf without a span = %+v, want nothing", m)
	}
}

func TestOffMakesNothing(t *testing.T) {
	Use(nil)
	ctx := Meta{Traceparent: sentTraceparent}.Extract(context.Background())
	if m := MetaOf(ctx); m != (Meta{}) {
		t.Errorf("MetaOf with tracing off = %+v, want nothing: an untraced adapter passes no trace context on", m)
	}
	h := http.Header{}
	InjectHeaders(ctx, h)
	if len(h) != 0 {
		t.Errorf("InjectHeaders with tracing off wrote %v", h)
	}
	if allocs := testing.AllocsPerRun(100, func() { InjectHeaders(ctx, h); _ = MetaOf(ctx) }); allocs != 0 {
		t.Errorf("off: %v allocations per call, want 0", allocs)
	}
}

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		exporter string
		protocol string
		bad      bool
	}{
		{env: nil, exporter: "none", protocol: "http/protobuf"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, exporter: "otlp", protocol: "http/protobuf"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, exporter: "none", protocol: "http/protobuf"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, exporter: "otlp", protocol: "grpc"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, exporter: "otlp", protocol: "http/protobuf"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, exporter: "none", protocol: "http/protobuf"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, bad: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, bad: true},
	} {
		cfg, err := ConfigFromEnv(func(k string) string { return tc.env[k] })
		if tc.bad {
			if err == nil {
				t.Errorf("%v: no error", tc.env)
			}
			continue
		}
		if err != nil || cfg.Exporter != tc.exporter || cfg.Protocol != tc.protocol {
			t.Errorf("%v: got %+v, %v; want %s over %s", tc.env, cfg, err, tc.exporter, tc.protocol)
		}
	}
}

func TestAdapterEnvLeavesTheCollectorsCredentialsOut(t *testing.T) {
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":        "https://collector.observability:4318",
		"OTEL_EXPORTER_OTLP_HEADERS":         "authorization=Bearer collector-secret",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS":  "x-api-key=collector-secret",
		"OTEL_EXPORTER_OTLP_CERTIFICATE":     "/etc/otel/ca.crt",
		"OTEL_SERVICE_NAME":                  "cantus-operator",
		"OTEL_TRACES_SAMPLER":                "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":            "0.1",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
	}
	got := AdapterEnv(func(k string) string { return env[k] })
	want := map[string]string{
		"OTEL_TRACES_EXPORTER":               "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT":        "https://collector.observability:4318",
		"OTEL_TRACES_SAMPLER":                "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":            "0.1",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
	}
	if len(got) != len(want) {
		t.Fatalf("AdapterEnv = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("AdapterEnv[%s] = %q, want %q", k, got[k], v)
		}
	}
	if off := AdapterEnv(func(string) string { return "" }); off != nil {
		t.Errorf("tracing off: AdapterEnv = %v, want none (Deployments unchanged)", off)
	}
}
