package gateway

import (
	"encoding/json"
	"testing"
)

// Only a successful tool result passes untouched; an error, however it is spelled,
// goes to remoteResult for its marker.
func TestSuccessfulToolResult(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"content":[{"type":"text","text":"ok"}]}`:                     true,
		`{"content":[],"isError":false}`:                                true,
		`{"content":[{"type":"text","text":"isError"}]}`:                true,
		`{"content":[{"type":"text","text":"no"}],"isError":true}`:      false,
		`{"content":[{"type":"text","text":"no"}],"\u0069sError":true}`: false,
		`{"structuredContent":{}}`:                                      false,
		`{"content":"not a list"}`:                                      false,
		`["content"]`:                                                   false,
	} {
		if got := successfulToolResult(json.RawMessage(raw)); got != want {
			t.Errorf("successfulToolResult(%s) = %v, want %v", raw, got, want)
		}
	}
}
