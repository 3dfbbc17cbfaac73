package discovery

import (
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkDiscoveryBuild is what a (re)load pays to index 1,000 tools.
func BenchmarkDiscoveryBuild(b *testing.B) {
	tools := map[string]json.RawMessage{}
	for i := range 1000 {
		name := fmt.Sprintf("tool_%d", i)
		tools[name] = json.RawMessage(fmt.Sprintf(`{"name":%q,"description":"Read the complete contents of file %d from the file system as text, handling encodings.","inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"Where the file is"},"mode":{"type":"string","enum":["text","binary"]}}},"annotations":{"readOnlyHint":true}}`, name, i))
	}
	for b.Loop() {
		x, err := Build(tools, nil)
		if err != nil {
			b.Fatal(err)
		}
		_ = x.Close()
	}
}
