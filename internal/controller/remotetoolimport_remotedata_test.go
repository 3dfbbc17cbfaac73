package controller

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A remote's definition members past their size limits are clipped (title) or left out
// (outputSchema, annotations, otherFields), and the tool's clipped list names each; the
// members within their limits are kept as sent.
func TestStatusToolsClipsOversizedMembersAndSaysSo(t *testing.T) {
	g := NewWithT(t)
	huge := `{"type":"object","description":"` + strings.Repeat("x", maxRemoteOutputSchemaBytes) + `"}`
	raw, _ := json.Marshal(map[string]any{
		"name":         "big",
		"title":        strings.Repeat("t", maxRemoteTitleBytes+1),
		"inputSchema":  json.RawMessage(`{"type":"object"}`),
		"outputSchema": json.RawMessage(huge),
		"annotations":  map[string]any{"readOnlyHint": true},
		"icons":        []map[string]string{{"src": "data:image/png;base64," + strings.Repeat("A", maxRemoteOtherFieldsBytes)}},
	})
	small, _ := json.Marshal(map[string]any{
		"name": "small", "title": "Small", "inputSchema": map[string]any{"type": "object"},
		"outputSchema": map[string]any{"type": "object"}, "_meta": map[string]any{"k": "v"},
	})
	tools := []mcpclient.Tool{
		{Name: "big", InputSchema: json.RawMessage(`{"type":"object"}`), Raw: raw},
		{Name: "small", InputSchema: json.RawMessage(`{"type":"object"}`), Raw: small},
	}
	out, truncated := statusTools(tools)
	g.Expect(truncated).To(BeFalse())
	g.Expect(out[0].Title).To(And(HaveLen(maxRemoteTitleBytes), HaveSuffix("…")))
	g.Expect(out[0].OutputSchema).To(BeNil())
	g.Expect(out[0].OtherFields).To(BeNil())
	g.Expect(out[0].Annotations.Raw).To(MatchJSON(`{"readOnlyHint":true}`))
	g.Expect(out[0].Clipped).To(ConsistOf("title", "outputSchema", "otherFields"))
	g.Expect(out[1].Clipped).To(BeEmpty())
	g.Expect(out[1].Title).To(Equal("Small"))
	g.Expect(out[1].OutputSchema.Raw).To(MatchJSON(`{"type":"object"}`))
	g.Expect(out[1].OtherFields.Raw).To(MatchJSON(`{"_meta":{"k":"v"}}`))
}
