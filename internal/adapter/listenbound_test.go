package adapter

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// listenBody is a subscriptions/listen of protocol 2026-07-28 asking for uris.
func listenBody(id int, uris []string) string {
	list, _ := json.Marshal(uris)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}},`+
		`"notifications":{"resourceSubscriptions":%s}}}`, id, list)
}

const protocol20260728 = "2026-07-28"

var modernHeaders = map[string]string{"Mcp-Protocol-Version": protocol20260728, "Mcp-Method": "subscriptions/listen"}

func manyURIs(n int) []string {
	uris := make([]string, n)
	for i := range uris {
		uris[i] = fmt.Sprintf("u:%d", i)
	}
	return uris
}

// subscribableGatewayConfig re-exports a resource of a remote that offers
// subscriptions; the remote is never reached by these tests.
func subscribableGatewayConfig() *adapterconfig.Config {
	cfg := contentGatewayConfig("http://127.0.0.1:1/mcp")
	cfg.Imported.Resources[0].Remote.Subscribe = true
	return cfg
}

// A subscriptions/listen asking for more resource subscriptions than one request may
// hold is refused at once with a JSON-RPC error naming the bound, before its URIs are
// de-duplicated or subscribed: 60,000 URIs cost no more than reading them.
func TestListenWithTooManySubscriptionsIsRefusedWithTheBound(t *testing.T) {
	gw := serve(t, subscribableGatewayConfig())
	start := time.Now()
	reply := postRPC(t, gw.baseURL+adapterconfig.PathMCP, modernHeaders, listenBody(5, manyURIs(60_000)))
	t.Logf("a listen of 60,000 URIs was answered in %s", time.Since(start))
	var answer jsonrpc.Answer
	if err := json.Unmarshal(reply.body, &answer); err != nil || answer.Error == nil {
		t.Fatalf("listen of 60,000 URIs answered %d %s, want a JSON-RPC error", reply.status, reply.body)
	}
	if string(answer.ID) != "5" || answer.Error.Code != -32602 ||
		!strings.Contains(answer.Error.Message, fmt.Sprintf("at most %d", gateway.MaxSessionSubscriptions)) {
		t.Errorf("listen of 60,000 URIs answered %s, want -32602 for id 5 saying at most %d", reply.body, gateway.MaxSessionSubscriptions)
	}
}

// A server that relays no subscriptions leaves a listen to mcp-go: the gate parses
// none of its URIs, and mcp-go acknowledges it.
func TestListenOnAServerWithoutSubscriptionsIsLeftToMCPGo(t *testing.T) {
	r := serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x")))
	if r.subscriptions.RelaysListen() {
		t.Error("a server with no subscribable import relays listen subscriptions")
	}
	start := time.Now()
	resp := openPost(t, r.baseURL+adapterconfig.PathMCP, modernHeaders, listenBody(2, manyURIs(60_000)))
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	t.Logf("mcp-go answered a listen of 60,000 URIs in %s", time.Since(start))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), `"id":2,"result"`) {
		t.Errorf("listen on a plain server answered %s %q, want mcp-go's result for id 2", resp.Status, answer)
	}
}

// The resource subscriptions a listen could not establish are logged in one line per
// request, and a caller's lines at most once per 10 s, however many URIs it names.
func TestListenRefusalsAreLoggedOncePerCaller(t *testing.T) {
	logs := &logBuffer{}
	gw := serve(t, subscribableGatewayConfig(), WithLogger(funcr.New(logs.add, funcr.Options{Verbosity: 1})))
	for i := range 3 {
		reply := postRPC(t, gw.baseURL+adapterconfig.PathMCP, modernHeaders, listenBody(i, manyURIs(50)))
		if reply.status != http.StatusOK {
			t.Fatalf("listen %d: %d %s", i, reply.status, reply.body)
		}
	}
	if lines := logs.matching("not established"); len(lines) != 1 || !strings.Contains(lines[0], `"refused"=50`) {
		t.Errorf("3 listens of 50 refused URIs logged %d lines, want one saying 50 were refused:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// Resource subscriptions spelled so that the gateway could not take them out of the
// request (a case variant or an escape in the key, which encoding/json and so mcp-go
// read as the key) are refused, not left to mcp-go to acknowledge and never deliver.
func TestListenWithAVariantSpellingOfResourceSubscriptionsIsRefused(t *testing.T) {
	gw := serve(t, subscribableGatewayConfig())
	for _, key := range []string{"ResourceSubscriptions", `resource\u0053ubscriptions`} {
		body := strings.Replace(listenBody(4, []string{"docs://guide"}), `"resourceSubscriptions"`, `"`+key+`"`, 1)
		reply := postRPC(t, gw.baseURL+adapterconfig.PathMCP, modernHeaders, body)
		if !strings.Contains(string(reply.body), `"code":-32602`) || !strings.Contains(string(reply.body), "exact keys") {
			t.Errorf("listen with %q answered %d %s, want -32602 asking for the exact keys", key, reply.status, reply.body)
		}
	}
}
