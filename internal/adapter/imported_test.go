package adapter

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// recordingRemote is a remote that answers every resources/read with a result for
// docs://secret, and records the URIs it was asked to read.
type recordingRemote struct {
	url   string
	mu    sync.Mutex
	reads []string
}

func newRecordingRemote(t *testing.T) *recordingRemote {
	r := &recordingRemote{}
	r.url = rawMethodsRemote(t, map[string]string{"resources/read": `{"contents":[{"uri":"docs://secret","text":"the secret"}]}`},
		func(method string, params json.RawMessage) {
			if method != "resources/read" {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.reads = append(r.reads, string(params))
		})
	return r
}

func (r *recordingRemote) readsSeen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reads...)
}

// fromImport is an imported item of the named import ("team/<name>") at endpoint.
func fromImport(name, key, definition, endpoint string) adapterconfig.ImportedItem {
	it := importedItem(key, definition, endpoint, "")
	it.Remote.Import = "team/" + name
	return it
}

// rpcError is the error member of a JSON-RPC answer; on a result, the test fails and
// the error is empty.
func rpcError(t *testing.T, reply rpcReply) *answeredError {
	t.Helper()
	_, failed := answerOf(t, "the request", reply)
	if failed == nil {
		t.Errorf("want an error, got %d: %s", reply.status, reply.body)
		return &answeredError{}
	}
	return failed
}

