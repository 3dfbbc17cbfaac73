package adapter

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/listing"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// listing.Tools and listing.Prompts are exactly what a running server lists, member for
// member: a configured tool with annotations, one without (mcp-go writes
// "annotations": {}), an imported tool with its remote's definition (served verbatim
// under its served name), one without, the memory tool, and prompts.
func TestListing_IsWhatTheServerLists(t *testing.T) {
	readOnly := true
	annotated := templateTool("search", `{"type":"object","properties":{"q":{"type":"string","maxLength":1.50E2}}}`, "found")
	annotated.Description = "Search the library."
	annotated.Annotations = &adapterconfig.ToolAnnotations{Title: "Search", ReadOnlyHint: &readOnly}
	forecast := remoteTool("w_forecast", `{"type":"object","properties":{"city":{"type":"string"}}}`, "http://127.0.0.1:1/mcp", adapterconfig.TransportStreamableHTTP, "forecast")
	forecast.Remote.Definition = json.RawMessage(remoteDefinition)
	plain := remoteTool("w_plain", objectSchema, "http://127.0.0.1:1/mcp", adapterconfig.TransportStreamableHTTP, "plain")
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, annotated, templateTool("bare", objectSchema, "B"), forecast, plain)
	cfg.Memory = &adapterconfig.MemoryConfig{Root: t.TempDir(), ToolName: "notes", ConfirmCommands: []string{}}
	cfg.Prompts = []adapterconfig.Prompt{
		{Name: "greet", Title: "Greeting", Description: "Say hello", Arguments: []adapterconfig.PromptArgument{{Name: "who", Description: "whom", Required: true}, {Name: "tone"}},
			Messages: []adapterconfig.PromptMessage{{Role: "user", Content: adapterconfig.PromptContent{Type: "text", Text: "Hello {{.who}}"}}}},
		{Name: "plain", Messages: []adapterconfig.PromptMessage{{Role: "user", Content: adapterconfig.PromptContent{Type: "text", Text: "hi"}}}},
	}
	srv := serve(t, cfg)

	wantTools, err := listing.Tools(cfg)
	if err != nil {
		t.Fatal(err)
	}
	compareListing(t, "tools", srv.baseURL, wantTools, []string{"bare", "notes", "search", "w_forecast", "w_plain"})
	wantPrompts, err := listing.Prompts(cfg)
	if err != nil {
		t.Fatal(err)
	}
	compareListing(t, "prompts", srv.baseURL, wantPrompts, []string{"greet", "plain"})
}

// compareListing lists what (tools or prompts) from the server at baseURL and requires
// every entry to equal want's entry of its name, as JSON values.
func compareListing(t *testing.T, what, baseURL string, want map[string]json.RawMessage, names []string) {
	t.Helper()
	result, rpcErr := rpc(t, baseURL, nil, what+"/list", map[string]any{})
	if rpcErr != nil {
		t.Fatalf("%s/list: %v", what, rpcErr)
	}
	var listing map[string][]json.RawMessage
	if err := json.Unmarshal(result, &listing); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, entry := range listing[what] {
		var head struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(entry, &head); err != nil {
			t.Fatal(err)
		}
		got = append(got, head.Name)
		if w, ok := want[head.Name]; !ok || !testkit.JSONEqual(t, entry, w) {
			t.Errorf("%s %q:\n served %s\n listed %s", what, head.Name, entry, w)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, names) || len(want) != len(names) {
		t.Errorf("%s served %v, listed %d, want %v", what, got, len(want), names)
	}
}
