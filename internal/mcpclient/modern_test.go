package mcpclient_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	. "github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/test/testenv/dualera"
)

func sortedToolNames(tools []Tool) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	slices.Sort(names)
	return names
}

func probeOf(t *testing.T, url string) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := Probe(ctx, Options{URL: url, Capabilities: RelayableCapabilities()})
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	return res
}

// A remote serving both eras is probed in both: server/discover first, then
// initialize; the tools and prompts it lists only in 2026-07-28 are among the modern
// ones only.
func TestProbe_DualEraRemoteRecordsBothErasAndTheToolsOfEach(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	res := probeOf(t, remote.URL)
	if !slices.Equal(res.Eras, []string{EraModern, EraLegacy}) {
		t.Fatalf("eras %v, want both", res.Eras)
	}
	if got := sortedToolNames(res.Tools); !slices.Equal(got, []string{dualera.ToolConfirm, dualera.ToolEcho, dualera.ToolRegion, dualera.ToolVersioned}) {
		t.Errorf("2025-11-25 tools %v, want confirm, echo, region and versioned", got)
	}
	if got := sortedToolNames(res.ModernTools); !slices.Equal(got, []string{dualera.ToolConfirm, dualera.ToolEcho, dualera.ToolModernOnly, dualera.ToolRegion, dualera.ToolVersioned}) {
		t.Errorf("2026-07-28 tools %v, want confirm, echo, modern_only, region and versioned", got)
	}
	if res.ModernContent == nil || len(res.ModernContent.Prompts) != 2 || len(res.Content.Prompts) != 1 {
		t.Errorf("prompts %d in 2025-11-25 and %+v in 2026-07-28, want hello in both and confirm_prompt in the newer only", len(res.Content.Prompts), res.ModernContent)
	}
	if res.ProtocolVersion != EraLegacy || res.ServerName != "dualera" {
		t.Errorf("protocol %q server %q, want the 2025-11-25 session's", res.ProtocolVersion, res.ServerName)
	}
	discover := remote.Requests(string(mcp.MethodServerDiscover))
	if len(discover) != 1 || discover[0].McpMethod != "server/discover" || discover[0].ProtocolHeader != EraModern ||
		discover[0].MetaString(mcp.MetaKeyProtocolVersion) != EraModern {
		t.Errorf("server/discover requests %+v, want one of protocol 2026-07-28 with its headers and _meta", discover)
	}
	if all := remote.Requests(""); all[0].Method != string(mcp.MethodServerDiscover) {
		t.Errorf("the first request was %s, want server/discover (requests: %s)", all[0].Method, remote.Methods())
	}
}

// A remote of 2025-11-25 only refuses server/discover; the probe goes on with
// initialize as before and records one era.
func TestProbe_LegacyOnlyRemoteRecordsOneEra(t *testing.T) {
	remote := dualera.Start(t, dualera.LegacyOnly)
	res := probeOf(t, remote.URL)
	if !slices.Equal(res.Eras, []string{EraLegacy}) || res.ModernTools != nil {
		t.Fatalf("eras %v modern tools %v, want 2025-11-25 only", res.Eras, res.ModernTools)
	}
	if got := sortedToolNames(res.Tools); !slices.Equal(got, []string{dualera.ToolConfirm, dualera.ToolEcho, dualera.ToolRegion, dualera.ToolVersioned}) {
		t.Errorf("tools %v, want confirm, echo, region and versioned", got)
	}
}