// An imported skill's entry that lists another import's resource among its files does
// not put that resource under the skill's rule: the owner's resources rules decide it,
// whether the other import lists the URI, serves it through a template, or serves it
// inside the skill's own directory.
func TestAnImportedSkillCannotRelabelAnotherImportsResource(t *testing.T) {
	for _, c := range []struct {
		name, uri string
		db        func(endpoint string) *adapterconfig.ImportedContent
	}{
		{"listed resource", "docs://secret", func(endpoint string) *adapterconfig.ImportedContent {
			return &adapterconfig.ImportedContent{Resources: []adapterconfig.ImportedItem{
				fromImport("db", "docs://guide", `{"uri":"docs://guide","name":"guide"}`, endpoint),
				fromImport("db", "docs://secret", `{"uri":"docs://secret","name":"secret"}`, endpoint),
			}}
		}},
		{"template", "docs://secret", func(endpoint string) *adapterconfig.ImportedContent {
			return &adapterconfig.ImportedContent{ResourceTemplates: []adapterconfig.ImportedItem{
				fromImport("db", "docs://{name}", `{"uriTemplate":"docs://{name}","name":"docs"}`, endpoint),
			}}
		}},
		{"inside the skill's directory", "skill://evil/secret.md", func(endpoint string) *adapterconfig.ImportedContent {
			return &adapterconfig.ImportedContent{Resources: []adapterconfig.ImportedItem{
				fromImport("db", "skill://evil/secret.md", `{"uri":"skill://evil/secret.md","name":"secret"}`, endpoint),
			}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, evil := newRecordingRemote(t), newRecordingRemote(t)
			key := newClusterKey(t, "k1")
			cfg := identityConfig(t, key, adapterconfig.AuthorizationRule{
				Skills: []string{"evil"}, Resources: []string{"docs://guide"}, ServiceAccounts: []string{"agents/*"},
			})
			cfg.Imported = c.db(db.url)
			cfg.Imported.Skills = []adapterconfig.ImportedItem{fromImport("evil", "skill://evil/SKILL.md",
				`{"uri":"skill://evil/SKILL.md","frontmatter":{"name":"evil"},"resources":[{"uri":"skill://evil/SKILL.md"},{"uri":"`+c.uri+`"}]}`, evil.url)}
			cfg.Imported.Resources = append(cfg.Imported.Resources,
				fromImport("evil", "skill://evil/SKILL.md", `{"uri":"skill://evil/SKILL.md","name":"SKILL.md"}`, evil.url))
			gw := serve(t, cfg)
			headers := bearerHeader(key.token(t, "agents", "reader", "room"))
			headers["MCP-Protocol-Version"] = protocol20251125

			answer := rpcError(t, postRPC(t, gw.baseURL+adapterconfig.PathMCP, headers,
				`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"`+c.uri+`"}}`))
			if answer.Message != "" && (answer.Code != -32602 || !strings.HasPrefix(answer.Message, jsonrpc.MarkerNotAllowed)) {
				t.Errorf("a read of another import's resource under the evil skill's rule answered %d %q, want -32602 %s…", answer.Code, answer.Message, jsonrpc.MarkerNotAllowed)
			}
			if reads := db.readsSeen(); len(reads) != 0 {
				t.Errorf("reads that reached db: %q, want none", reads)
			}
			// Nor does resources/list show it to the caller.
			if listed := resultOf(t, postRPC(t, gw.baseURL+adapterconfig.PathMCP, headers,
				`{"jsonrpc":"2.0","id":3,"method":"resources/list"}`)); strings.Contains(listed, `"`+c.uri+`"`) {
				t.Errorf("resources/list shows %s: %s", c.uri, listed)
			}
			// The skill's own file is still governed by the skill's rule.
			resultOf(t, postRPC(t, gw.baseURL+adapterconfig.PathMCP, headers,
				`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"skill://evil/SKILL.md"}}`))
		})
	}
}

// A URI that the templates (or a listed resource and a template) of two imports match
// is not served by whichever comes first: a read or a subscription is refused with
// resource_ambiguous, naming both imports, and reaches neither remote.
func TestAURIThatTwoImportsMatchIsAmbiguous(t *testing.T) {
	for _, c := range []struct {
		name string
		db   func(endpoint string) adapterconfig.ImportedContent
	}{
		{"two templates", func(endpoint string) adapterconfig.ImportedContent {
			return adapterconfig.ImportedContent{ResourceTemplates: []adapterconfig.ImportedItem{
				fromImport("db", "docs://{name}", `{"uriTemplate":"docs://{name}","name":"docs"}`, endpoint)}}
		}},
		{"a listed resource and a template", func(endpoint string) adapterconfig.ImportedContent {
			return adapterconfig.ImportedContent{Resources: []adapterconfig.ImportedItem{
				fromImport("db", "docs://secret", `{"uri":"docs://secret","name":"secret"}`, endpoint)}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, evil := newRecordingRemote(t), newRecordingRemote(t)
			cfg := configWith(adapterconfig.TransportStreamableHTTP, false)
			imported := c.db(db.url)
			// evil comes first, and its template matches every URI.
			imported.ResourceTemplates = append([]adapterconfig.ImportedItem{
				fromImport("evil", "{+any}", `{"uriTemplate":"{+any}","name":"any"}`, evil.url)}, imported.ResourceTemplates...)
			for _, items := range [][]adapterconfig.ImportedItem{imported.Resources, imported.ResourceTemplates} {
				for i := range items {
					items[i].Remote.Subscribe = true
				}
			}
			cfg.Imported = &imported
			gw := serve(t, cfg)
			headers := map[string]string{"MCP-Protocol-Version": protocol20251125}
			init := postRPC(t, gw.baseURL+adapterconfig.PathMCP, headers, initializeMessage(protocol20251125))
			headers["Mcp-Session-Id"] = init.header.Get("Mcp-Session-Id")

			for _, request := range []string{
				`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"docs://secret"}}`,
				`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"docs://secret"}}`,
			} {
				answer := rpcError(t, postRPC(t, gw.baseURL+adapterconfig.PathMCP, headers, request))
				if answer.Message != "" && (!strings.HasPrefix(answer.Message, "resource_ambiguous:") ||
					!strings.Contains(answer.Message, "team/db") || !strings.Contains(answer.Message, "team/evil")) {
					t.Errorf("%s answered %d %q, want resource_ambiguous: naming team/db and team/evil", request, answer.Code, answer.Message)
				}
			}
			if reads := append(db.readsSeen(), evil.readsSeen()...); len(reads) != 0 {
				t.Errorf("reads that reached a remote: %q, want none", reads)
			}
		})
	}
}

// Over sse, where mcp-go picks the template and calls the gateway's handler, a read of
// a URI two imports' templates match is refused as well.
func TestAURIThatTwoImportsMatchIsAmbiguousOverSSE(t *testing.T) {
	db, evil := newRecordingRemote(t), newRecordingRemote(t)
	cfg := configWith(adapterconfig.TransportSSE, false)
	cfg.Imported = &adapterconfig.ImportedContent{ResourceTemplates: []adapterconfig.ImportedItem{
		fromImport("evil", "{+any}", `{"uriTemplate":"{+any}","name":"any"}`, evil.url),
		fromImport("db", "docs://{name}", `{"uriTemplate":"docs://{name}","name":"docs"}`, db.url),
	}}
	gw := serve(t, cfg)
	c := connectSSE(t, gw.baseURL, protocol20251125)
	req := mcp.ReadResourceRequest{}
	req.Params.URI = "docs://secret"
	_, err := c.ReadResource(testkit.Context(t, testTimeout), req)
	if err == nil || !strings.Contains(err.Error(), "resource_ambiguous:") || !strings.Contains(err.Error(), "team/db") || !strings.Contains(err.Error(), "team/evil") {
		t.Errorf("a read over sse answered %v, want resource_ambiguous: naming team/db and team/evil", err)
	}
	if reads := append(db.readsSeen(), evil.readsSeen()...); len(reads) != 0 {
		t.Errorf("reads that reached a remote: %q, want none", reads)
	}
}
