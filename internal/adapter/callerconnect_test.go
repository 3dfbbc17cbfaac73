package adapter

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/test/peers"
	"github.com/cantus-dev/cantus-operator/test/testenv/whoami"
)

const gatewayConnectToken = "gateway-connect-sa-token-7731"

// connectOperator stands in for the operator's token endpoint for gateways (the
// operator side is built and tested on its own): it answers each connected caller's
// access token, 409 connect_required with a URL of its own for the others, and a fresh
// token when told the last one was refused.
type connectOperator struct {
	srv *httptest.Server

	mu        sync.Mutex
	tokens    map[string]string // caller identity → access token handed out
	refreshed map[string]string // caller identity → the token a refresh gives
	urls      map[string]string // connect URL given → caller identity
	requests  []adapterconfig.ConnectTokenRequest
	bearers   []string
	forbid    bool // answer 403, as for an import the gateway does not serve
}

func startConnectOperator(t *testing.T) *connectOperator {
	t.Helper()
	op := &connectOperator{tokens: map[string]string{}, refreshed: map[string]string{}, urls: map[string]string{}}
	op.srv = httptest.NewTLSServer(http.HandlerFunc(op.serve))
	t.Cleanup(op.srv.Close)
	return op
}

func (op *connectOperator) serve(w http.ResponseWriter, r *http.Request) {
	var req adapterconfig.ConnectTokenRequest
	if r.URL.Path != adapterconfig.ConnectTokenPath || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	op.mu.Lock()
	op.requests = append(op.requests, req)
	op.bearers = append(op.bearers, r.Header.Get("Authorization"))
	if fresh, ok := op.refreshed[req.Caller]; ok && req.Refused {
		op.tokens[req.Caller] = fresh
		delete(op.refreshed, req.Caller)
	}
	if op.forbid {
		op.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(adapterconfig.ConnectTokenResponse{Error: "import_not_served", Message: "this gateway does not serve the import"})
		return
	}
	token := op.tokens[req.Caller]
	url := ""
	if token == "" {
		url = op.srv.URL + adapterconfig.ConnectStartPath + "?state=one-time-" + string(rune('a'+len(op.urls)))
		op.urls[url] = req.Caller
	}
	op.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if token == "" {
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(adapterconfig.ConnectTokenResponse{Error: adapterconfig.ConnectRequiredErr, ConnectURL: url, ExpiresIn: 600,
			Message: "Connect your account at the remote to let agents act as you."})
		return
	}
	_ = json.NewEncoder(w).Encode(adapterconfig.ConnectTokenResponse{AccessToken: token, ExpiresIn: 300})
}

// connectAt is what following url and logging in does: the caller it was given for
// is connected with token.
func (op *connectOperator) connectAt(url, token string) bool {
	op.mu.Lock()
	defer op.mu.Unlock()
	caller, ok := op.urls[url]
	if ok {
		op.tokens[caller] = token
		delete(op.urls, url)
	}
	return ok
}

func (op *connectOperator) set(caller, token, refreshed string) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.tokens[caller], op.refreshed[caller] = token, refreshed
}

func (op *connectOperator) recorded() ([]adapterconfig.ConnectTokenRequest, []string) {
	op.mu.Lock()
	defer op.mu.Unlock()
	return append([]adapterconfig.ConnectTokenRequest(nil), op.requests...), append([]string(nil), op.bearers...)
}

// connectWorld is a gateway whose import acts as each caller's connected account at a
// whoami remote that knows the accounts' tokens.
type connectWorld struct {
	key      *clusterKey
	op       *connectOperator
	remote   *whoami.Server
	gateway  *running
	logs     *logBuffer
	accounts map[string]string // access token → subject at the remote
}

