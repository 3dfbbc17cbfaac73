package adapter

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The schema and template of greet_reader, the skill hack/bench serves.
const (
	benchSchema   = `{"type":"object","title":"GreetReaderArgs","additionalProperties":false,"properties":{"name":{"type":"string"}},"required":["name"]}`
	benchTemplate = `Hello, {{ .name }}! Welcome to the library.`
	benchWant     = `Hello, Ada! Welcome to the library.`
	benchCallBody = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"greet_reader","arguments":{"name":"Ada"}}}`
)

func newBenchServer(b *testing.B, tools ...adapterconfig.Tool) *Server {
	b.Helper()
	if len(tools) == 0 {
		tools = []adapterconfig.Tool{templateTool("greet_reader", benchSchema, benchTemplate)}
	}
	srv, err := NewServer(configWith(adapterconfig.TransportStreamableHTTP, true, tools...))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	return srv
}

// BenchmarkHandler_ToolsCall is the adapter's server-side work for one tools/call
// (gate, mcp-go, validation, template, metrics), without a network or a client.
func BenchmarkHandler_ToolsCall(b *testing.B) {
	h := newBenchServer(b).Handler()
	header := http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {protocol20250618},
	}
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, adapterconfig.PathMCP, strings.NewReader(benchCallBody))
		r.Header = header
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), benchWant) {
			b.Fatalf("status %d: %s", w.Code, w.Body.String())
		}
	}
}

// benchCallRequest is a tools/call request as mcp-go hands it to a tool handler.
func benchCallRequest(b *testing.B, name, arguments string) mcp.CallToolRequest {
	b.Helper()
	var req mcp.CallToolRequest
	if err := json.Unmarshal([]byte(`{"method":"tools/call","params":{"name":"`+name+`","arguments":`+arguments+`}}`), &req); err != nil {
		b.Fatal(err)
	}
	return req
}

// BenchmarkToolHandler is the tool handler alone: in-flight tracking, validation,
// the backend (a template) and metrics.
func BenchmarkToolHandler(b *testing.B) {
	for _, bc := range []struct{ name, schema, args string }{
		{"greet_reader", benchSchema, `{"name":"Ada"}`},
		{"with_numbers", `{"type":"object","properties":{"name":{"type":"string"},"count":{"type":"integer"}},"required":["name"]}`, `{"name":"Ada","count":3}`},
		{"trivial_schema", objectSchema, `{"name":"Ada"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newBenchServer(b, templateTool("t", bc.schema, "Hello, {{ .name }}!"))
			handler := s.toolHandler("t")
			req := benchCallRequest(b, "t", bc.args)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, _ := handler(ctx, req)
				if res.IsError {
					b.Fatal(textOf(res))
				}
			}
		})
	}
}

// BenchmarkGate is the gate in front of mcp-go, with a handler that only drains the
// body; "bare" is the same without the gate, so the difference is the gate's cost.
func BenchmarkGate(b *testing.B) {
	s := newBenchServer(b)
	drain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf [512]byte
		for {
			if _, err := r.Body.Read(buf[:]); err != nil {
				break
			}
		}
	})
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"bare", drain}, {"gate", s.gateMCP(drain)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, adapterconfig.PathMCP, strings.NewReader(benchCallBody))
				bc.h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}
