package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestSetupExportsOverOTLPHTTP: OTEL_EXPORTER_OTLP_ENDPOINT alone turns tracing on, over
// http/protobuf, the service named as Setup was asked unless OTEL_SERVICE_NAME says
// otherwise; shutdown flushes and turns tracing off.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	for _, tc := range []struct{ envName, want string }{{"", "cantus-test"}, {"renamed", "renamed"}} {
		var mu sync.Mutex
		var services []string
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			export := &coltracepb.ExportTraceServiceRequest{}
			if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, export) != nil {
				http.Error(w, "not an OTLP export", http.StatusBadRequest)
				return
			}
			mu.Lock()
			for _, rs := range export.GetResourceSpans() {
				for _, kv := range rs.GetResource().GetAttributes() {
					if kv.GetKey() == "service.name" {
						services = append(services, kv.GetValue().GetStringValue())
					}
				}
			}
			mu.Unlock()
		}))
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.URL)
		t.Setenv("OTEL_SERVICE_NAME", tc.envName)
		shutdown, err := Setup(context.Background(), "cantus-test")
		if err != nil {
			t.Fatal(err)
		}
		if !Enabled() {
			t.Fatal("an OTLP endpoint did not turn tracing on")
		}
		_, span := Tracer().Start(context.Background(), "work")
		span.End()
		if err := shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		receiver.Close()
		if Enabled() {
			t.Error("tracing still on after shutdown")
		}
		mu.Lock()
		if len(services) != 1 || services[0] != tc.want {
			t.Errorf("OTEL_SERVICE_NAME=%q: the receiver got spans of %v, want one batch of %s", tc.envName, services, tc.want)
		}
		mu.Unlock()
	}
}