func startConnectWorld(t *testing.T, stateless bool) *connectWorld {
	t.Helper()
	w := &connectWorld{key: newClusterKey(t, "k1"), op: startConnectOperator(t), logs: &logBuffer{},
		accounts: map[string]string{"ada-remote-token-1": "ada@remote", "cy-remote-token-1": "cy@remote", "bo-remote-token-2": "bo@remote"}}
	w.remote = whoami.Start(t, whoami.Options{APIKeys: w.accounts})
	dir := t.TempDir()
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.op.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(gatewayConnectToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tool := remoteTool("team.whoami", objectSchema, w.remote.URL(), adapterconfig.TransportStreamableHTTP, whoami.ToolName)
	tool.Remote.CallerCredentials = &adapterconfig.CallerCredentials{Header: "Authorization", ValuePrefix: "Bearer ",
		Connect: &adapterconfig.Connect{Endpoint: w.op.srv.URL + adapterconfig.ConnectTokenPath, CAFile: caFile, TokenFile: tokenFile,
			AuthorizationServer: "https://auth.remote.example"}}
	cfg := identityConfig(t, w.key)
	cfg.Stateless = stateless
	cfg.Tools = []adapterconfig.Tool{tool}
	guide := importedItem("docs://guide", `{"uri":"docs://guide","name":"guide"}`, w.remote.URL(), "")
	guide.Remote.CallerCredentials = tool.Remote.CallerCredentials
	brief := importedItem("up.brief", `{"name":"brief"}`, w.remote.URL(), "brief")
	brief.Remote.CallerCredentials = tool.Remote.CallerCredentials
	cfg.Imported = &adapterconfig.ImportedContent{Resources: []adapterconfig.ImportedItem{guide}, Prompts: []adapterconfig.ImportedItem{brief}}
	w.gateway = serve(t, cfg, WithLogger(funcr.New(w.logs.add, funcr.Options{Verbosity: 9})))
	return w
}

// client opens an mcp-go client as the service account team/name of protocol (""
// negotiates 2026-07-28), declaring URL-mode elicitation when elicit is set, which
// then answers elicitations.
func (w *connectWorld) client(t *testing.T, name, protocol string, elicit client.ElicitationHandler) *client.Client {
	t.Helper()
	token := w.key.saToken(t, "team", name, "uid-"+name, "room")
	tr, err := transport.NewStreamableHTTP(w.gateway.baseURL+adapterconfig.PathMCP, transport.WithHTTPHeaders(bearerHeader(token)))
	if err != nil {
		t.Fatal(err)
	}
	var opts []client.ClientOption
	if protocol != "" {
		opts = append(opts, client.WithProtocolVersion(protocol))
	}
	if elicit != nil {
		opts = append(opts, client.WithClientCapabilities(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{URL: &struct{}{}}}),
			client.WithElicitationHandler(elicit))
	}
	c, err := startClient(t, client.NewClient(tr, opts...), protocol)
	if err != nil {
		t.Fatalf("connect as %s: %v", name, err)
	}
	return c
}

func callWhoami(t *testing.T, c *client.Client) (*mcp.CallToolResult, error) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = "team.whoami"
	req.Params.Arguments = map[string]any{}
	// Not testContext: the test kit replaces it.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return c.CallTool(ctx, req)
}

// elicitations is an elicitation handler that records what it is asked and answers
// with act (which may follow the URL).
type elicitations struct {
	mu    sync.Mutex
	asked []mcp.ElicitationParams
	act   func(mcp.ElicitationParams) mcp.ElicitationResponseAction
}

func (e *elicitations) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.mu.Lock()
	e.asked = append(e.asked, req.Params)
	e.mu.Unlock()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: e.act(req.Params)}}, nil
}

func (e *elicitations) got() []mcp.ElicitationParams {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]mcp.ElicitationParams(nil), e.asked...)
}

