package adapterconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func validConfig() *Config {
	return &Config{
		Server:    ServerInfo{Name: "s", Version: "1"},
		Transport: TransportStreamableHTTP,
		Port:      8080,
		Tools: []Tool{
			{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Template: &TemplateBackend{Text: "{{.x}}"}},
			{Name: "call", InputSchema: json.RawMessage(`{"type":"object"}`),
				HTTP: &HTTPBackend{URL: "http://svc.ns.svc:8080/x", Timeout: Duration{Duration: time.Second}, MaxResponseBytes: 1024}},
		},
		Memory: &MemoryConfig{Root: "/var/memory", ToolName: "memory"},
	}
}

func TestLoadReadsWhatTheOperatorRenders(t *testing.T) {
	want := validConfig()
	data, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), ConfigFileName)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got.Tools[1].HTTP.Timeout.Duration != time.Second {
		t.Errorf("timeout after the round trip = %v, want 1s", got.Tools[1].HTTP.Timeout)
	}
	if err := Validate(got); err != nil {
		t.Errorf("Validate(loaded config) = %v", err)
	}
}

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	cfg := validConfig()
	cfg.Transport = "websocket"
	cfg.Tools[0].Template.Text = "{{"
	cfg.Tools[1].Name = "echo"
	cfg.Memory.ToolName = "echo"
	err := Validate(cfg)
	if err == nil {
		t.Fatal("Validate accepted a config with four problems")
	}
	for _, want := range []string{`transport "websocket"`, "template does not parse", "already used by tools[0]", `memory.toolName "echo" is also the name of a tool`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestCompileReturnsSchemaAndTemplateOnce(t *testing.T) {
	tools, err := Compile(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	if tools[0].Schema == nil || tools[0].Template == nil {
		t.Errorf("template tool compiled without schema or template: %+v", tools[0])
	}
	if tools[1].Template != nil {
		t.Errorf("http tool has a template")
	}
}

// A remote's tool name is quoted in messages: the worst value is long.
func TestCheckToolRefusesWhatCannotServeAndClipsLongNames(t *testing.T) {
	long := strings.Repeat("x", 40_000)
	err := CheckTool(&Tool{Name: long, InputSchema: json.RawMessage(`{"type":"object"}`)})
	if err == nil {
		t.Fatal("CheckTool accepted a tool with a 40 KB name and no backend")
	}
	if got := ClipName(long); len(got) > 70 {
		t.Errorf("ClipName kept %d bytes", len(got))
	}
}

func TestCostlySchemaIsRefused(t *testing.T) {
	schema := `{"type":"object","properties":{"a":{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}}}`
	if err := CheckInputSchema([]byte(schema)); err == nil || !strings.Contains(err.Error(), "too costly") {
		t.Error("CheckInputSchema accepted a schema whose branches multiply at each level")
	}
}
