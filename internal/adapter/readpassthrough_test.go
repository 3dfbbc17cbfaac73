package adapter

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// Results a remote reads and gets with what mcp-go's types would change: members they
// do not know, _meta on the result and on each content, the spelling of numbers, HTML
// characters json.Marshal escapes, a blob, an embedded resource.
const (
	vendorReadResult = `{"contents":[` +
		`{"uri":"docs://guide","mimeType":"text/markdown","text":"<b>Tom & Jerry</b> \u00e9 \"q\"","_meta":{"digest":"sha256:ab","n":1.50}},` +
		`{"uri":"docs://guide","mimeType":"image/png","blob":"iVBORw0KGgo=","_meta":{"vendor":true}}` +
		`],"_meta":{"trace":{"hops":[1,2]}},"vendorExtra":1e2}`
	vendorPromptResult = `{"description":"as sent","messages":[` +
		`{"role":"user","content":{"type":"resource","resource":{"uri":"docs://logo","mimeType":"application/octet-stream","blob":"AAEC","_meta":{"k":"v"}}}},` +
		`{"role":"assistant","content":{"type":"text","text":"<hi> & bye","_meta":{"n":1.0}}}` +
		`],"_meta":{"p":1},"vendorExtra":[true]}`
)

// importedItem is an item of the gateway's config imported from the remote at endpoint.
func importedItem(key, definition, endpoint, remoteName string) adapterconfig.ImportedItem {
	return adapterconfig.ImportedItem{Key: key, Definition: json.RawMessage(definition), Remote: adapterconfig.RemoteBackend{
		Import: "team/upstream", URL: endpoint, Transport: adapterconfig.TransportStreamableHTTP, RemoteName: remoteName,
		Timeout: adapterconfig.Duration{Duration: 5 * time.Second},
	}}
}

// contentGatewayConfig re-exports the remote's docs://guide and docs://secret, and its
// prompt "brief" as up.brief.
func contentGatewayConfig(endpoint string) *adapterconfig.Config {
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true)
	cfg.Imported = &adapterconfig.ImportedContent{
		Resources: []adapterconfig.ImportedItem{
			importedItem("docs://guide", `{"uri":"docs://guide","name":"guide"}`, endpoint, ""),
			importedItem("docs://secret", `{"uri":"docs://secret","name":"secret"}`, endpoint, ""),
		},
		Prompts: []adapterconfig.ImportedItem{importedItem("up.brief", `{"name":"brief"}`, endpoint, "brief")},
	}
	return cfg
}

// resultOf is the result member of a JSON-RPC answer, byte for byte.
func resultOf(t *testing.T, reply rpcReply) string {
	t.Helper()
	var answer struct {
		Result json.RawMessage `json:"result"`
	}
	if reply.status != http.StatusOK || json.Unmarshal(reply.body, &answer) != nil || answer.Result == nil {
		t.Fatalf("reply %d: %s", reply.status, reply.body)
	}
	return string(answer.Result)
}

// A resources/read and a prompts/get through the gateway answer the bytes a direct read
// and get of the remote answer: text, blob and _meta, and what mcp-go's types do not
// know, untouched; the prompt's arguments reach the remote.
func TestReadPassThrough_TheRemotesBytesReachTheClient(t *testing.T) {
	var mu sync.Mutex
	var promptParams []string
	remote := rawMethodsRemote(t, map[string]string{"resources/read": vendorReadResult, "prompts/get": vendorPromptResult},
		func(method string, params json.RawMessage) {
			if method == "prompts/get" {
				mu.Lock()
				promptParams = append(promptParams, string(params))
				mu.Unlock()
			}
		})
	gw := serve(t, contentGatewayConfig(remote))
	headers := map[string]string{"MCP-Protocol-Version": protocol20251125}

	for _, c := range []struct{ what, viaGateway, direct string }{
		{"resources/read",
			`{"jsonrpc":"2.0","id":"r-1","method":"resources/read","params":{"uri":"docs://guide"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"docs://guide"}}`},
		{"prompts/get",
			`{"jsonrpc":"2.0","id":"p-1","method":"prompts/get","params":{"name":"up.brief","arguments":{"topic":"<x>"}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"brief","arguments":{"topic":"<x>"}}}`},
	} {
		direct := resultOf(t, postRPC(t, remote, headers, c.direct))
		reply := postRPC(t, gw.baseURL+adapterconfig.PathMCP, headers, c.viaGateway)
		if got := resultOf(t, reply); got != direct {
			t.Errorf("%s through the gateway\n got %s\nwant %s (the direct answer)", c.what, got, direct)
		}
		if !strings.HasPrefix(reply.header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: Content-Type %q", c.what, reply.header.Get("Content-Type"))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(promptParams) != 2 || !testkit.JSONEqual(t, []byte(promptParams[1]), []byte(`{"name":"brief","arguments":{"topic":"<x>"}}`)) {
		t.Errorf("prompts/get params at the remote: %q", promptParams)
	}
}

// A read or get the caller's rules do not allow is refused by the gateway (-32602, as
// the adapter refuses its own), audited, and never reaches the remote.
func TestReadPassThrough_UnauthorizedReadsAreRefused(t *testing.T) {
	var mu sync.Mutex
	var reads []string
	remote := rawMethodsRemote(t, map[string]string{"resources/read": vendorReadResult, "prompts/get": vendorPromptResult},
		func(method string, params json.RawMessage) {
			mu.Lock()
			defer mu.Unlock()
			if method == "resources/read" || method == "prompts/get" {
				reads = append(reads, method+" "+string(params))
			}
		})
	key := newClusterKey(t, "k1")
	cfg := contentGatewayConfig(remote)
	cfg.Auth = identityConfig(t, key, adapterconfig.AuthorizationRule{Resources: []string{"docs://guide"}, ServiceAccounts: []string{"agents/*"}}).Auth
	logs := &logBuffer{}
	gw := serve(t, cfg, WithLogger(funcr.New(logs.add, funcr.Options{})))
	headers := bearerHeader(key.token(t, "agents", "reader", "room"))
	headers["MCP-Protocol-Version"] = protocol20251125

	if got := resultOf(t, postRPC(t, gw.baseURL+adapterconfig.PathMCP, headers,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"docs://guide"}}`)); got != vendorReadResult {
		t.Fatalf("an allowed read: %s", got)
	}
	for _, refused := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"docs://secret"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"up.brief"}}`,
	} {
		reply := postRPC(t, gw.baseURL+adapterconfig.PathMCP, headers, refused)
		var answer struct {
			Result json.RawMessage `json:"result"`
			Error  *jsonrpc.Error  `json:"error"`
		}
		if err := json.Unmarshal(reply.body, &answer); err != nil || answer.Result != nil || answer.Error == nil ||
			answer.Error.Code != -32602 || !strings.Contains(answer.Error.Message, "not allowed") {
			t.Errorf("%s answered %s", refused, reply.body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reads) != 1 || !strings.Contains(reads[0], "docs://guide") {
		t.Errorf("reads that reached the remote: %q, want only the allowed one", reads)
	}
	if got := logs.matching(`"outcome"="refused"`); len(got) != 2 {
		t.Errorf("refusals audited: %q, want 2", got)
	}
}