// On a stateful gateway, an older (2025-11-25) caller that declared URL-mode
// elicitation gets URLElicitationRequiredError (-32042) with the operator's URL; one
// that did not gets a failed result beginning connect_required: with the URL. Once
// connected, the call reaches the remote as the caller's account. The gateway's token
// and the account's token show in no log nor metric, nor does the URL in the logs.
func TestCallerCredentials_ConnectAsksOlderCallersByWhatTheyDeclared(t *testing.T) {
	w := startConnectWorld(t, false)
	ada := w.client(t, "ada", protocol20251125, &elicitations{act: func(mcp.ElicitationParams) mcp.ElicitationResponseAction { return mcp.ElicitationResponseActionAccept }})
	_, err := callWhoami(t, ada)
	var required mcp.URLElicitationRequiredError
	if !errors.As(err, &required) || len(required.Elicitations) != 1 {
		t.Fatalf("a caller that declared url elicitation got %v, want URLElicitationRequiredError with one elicitation", err)
	}
	prompt := required.Elicitations[0]
	if prompt.Mode != mcp.ElicitationModeURL || !strings.HasPrefix(prompt.URL, w.op.srv.URL+adapterconfig.ConnectStartPath) ||
		prompt.ElicitationID == "" || prompt.Message == "" {
		t.Errorf("the elicitation is %+v, want url mode with the operator's URL, an id and a message", prompt)
	}

	bo := w.client(t, "bo", protocol20251125, nil)
	res, err := callWhoami(t, bo)
	if err != nil {
		t.Fatalf("a caller without url elicitation: %v, want a tool result", err)
	}
	text := textOf(res)
	if !res.IsError || !strings.HasPrefix(text, gateway.CodeConnectRequired+": ") || !strings.Contains(text, w.op.srv.URL+adapterconfig.ConnectStartPath) ||
		!strings.Contains(text, "team/upstream") || !strings.Contains(text, "service account") {
		t.Errorf("a caller without url elicitation got %q (isError %v), want connect_required: naming the import, with the URL", text, res.IsError)
	}
	if n := len(w.remote.Credentials()); n != 0 {
		t.Errorf("the remote was reached %d times by callers who had not connected", n)
	}

	if !w.op.connectAt(prompt.URL, "ada-remote-token-1") {
		t.Fatal("the URL is not one the operator gave")
	}
	res, err = callWhoami(t, ada)
	if err != nil || res.IsError || textOf(res) != "remote saw subject=ada@remote act=-" {
		t.Errorf("after connecting: %v %q, want the remote to see ada@remote", err, textOf(res))
	}

	metrics := metricsText(t, w.gateway.Server)
	if !strings.Contains(metrics, `cantus_adapter_caller_credential_failures_total{code="connect_required",import="team/upstream"} 2`) {
		t.Errorf("the metrics do not count two connect_required:\n%s", grepLines(metrics, "credential_failures"))
	}
	if !strings.Contains(metrics, `cantus_adapter_caller_connect_fetches_total{outcome="token",remote="team/upstream"} 1`) {
		t.Errorf("the metrics do not count one token fetched:\n%s", grepLines(metrics, "connect_fetches"))
	}
	_, bearers := w.op.recorded()
	for _, b := range bearers {
		if b != "Bearer "+gatewayConnectToken {
			t.Errorf("the operator was asked with %q, want the gateway's token", b)
		}
	}
	for _, secret := range []string{gatewayConnectToken, "ada-remote-token-1", prompt.URL, "one-time-"} {
		if got := w.logs.matching(secret); len(got) > 0 {
			t.Errorf("the logs show a token or a connect URL: %q", got)
		}
		if strings.Contains(metrics, secret) {
			t.Errorf("the metrics show %q", secret)
		}
	}
}

// A caller of protocol 2026-07-28 that declared URL-mode elicitation gets an
// input-required result with one URL-mode elicitation; its user follows the URL, the
// client calls again with the answer and the requestState, and the call reaches the
// remote as the connected account. A user who declines gets connect_required.
func TestCallerCredentials_ConnectInputRequiredForModernCallers(t *testing.T) {
	w := startConnectWorld(t, true)
	follow := &elicitations{act: func(p mcp.ElicitationParams) mcp.ElicitationResponseAction {
		if p.Mode == mcp.ElicitationModeURL && w.op.connectAt(p.URL, "cy-remote-token-1") {
			return mcp.ElicitationResponseActionAccept
		}
		return mcp.ElicitationResponseActionCancel
	}}
	cy := w.client(t, "cy", "", follow)
	res, err := callWhoami(t, cy)
	if err != nil || res.IsError || textOf(res) != "remote saw subject=cy@remote act=-" {
		t.Fatalf("got %v %q (isError %v), want the remote to see cy@remote after connecting", err, textOf(res), res != nil && res.IsError)
	}
	asked := follow.got()
	if len(asked) != 1 || asked[0].Mode != mcp.ElicitationModeURL || asked[0].ElicitationID == "" {
		t.Errorf("the client was asked %+v, want one url-mode elicitation", asked)
	}
	if n := w.remote.Calls("cy@remote"); n != 1 {
		t.Errorf("the remote saw %d calls of cy@remote, want 1", n)
	}
	requests, _ := w.op.recorded()
	if len(requests) != 2 || requests[0].Caller != adapterconfig.ServiceAccountCaller("team/cy", "uid-cy") || requests[0].Import != "team/upstream" {
		t.Errorf("the operator was asked %+v, want two fetches for team/cy of team/upstream", requests)
	}

	decline := &elicitations{act: func(mcp.ElicitationParams) mcp.ElicitationResponseAction { return mcp.ElicitationResponseActionDecline }}
	dee := w.client(t, "dee", "", decline)
	res, err = callWhoami(t, dee)
	if err != nil || !res.IsError || !strings.HasPrefix(textOf(res), gateway.CodeConnectRequired+": the user declined") {
		t.Errorf("a user who declined got %v %q, want connect_required saying so", err, textOf(res))
	}
	if n := len(decline.got()); n != 1 {
		t.Errorf("a user who declined was asked %d times, want 1", n)
	}
}

