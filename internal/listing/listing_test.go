package listing

import (
	"encoding/json"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// An imported tool is listed as its remote defined it, under the served name; one
// whose definition is missing or not an object is listed as a configured tool is, as
// the gateway then leaves mcp-go's entry in place. (internal/adapter's
// TestListing_IsWhatTheServerLists compares the entries with a running server's.)
func TestToolsOfImportedTools(t *testing.T) {
	remote := func(def string) *adapterconfig.RemoteBackend {
		return &adapterconfig.RemoteBackend{RemoteName: "forecast", Definition: json.RawMessage(def)}
	}
	cfg := &adapterconfig.Config{Tools: []adapterconfig.Tool{
		{Name: "w_forecast", Description: "configured", InputSchema: json.RawMessage(`{"type":"object"}`), Remote: remote(`{"name":"forecast","description":"remote","x-extra":1}`)},
		{Name: "w_bare", Description: "configured", InputSchema: json.RawMessage(`{"type":"object"}`), Remote: remote(``)},
		{Name: "w_array", Description: "configured", InputSchema: json.RawMessage(`{"type":"object"}`), Remote: remote(`[]`)},
	}}
	listed, err := Tools(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"w_forecast": `{"description":"remote","name":"w_forecast","x-extra":1}`,
		"w_bare":     `{"annotations":{},"description":"configured","inputSchema":{"type":"object"},"name":"w_bare"}`,
		"w_array":    `{"annotations":{},"description":"configured","inputSchema":{"type":"object"},"name":"w_array"}`,
	} {
		if got := string(listed[name]); got != want {
			t.Errorf("%s: listed %s, want %s", name, got, want)
		}
	}
}
