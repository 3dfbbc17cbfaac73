package adapter

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

func validConfig() *adapterconfig.Config {
	return &adapterconfig.Config{
		Server:    adapterconfig.ServerInfo{Name: "s", Version: "1.0.0"},
		Transport: adapterconfig.TransportStreamableHTTP,
		Port:      8765,
		Stateless: true,
		Tools: []adapterconfig.Tool{
			templateTool("greet", `{"type":"object","properties":{"name":{"type":"string"}}}`, "hi {{.name}}"),
			httpTool("lookup", objectSchema, "http://backend.default.svc:8080/lookup", 10*time.Second, 1<<20),
		},
	}
}

func TestValidate_AcceptsValidConfigs(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*adapterconfig.Config)
	}{
		{"template and http tools", func(*adapterconfig.Config) {}},
		{"sse transport", func(c *adapterconfig.Config) { c.Transport = adapterconfig.TransportSSE }},
		{"port 0 picks a free port", func(c *adapterconfig.Config) { c.Port = 0 }},
		{"port 65535", func(c *adapterconfig.Config) { c.Port = 65535 }},
		{"no tools", func(c *adapterconfig.Config) { c.Tools = nil }},
		{"name with every allowed character class", func(c *adapterconfig.Config) { c.Tools[0].Name = "a-Z_0.9" }},
		{"128-character name", func(c *adapterconfig.Config) { c.Tools[0].Name = strings.Repeat("n", 128) }},
		{"https URL", func(c *adapterconfig.Config) { c.Tools[1].HTTP.URL = "https://example.com/x?y=1" }},
		{"draft-07 schema with definitions", func(c *adapterconfig.Config) {
			c.Tools[0].InputSchema = json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
				"definitions":{"n":{"type":"integer","minimum":0}},"properties":{"n":{"$ref":"#/definitions/n"}}}`)
		}},
		{"2020-12 schema with $defs and pydantic keys", func(c *adapterconfig.Config) {
			c.Tools[0].InputSchema = json.RawMessage(`{"type":"object","title":"Args","additionalProperties":false,
				"$defs":{"tag":{"type":"string","examples":["a"]}},"properties":{"tags":{"type":"array","items":{"$ref":"#/$defs/tag"}}}}`)
		}},
		{"template using every helper", func(c *adapterconfig.Config) {
			c.Tools[0].Template.Text = `{{json .}} {{upper .name}} {{lower .name}} {{index . "x" | default "none"}}`
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			tt.mutate(cfg)
			if err := adapterconfig.Validate(cfg); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestValidate_ReportsEachProblem(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*adapterconfig.Config)
		want   []string // fragments of the error message
	}{
		{"unknown transport", func(c *adapterconfig.Config) { c.Transport = "websocket" },
			[]string{`transport "websocket" is not supported`, `use "streamable-http" or "sse"`}},
		{"empty transport", func(c *adapterconfig.Config) { c.Transport = "" },
			[]string{`transport "" is not supported`}},
		{"negative port", func(c *adapterconfig.Config) { c.Port = -1 },
			[]string{"port -1 is out of range: use 0..65535"}},
		{"port above 65535", func(c *adapterconfig.Config) { c.Port = 65536 },
			[]string{"port 65536 is out of range"}},
		{"empty tool name", func(c *adapterconfig.Config) { c.Tools[0].Name = "" },
			[]string{`tool "" (tools[0]): invalid name: use 1-128 characters of A-Z, a-z, 0-9`}},
		{"tool name with a space", func(c *adapterconfig.Config) { c.Tools[0].Name = "say hi" },
			[]string{`tool "say hi" (tools[0]): invalid name`}},
		{"tool name with a slash", func(c *adapterconfig.Config) { c.Tools[0].Name = "a/b" },
			[]string{`tool "a/b" (tools[0]): invalid name`}},
		{"129-character name", func(c *adapterconfig.Config) { c.Tools[0].Name = strings.Repeat("n", 129) },
			[]string{"invalid name: use 1-128 characters"}},
		{"duplicate names", func(c *adapterconfig.Config) { c.Tools[1].Name = "greet" },
			[]string{`tool "greet" (tools[1]): the name is already used by tools[0]: tool names must be unique`}},
		{"no backend", func(c *adapterconfig.Config) { c.Tools[0].Template = nil },
			[]string{`tool "greet" (tools[0]): no backend: set exactly one of template, http or remote`}},
		{"two backends", func(c *adapterconfig.Config) { c.Tools[1].Template = &adapterconfig.TemplateBackend{Text: "x"} },
			[]string{`tool "lookup" (tools[1]): 2 backends: set exactly one of template, http or remote`}},
		{"missing inputSchema", func(c *adapterconfig.Config) { c.Tools[0].InputSchema = nil },
			[]string{`tool "greet" (tools[0]): inputSchema is missing: use {"type":"object"}`}},
		{"inputSchema not JSON", func(c *adapterconfig.Config) { c.Tools[0].InputSchema = json.RawMessage(`{"type":`) },
			[]string{`tool "greet" (tools[0]): inputSchema is not valid JSON`}},
		{"inputSchema an array", func(c *adapterconfig.Config) { c.Tools[0].InputSchema = json.RawMessage(`[]`) },
			[]string{`inputSchema must be a JSON object with "type": "object"`}},
		{"inputSchema without type", func(c *adapterconfig.Config) { c.Tools[0].InputSchema = json.RawMessage(`{"properties":{}}`) },
			[]string{`inputSchema must have "type": "object"`, `found "type": (missing)`}},
		{"inputSchema of type string", func(c *adapterconfig.Config) { c.Tools[0].InputSchema = json.RawMessage(`{"type":"string"}`) },
			[]string{`found "type": "string"`}},
		{"inputSchema that does not compile", func(c *adapterconfig.Config) {
			c.Tools[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":"zero"}}}`)
		}, []string{`tool "greet" (tools[0]): inputSchema does not compile as JSON Schema: /properties/n/minimum: got string, want number`}},
		{"draft-07 schema invalid under draft-07", func(c *adapterconfig.Config) {
			c.Tools[0].InputSchema = json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","required":"name"}`)
		}, []string{"inputSchema does not compile as JSON Schema: /required: got string, want array"}},
		{"$ref to an external file", func(c *adapterconfig.Config) {
			c.Tools[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"file:///etc/schema.json"}}}`)
		}, []string{"inputSchema does not compile", "external reference file:///etc/schema.json is not allowed"}},
		{"template that does not parse", func(c *adapterconfig.Config) { c.Tools[0].Template.Text = "hi {{.name" },
			[]string{`tool "greet" (tools[0]): template does not parse`}},
		{"template calling an unknown function", func(c *adapterconfig.Config) { c.Tools[0].Template.Text = "{{shout .name}}" },
			[]string{"template does not parse", `function "shout" not defined`}},
		{"relative URL", func(c *adapterconfig.Config) { c.Tools[1].HTTP.URL = "/lookup" },
			[]string{`tool "lookup" (tools[1]): http.url "/lookup" must be an absolute http or https URL with a host`}},
		{"ftp URL", func(c *adapterconfig.Config) { c.Tools[1].HTTP.URL = "ftp://example.com/x" },
			[]string{`http.url "ftp://example.com/x" must be an absolute http or https URL`}},
		{"URL without host", func(c *adapterconfig.Config) { c.Tools[1].HTTP.URL = "http:///x" },
			[]string{`http.url "http:///x" must be an absolute http or https URL with a host`}},
		{"URL with only a port", func(c *adapterconfig.Config) { c.Tools[1].HTTP.URL = "http://:8080/x" },
			[]string{`http.url "http://:8080/x" must be`}},
		{"zero timeout", func(c *adapterconfig.Config) { c.Tools[1].HTTP.Timeout = adapterconfig.Duration{} },
			[]string{`tool "lookup" (tools[1]): http.timeout "0s" must be greater than 0`}},
		{"negative timeout", func(c *adapterconfig.Config) {
			c.Tools[1].HTTP.Timeout = adapterconfig.Duration{Duration: -time.Second}
		},
			[]string{`http.timeout "-1s" must be greater than 0`}},
		{"zero maxResponseBytes", func(c *adapterconfig.Config) { c.Tools[1].HTTP.MaxResponseBytes = 0 },
			[]string{`tool "lookup" (tools[1]): http.maxResponseBytes 0 must be greater than 0`}},
		{"x-mcp-header on an object property", func(c *adapterconfig.Config) {
			c.Tools[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"o":{"type":"object","x-mcp-header":"O"}}}`)
		}, []string{`tool "greet" (tools[0]): inputSchema:`, "x-mcp-header"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			tt.mutate(cfg)
			err := adapterconfig.Validate(cfg)
			if err == nil {
				t.Fatal("Validate accepted the config")
			}
			for _, frag := range tt.want {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("error does not contain %q:\n%v", frag, err)
				}
			}
		})
	}
}