// A stateless gateway keeps no session: it asks an older caller by what that caller
// declared at its last initialize on this replica. One that declared URL-mode
// elicitation gets URLElicitationRequiredError (-32042), one that did not gets the failed
// result carrying the URL, and the same caller identity initializing again without it
// is then asked by the tool error.
func TestCallerCredentials_ConnectStatelessOlderCallerAskedByItsInitialize(t *testing.T) {
	w := startConnectWorld(t, true)
	accept := &elicitations{act: func(mcp.ElicitationParams) mcp.ElicitationResponseAction { return mcp.ElicitationResponseActionAccept }}
	ada := w.client(t, "ada", protocol20251125, accept)
	_, err := callWhoami(t, ada)
	var required mcp.URLElicitationRequiredError
	if !errors.As(err, &required) || len(required.Elicitations) != 1 ||
		!strings.HasPrefix(required.Elicitations[0].URL, w.op.srv.URL+adapterconfig.ConnectStartPath) {
		t.Fatalf("a stateless caller that declared url elicitation got %v, want URLElicitationRequiredError with the URL", err)
	}

	wantToolError := func(c *client.Client, who string) {
		t.Helper()
		res, err := callWhoami(t, c)
		if err != nil || !res.IsError || !strings.HasPrefix(textOf(res), gateway.CodeConnectRequired+": ") ||
			!strings.Contains(textOf(res), w.op.srv.URL+adapterconfig.ConnectStartPath) {
			t.Errorf("%s got %v %q, want connect_required with the URL", who, err, textOf(res))
		}
	}
	wantToolError(w.client(t, "bo", protocol20251125, nil), "a stateless caller that declared nothing")
	wantToolError(w.client(t, "ada", protocol20251125, nil), "ada, initialized again without url elicitation")
}

// A remote that refuses a connected account's token gets it renewed: the gateway asks
// the operator again saying the token was refused, gets a fresh one, and retries once.
func TestCallerCredentials_ConnectRefusedTokenIsRefreshedOnce(t *testing.T) {
	w := startConnectWorld(t, false)
	caller := adapterconfig.ServiceAccountCaller("team/bo", "uid-bo")
	w.op.set(caller, "bo-revoked-token", "bo-remote-token-2")
	bo := w.client(t, "bo", protocol20251125, nil)
	res, err := callWhoami(t, bo)
	if err != nil || res.IsError || textOf(res) != "remote saw subject=bo@remote act=-" {
		t.Fatalf("got %v %q, want the remote to see bo@remote with the refreshed token", err, textOf(res))
	}
	requests, _ := w.op.recorded()
	if len(requests) != 2 || requests[0].Refused || !requests[1].Refused {
		t.Errorf("the operator was asked %+v, want a fetch and a refused refetch", requests)
	}
	if n := w.remote.Rejected(); n != 1 {
		t.Errorf("the remote refused %d requests, want 1 (the revoked token's)", n)
	}
	if got := w.logs.matching("bo-revoked-token"); len(got) > 0 {
		t.Errorf("the logs show the refused token: %q", got)
	}
}

// The official TypeScript SDK (protocol 2025-11-25) declaring URL-mode elicitation
// surfaces the gateway's URLElicitationRequiredError (-32042) with the operator's URL.
func TestCallerCredentials_ConnectTypeScriptClientGetsURLElicitationRequired(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the TypeScript SDK")
	}
	w := startConnectWorld(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := peers.TSClient(t, ctx, peers.TSClientOptions{
		URL: w.gateway.baseURL + adapterconfig.PathMCP, Headers: bearerHeader(w.key.saToken(t, "team", "ada", "uid-ada", "room")),
		Call: "team.whoami", Declare: []string{"elicitation-url"}, CallErrorOK: true,
	})
	if out.CallError == nil || out.CallError.Code != mcp.URL_ELICITATION_REQUIRED {
		t.Fatalf("the TypeScript client got %+v (result %+v), want -32042", out.CallError, out.Result)
	}
	var data struct {
		Elicitations []mcp.ElicitationParams `json:"elicitations"`
	}
	if err := json.Unmarshal(out.CallError.Data, &data); err != nil || len(data.Elicitations) != 1 ||
		data.Elicitations[0].Mode != mcp.ElicitationModeURL || !strings.HasPrefix(data.Elicitations[0].URL, w.op.srv.URL+adapterconfig.ConnectStartPath) {
		t.Errorf("the error's data is %s, want one url-mode elicitation with the operator's URL", out.CallError.Data)
	}
}

