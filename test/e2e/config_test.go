// Package e2e runs the real adapter binary against real MCP peers that nobody here
// wrote: the official TypeScript SDK client (streamable HTTP and SSE), the MCP
// inspector CLI and the MCP conformance suite (see test/peers and test/mcp-peers).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// Budgets. The whole package runs in well under a minute on 2 cores; these only keep a
// hung peer from hanging CI.
const (
	testTimeout        = 90 * time.Second
	conformanceTimeout = 10 * time.Minute
)

const (
	serverName    = "cantus-e2e"
	serverVersion = "0.1.0-e2e"
	instructions  = "Skills for the cantus end-to-end tests."
)

// greetSchema has a required string, a bounded integer and no other properties, so that
// argument validation has something to say.
const greetSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "description": "Who to greet."},
    "times": {"type": "integer", "minimum": 1, "maximum": 3, "description": "How many times."}
  },
  "required": ["name"],
  "additionalProperties": false
}`

// The conformance suite's fixtures (conformance 0.1.16, server scenarios):
//   - tools-call-simple-text calls test_simple_text without arguments and wants a
//     text block; its documentation gives this text.
//   - tools-call-error calls test_error_handling and wants isError: true with a text.
//   - json-schema-2020-12 lists json_schema_2020_12_tool and wants its $schema, $defs
//     and additionalProperties exactly as declared.
const (
	simpleTextResponse = "This is a simple text response for testing."
	errorResponse      = "This tool intentionally returns an error for testing"
	schema2020Tool     = "json_schema_2020_12_tool"
	schema2020         = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "type": "object",
      "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"}
  },
  "additionalProperties": false
}`
)

// configTool is one tool of the adapter config, written here as JSON by hand (the way
// the controller's ConfigMap reaches the binary) rather than with adapter.Config.
type configTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations map[string]any  `json:"annotations,omitempty"`
	Template    *templateSpec   `json:"template,omitempty"`
	HTTP        *httpSpec       `json:"http,omitempty"`
}

type templateSpec struct {
	Text string `json:"text"`
}

type httpSpec struct {
	URL              string `json:"url"`
	Timeout          string `json:"timeout"`
	MaxResponseBytes int64  `json:"maxResponseBytes"`
}

// skillTools are the tools every test adapter serves: template and http skills with
// arguments, and the conformance suite's fixtures. backend is the URL of startBackend.
func skillTools(backend string) []configTool {
	return []configTool{
		{
			Name: "greet", Description: "Greets someone by name.", InputSchema: json.RawMessage(greetSchema),
			Annotations: map[string]any{"title": "Greeter", "readOnlyHint": true},
			Template:    &templateSpec{Text: `Hello, {{.name}}! ({{ index . "times" | default 1 }}x)`},
		},
		{
			Name: "lookup", Description: "Posts the arguments to an HTTP backend.",
			InputSchema: json.RawMessage(`{"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}`),
			HTTP:        &httpSpec{URL: backend + "/echo", Timeout: "5s", MaxResponseBytes: 1 << 20},
		},
		{
			Name: "test_simple_text", Description: "Returns a fixed text (MCP conformance fixture).",
			InputSchema: json.RawMessage(`{"type": "object"}`),
			Template:    &templateSpec{Text: simpleTextResponse},
		},
		{
			// An http skill whose backend always fails: the adapter must turn that into
			// an isError result, which is what the conformance scenario checks.
			Name: "test_error_handling", Description: "Always fails (MCP conformance fixture).",
			InputSchema: json.RawMessage(`{"type": "object"}`),
			HTTP:        &httpSpec{URL: backend + "/fail", Timeout: "5s", MaxResponseBytes: 1 << 20},
		},
		{
			Name: schema2020Tool, Description: "Tool with JSON Schema 2020-12 features (MCP conformance fixture).",
			InputSchema: json.RawMessage(schema2020),
			Template:    &templateSpec{Text: `{{ json . }}`},
		},
	}
}

// startBackend serves the http skills: /echo answers `got <body>`, /fail answers 500
// with errorResponse.
func startBackend(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			http.Error(w, "want Content-Type application/json, got "+ct, http.StatusUnsupportedMediaType)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(append([]byte("got "), body...))
	})
	mux.HandleFunc("POST /fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, errorResponse, http.StatusInternalServerError)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

type configOptions struct {
	transport       string
	stateless       bool
	bearerTokenFile string
	// backend is the URL of the http skills' backend; writeConfig starts one if empty.
	backend string
	// content adds the skills, resources, resource templates and prompts of
	// testdata/conformance-content.json, whose files are in testdata/content.
	content bool
}

// writeConfig writes an adapter config JSON file into t.TempDir() and returns its path.
// It first checks that every key is one adapter.Config knows, so that a renamed field
// fails here instead of being silently ignored by the binary.
func writeConfig(t *testing.T, o configOptions) string {
	t.Helper()
	if o.backend == "" {
		o.backend = startBackend(t)
	}
	cfg := map[string]any{
		"server":    map[string]any{"name": serverName, "version": serverVersion, "instructions": instructions},
		"transport": o.transport,
		"port":      0,
		"stateless": o.stateless,
		"tools":     skillTools(o.backend),
	}
	if o.bearerTokenFile != "" {
		cfg["bearerTokenFile"] = o.bearerTokenFile
	}
	if o.content {
		addContentFixture(t, cfg)
	}
	return writeCheckedConfig(t, cfg)
}

// writeCheckedConfig writes cfg as the adapter's config file once it decodes into
// adapterconfig.Config with no unknown key and validates.
func writeCheckedConfig(t *testing.T, cfg map[string]any) string {
	t.Helper()
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var typed adapterconfig.Config
	if err := dec.Decode(&typed); err != nil {
		t.Fatalf("the test's adapter config no longer matches internal/adapter.Config: %v", err)
	}
	if err := adapterconfig.Validate(&typed); err != nil {
		t.Fatalf("the test's adapter config is invalid: %v", err)
	}
	return peers.WriteJSON(t, adapterconfig.ConfigFileName, json.RawMessage(data))
}

// startAdapter starts the real adapter binary on 127.0.0.1 and returns its MCP endpoint
// URL (…/mcp or …/sse).
func startAdapter(t *testing.T, ctx context.Context, o configOptions) string {
	t.Helper()
	base := peers.StartAdapter(t, ctx, writeConfig(t, o))
	if o.transport == adapterconfig.TransportSSE {
		return base + adapterconfig.PathSSE
	}
	return base + adapterconfig.PathMCP
}

// addContentFixture adds the members of testdata/conformance-content.json to cfg, its
// contentDir made absolute.
func addContentFixture(t *testing.T, cfg map[string]any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "conformance-content.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fixture map[string]json.RawMessage
	if err := json.Unmarshal(data, &fixture); err != nil {
		t.Fatalf("testdata/conformance-content.json: %v", err)
	}
	for k, v := range fixture {
		cfg[k] = v
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "content"))
	if err != nil {
		t.Fatal(err)
	}
	cfg["contentDir"] = dir
}
