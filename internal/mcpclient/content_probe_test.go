package mcpclient

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// contentServer is a streamable HTTP server announcing capabilities whose answers to
// the list methods are answers[method] (a result), or method not found when absent.
func contentServer(t *testing.T, capabilities map[string]any, answers map[string]string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m incoming
		_ = json.Unmarshal(body, &m)
		if m.Method == "initialize" {
			init := map[string]any{"protocolVersion": ProtocolVersion, "capabilities": capabilities, "serverInfo": map[string]any{"name": "fake", "version": "1"}}
			writeJSON(w, http.StatusOK, result(m.ID, init))
			return
		}
		if len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		answer, ok := answers[m.Method]
		if !ok {
			writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}})
			return
		}
		writeJSON(w, http.StatusOK, result(m.ID, json.RawMessage(answer)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestProbeListsContent: a Probe lists the prompts, resources and resource templates of
// a server that announces them, as sent; a listing the server does not implement lists
// nothing; a listing over the limit is recorded as failed and the tools still come.
func TestProbeListsContent(t *testing.T) {
	caps := map[string]any{"tools": map[string]any{}, "prompts": map[string]any{}, "resources": map[string]any{}}
	const prompt, resource = `{"name":"greet","arguments":[{"name":"who"}]}`, `{"uri":"file:///a","name":"a","_meta":{"x":1}}`
	answers := map[string]string{
		"tools/list":     `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`,
		"prompts/list":   `{"prompts":[` + prompt + `]}`,
		"resources/list": `{"resources":[` + resource + `,{"uri":"file:///b","name":"b"}]}`,
	}
	res := probeOK(t, Options{URL: contentServer(t, caps, answers)})
	if len(res.Tools) != 1 || len(res.Content.Prompts) != 1 || string(res.Content.Prompts[0]) != prompt ||
		len(res.Content.Resources) != 2 || string(res.Content.Resources[0]) != resource {
		t.Fatalf("content %+v", res.Content)
	}
	if len(res.Content.ResourceTemplates) != 0 || len(res.Content.Failed) != 0 {
		t.Errorf("templates/list is not implemented: want no templates and no failure, got %+v", res.Content)
	}

	res = probeOK(t, Options{URL: contentServer(t, caps, answers), MaxContentItems: 1})
	if len(res.Tools) != 1 || len(res.Content.Prompts) != 1 || len(res.Content.Resources) != 0 {
		t.Fatalf("want the tools and the prompt, not the resources over the limit; got %+v", res)
	}
	if msg := res.Content.Failed["resources/list"]; !strings.Contains(msg, "more than 1") {
		t.Errorf("want resources/list failed over the limit, got %q", msg)
	}

	// The Skills extension, announced in capabilities.extensions, is listed by skills/list.
	const skill = `{"uri":"skill://a/SKILL.md","frontmatter":{"name":"a","description":"A"},"resources":[]}`
	answers["skills/list"] = `{"skills":[` + skill + `]}`
	res = probeOK(t, Options{URL: contentServer(t, caps, answers)})
	if len(res.Content.Skills) != 0 {
		t.Errorf("skills listed without the extension: %s", res.Content.Skills)
	}
	caps["extensions"] = map[string]any{definition.SkillsExtension: map[string]any{}}
	res = probeOK(t, Options{URL: contentServer(t, caps, answers)})
	if len(res.Content.Skills) != 1 || string(res.Content.Skills[0]) != skill || !slices.Contains(res.Extensions, definition.SkillsExtension) {
		t.Errorf("skills %s, extensions %v", res.Content.Skills, res.Extensions)
	}
	delete(caps, "extensions")

	delete(caps, "resources")
	res = probeOK(t, Options{URL: contentServer(t, caps, answers)})
	if len(res.Content.Resources) != 0 {
		t.Errorf("a server that does not announce resources is not asked for them: %+v", res.Content)
	}
}

// TestCatalogDigest: without content the catalog digest is Digest(tools), the value
// every import had before content was listed; content changes it, in any order.
func TestCatalogDigest(t *testing.T) {
	tools := []Tool{{Name: "a", Raw: json.RawMessage(`{"name":"a","inputSchema":{"type":"object"}}`)}}
	if got, want := CatalogDigest(tools, Content{}), Digest(tools); got != want {
		t.Fatalf("tools only: %s, want Digest(tools) %s", got, want)
	}
	if got, want := CatalogDigest(nil, Content{Failed: map[string]string{"prompts/list": "x"}}), Digest(nil); got != want {
		t.Errorf("a failed listing is no content: %s, want %s", got, want)
	}
	a, b := json.RawMessage(`{"uri":"u:a","name":"a"}`), json.RawMessage(`{ "name":"b", "uri":"u:b"}`)
	one := CatalogDigest(tools, Content{Resources: []json.RawMessage{a, b}})
	if one == Digest(tools) {
		t.Error("resources must change the catalog digest")
	}
	if other := CatalogDigest(tools, Content{Resources: []json.RawMessage{b, a}}); other != one {
		t.Error("the order of the resources must not change the catalog digest")
	}
	if asPrompt := CatalogDigest(tools, Content{Prompts: []json.RawMessage{json.RawMessage(`{"name":"a"}`)}}); asPrompt == one {
		t.Error("prompts and resources must differ")
	}
	withMeta := CatalogDigest(tools, Content{Resources: []json.RawMessage{a, json.RawMessage(`{"uri":"u:b","name":"b","_meta":{}}`)}})
	if withMeta == one {
		t.Error("a changed _meta must change the catalog digest")
	}
}

func probeOK(t *testing.T, opts Options) *Result {
	t.Helper()
	res, err := Probe(testkit.Context(t, testBudget), opts)
	if err != nil {
		t.Fatalf("Probe %s: %v", opts.URL, err)
	}
	return res
}