// A read or a prompt get of a connect-mode import by a caller who has not connected is
// answered URLElicitationRequiredError (-32042) carrying the URL, and nothing reaches
// the remote.
func TestCallerCredentials_ConnectReadsAndPromptsAnswerURLElicitationRequired(t *testing.T) {
	w := startConnectWorld(t, false)
	ada := w.client(t, "ada", protocol20251125, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	read := mcp.ReadResourceRequest{}
	read.Params.URI = "docs://guide"
	_, readErr := ada.ReadResource(ctx, read)
	get := mcp.GetPromptRequest{}
	get.Params.Name = "up.brief"
	_, getErr := ada.GetPrompt(ctx, get)
	for what, err := range map[string]error{"resources/read": readErr, "prompts/get": getErr} {
		var required mcp.URLElicitationRequiredError
		if !errors.As(err, &required) || len(required.Elicitations) != 1 || required.Elicitations[0].Mode != mcp.ElicitationModeURL ||
			!strings.HasPrefix(required.Elicitations[0].URL, w.op.srv.URL+adapterconfig.ConnectStartPath) {
			t.Errorf("%s: got %v, want URLElicitationRequiredError with the operator's URL", what, err)
		}
	}
	if n := len(w.remote.Credentials()); n != 0 {
		t.Errorf("the remote was reached %d times", n)
	}
}

// A refused token the operator cannot refresh (the account must be connected again)
// makes the call a connect prompt, not upstream_unauthorized.
func TestCallerCredentials_ConnectRefusedTokenWithoutRefreshAsksToReconnect(t *testing.T) {
	w := startConnectWorld(t, false)
	w.op.set(adapterconfig.ServiceAccountCaller("team/bo", "uid-bo"), "bo-revoked-token", "")
	bo := w.client(t, "bo", protocol20251125, nil)
	res, err := callWhoami(t, bo)
	if err != nil || !res.IsError || !strings.HasPrefix(textOf(res), gateway.CodeConnectRequired+": ") ||
		!strings.Contains(textOf(res), w.op.srv.URL+adapterconfig.ConnectStartPath) {
		t.Errorf("got %v %q, want connect_required with the URL", err, textOf(res))
	}
	if n := w.remote.Rejected(); n != 1 {
		t.Errorf("the remote refused %d requests, want 1", n)
	}
}

// An operator that refuses the gateway makes the call connect_unavailable:, quoting
// its status and error and naming the import; it is counted, and nothing reaches the
// remote.
func TestCallerCredentials_ConnectUnavailableOperatorIsAPreciseError(t *testing.T) {
	w := startConnectWorld(t, false)
	w.op.mu.Lock()
	w.op.forbid = true
	w.op.mu.Unlock()
	res, err := callWhoami(t, w.client(t, "ada", protocol20251125, nil))
	text := textOf(res)
	if err != nil || !res.IsError || !strings.HasPrefix(text, gateway.CodeConnectUnavailable+": ") || !strings.Contains(text, "team/upstream") ||
		!strings.Contains(text, "HTTP 403") || !strings.Contains(text, "import_not_served") {
		t.Errorf("got %v %q, want connect_unavailable: naming the import, the status and the operator's error", err, text)
	}
	if strings.Contains(text, gatewayConnectToken) {
		t.Errorf("the answer shows the gateway's token")
	}
	metrics := metricsText(t, w.gateway.Server)
	if !strings.Contains(metrics, `cantus_adapter_caller_credential_failures_total{code="connect_unavailable",import="team/upstream"} 1`) ||
		!strings.Contains(metrics, `cantus_adapter_caller_connect_fetches_total{outcome="failed",remote="team/upstream"} 1`) {
		t.Errorf("the metrics do not count the failure:\n%s", grepLines(metrics, "connect"))
	}
	if n := len(w.remote.Credentials()); n != 0 {
		t.Errorf("the remote was reached %d times", n)
	}
}