func TestValidate_ReportsAllProblemsAtOnce(t *testing.T) {
	cfg := validConfig()
	cfg.Transport = "grpc"
	cfg.Tools[0].Name = "bad name"
	cfg.Tools[1].HTTP.Timeout = adapterconfig.Duration{}
	cfg.Tools[1].HTTP.MaxResponseBytes = -1

	err := adapterconfig.Validate(cfg)
	if err == nil {
		t.Fatal("Validate accepted the config")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 problems, one a line, got %d:\n%v", len(lines), err)
	}
}

func TestValidate_RejectsNilConfig(t *testing.T) {
	if err := adapterconfig.Validate(nil); err == nil {
		t.Fatal("adapterconfig.Validate(nil) accepted")
	}
}

func TestNewServer_RefusesInvalidConfig(t *testing.T) {
	cfg := validConfig()
	cfg.Tools[0].Name = "bad name"
	_, err := NewServer(cfg)
	if err == nil || !strings.Contains(err.Error(), `tool "bad name" (tools[0]): invalid name`) {
		t.Fatalf("NewServer error = %v, want the invalid name named", err)
	}
}

func TestNewServer_ToolNamesInConfigOrder(t *testing.T) {
	srv, err := NewServer(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(srv.ToolNames(), ",")
	if got != "greet,lookup" {
		t.Fatalf("ToolNames = %s, want greet,lookup", got)
	}
}
