// Package tracing is the operator's and the adapter's OpenTelemetry tracing: set up from
// the standard OTEL_* environment variables, off unless they ask for an exporter, and
// free when off (every helper here returns at once, allocating nothing, when no tracer
// provider was installed).
//
// Trace context travels as W3C traceparent/tracestate, in HTTP headers and, for MCP
// requests, in params._meta under the same keys (the MCP community convention, and the
// one OpenTelemetry's MCP semantic conventions describe).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName names the tracer of every span this module makes.
const InstrumentationName = "github.com/cantus-dev/cantus-operator"

// Keys of the trace context, in HTTP headers and in an MCP request's params._meta.
const (
	KeyTraceparent = "traceparent"
	KeyTracestate  = "tracestate"
)

// tracer is the tracer in use; nil while tracing is off, which every helper checks
// first, so that off costs a load and a branch.
var tracer atomic.Pointer[trace.Tracer]

// propagator is W3C trace context only: baggage would let a caller put arbitrary
// key/values into every downstream request.
var propagator = propagation.TraceContext{}

// Tracer is the tracer in use, or nil when tracing is off.
func Tracer() trace.Tracer {
	if t := tracer.Load(); t != nil {
		return *t
	}
	return nil
}

// Enabled reports whether spans are being made.
func Enabled() bool { return tracer.Load() != nil }

// Use makes tp the provider of every span (nil turns tracing off); for Setup and tests.
func Use(tp trace.TracerProvider) {
	if tp == nil {
		tracer.Store(nil)
		return
	}
	t := tp.Tracer(InstrumentationName)
	tracer.Store(&t)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
}

// Config is what Setup read from the environment.
type Config struct {
	// Exporter is "otlp" or "none".
	Exporter string
	// Protocol is "http/protobuf" or "grpc".
	Protocol string
}

// ConfigFromEnv reads which exporter the OTEL_* variables ask for. Tracing is on when
// OTEL_TRACES_EXPORTER is otlp, or when it is unset and an OTLP endpoint is set;
// OTEL_SDK_DISABLED=true turns it off whatever else says.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{Exporter: "none", Protocol: "http/protobuf"}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return cfg, nil
	}
	switch exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exporter {
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
			cfg.Exporter = "otlp"
		}
	case "none", "otlp":
		cfg.Exporter = exporter
	default:
		return cfg, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: only otlp and none are supported", exporter)
	}
	protocol := cmpOr(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
	switch protocol {
	case "http/protobuf", "grpc":
		cfg.Protocol = protocol
	default:
		return cfg, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: only http/protobuf and grpc are supported", protocol)
	}
	return cfg, nil
}

func cmpOr(values ...string) string {
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// Setup installs a tracer provider as the OTEL_* environment variables say, with
// serviceName unless OTEL_SERVICE_NAME names another. When they ask for no exporter
// nothing is installed and the returned shutdown does nothing. The exporter's endpoint,
// headers, TLS and timeout, the sampler (OTEL_TRACES_SAMPLER, default parentbased_always_on)
// and the batch settings (OTEL_BSP_*) are read by the SDK itself.
func Setup(ctx context.Context, serviceName string) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil || cfg.Exporter == "none" {
		return noop, err
	}
	var exporter sdktrace.SpanExporter
	if cfg.Protocol == "grpc" {
		exporter, err = otlptracegrpc.New(ctx)
	} else {
		exporter, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return noop, fmt.Errorf("OTLP trace exporter (%s): %w", cfg.Protocol, err)
	}
	// serviceName first: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, read after it,
	// win.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return noop, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	Use(tp)
	return func(ctx context.Context) error {
		Use(nil)
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return tp.Shutdown(ctx)
	}, nil
}

// ---- propagation ----

// InjectHeaders writes the trace context of ctx into h; nothing when off.
func InjectHeaders(ctx context.Context, h http.Header) {
	if !Enabled() {
		return
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// ExtractHeaders returns ctx with the remote span context of h, when it has one.
func ExtractHeaders(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Meta is the trace context as an MCP request carries it in params._meta.
type Meta struct {
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// MetaOf returns the trace context of ctx for params._meta; the zero Meta when off or
// there is no valid span in ctx.
func MetaOf(ctx context.Context) Meta {
	if !Enabled() || !trace.SpanContextFromContext(ctx).IsValid() {
		return Meta{}
	}
	carrier := propagation.MapCarrier{}
	propagator.Inject(ctx, carrier)
	return Meta{Traceparent: carrier[KeyTraceparent], Tracestate: carrier[KeyTracestate]}
}

// Extract returns ctx with the remote span context m carries, when it carries a valid
// one; otherwise ctx as it is.
func (m Meta) Extract(ctx context.Context) context.Context {
	if m.Traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{KeyTraceparent: m.Traceparent, KeyTracestate: m.Tracestate})
}