// A remote of 2026-07-28 only refuses initialize; the probe's result is what it
// lists in that era.
func TestProbe_ModernOnlyRemoteRecordsOneEraAndItsTools(t *testing.T) {
	remote := dualera.Start(t, dualera.ModernOnly)
	res := probeOf(t, remote.URL)
	if !slices.Equal(res.Eras, []string{EraModern}) || res.ProtocolVersion != EraModern {
		t.Fatalf("eras %v protocol %q, want 2026-07-28 only", res.Eras, res.ProtocolVersion)
	}
	if got := sortedToolNames(res.Tools); !slices.Equal(got, []string{dualera.ToolConfirm, dualera.ToolEcho, dualera.ToolModernOnly, dualera.ToolRegion, dualera.ToolVersioned}) {
		t.Errorf("tools %v, want the five of 2026-07-28", got)
	}
	if !slices.Contains(res.Capabilities, "tools") {
		t.Errorf("capabilities %v, want tools (from server/discover)", res.Capabilities)
	}
	for _, req := range remote.Requests("tools/list") {
		if req.ProtocolHeader != EraModern || req.McpMethod != "tools/list" || req.MetaString(mcp.MetaKeyProtocolVersion) != EraModern {
			t.Errorf("a tools/list went as %+v, want protocol 2026-07-28 with its headers and _meta", req)
		}
	}
}

// A modern call carries the _meta it is given (protocol version, log level,
// capabilities, and the client's own clientInfo) and the headers of SEP-2243; an
// input-required result comes back as the remote sent it, and the retry with the
// answer and the remote's requestState completes.
func TestModernSession_CallCarriesMetaAndHeadersAndCompletesAnInputRequiredRoundTrip(t *testing.T) {
	remote := dualera.Start(t, dualera.Both)
	c, err := New(ClientOptions{URL: remote.URL, ClientName: "gw", ClientVersion: "9"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := c.Modern(RequestMeta{})
	meta := &RequestMeta{ProtocolVersion: EraModern, LogLevel: "info", ClientCapabilities: json.RawMessage(`{"elicitation":{}}`)}
	raw, err := s.CallToolWith(ctx, dualera.ToolConfirm, nil, CallOptions{Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	var asked mcp.CallToolResult
	if err := json.Unmarshal(raw, &asked); err != nil {
		t.Fatal(err)
	}
	var head struct {
		ResultType    string                     `json:"resultType"`
		RequestState  string                     `json:"requestState"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	}
	_ = json.Unmarshal(raw, &head)
	if head.ResultType != string(mcp.ResultTypeInputRequired) || head.RequestState != dualera.StateAsked || head.InputRequests[dualera.ElicitationKey] == nil {
		t.Fatalf("first answer %s, want an input-required result asking for the elicitation", raw)
	}
	calls := remote.Calls(dualera.ToolConfirm)
	if len(calls) != 1 {
		t.Fatalf("the remote saw %d calls", len(calls))
	}
	got := calls[0]
	if got.McpMethod != "tools/call" || got.McpName != dualera.ToolConfirm || got.ProtocolHeader != EraModern ||
		got.MetaString(mcp.MetaKeyLogLevel) != "info" || !strings.Contains(string(got.Meta[mcp.MetaKeyClientInfo]), `"gw"`) ||
		string(got.Meta[mcp.MetaKeyClientCapabilities]) != `{"elicitation":{}}` {
		t.Errorf("the call went as %+v, want its _meta and headers", got)
	}
	raw, err = s.CallToolWith(ctx, dualera.ToolConfirm, nil, CallOptions{Meta: meta, InputAnswers: InputAnswers{RequestState: head.RequestState,
		InputResponses: json.RawMessage(`{"confirm":{"action":"accept","content":{"ok":true}}}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `confirmed: accept {\"ok\":true}`) {
		t.Errorf("the retry got %s, want the confirmation", raw)
	}
}

// A modern session of a remote that serves only 2025-11-25 fails server/discover,
// which is what makes the probe fall back.
func TestModernSession_DiscoverOfLegacyOnlyRemoteFails(t *testing.T) {
	remote := dualera.Start(t, dualera.LegacyOnly)
	c, err := New(ClientOptions{URL: remote.URL})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.Modern(RequestMeta{}).Discover(context.Background()); err == nil {
		t.Fatalf("discover answered %+v, want an error", d)
	}
}
