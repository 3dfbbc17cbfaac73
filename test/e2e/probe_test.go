package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// probeOutput is what `adapter probe` prints.
type probeOutput struct {
	ServerName      string   `json:"serverName"`
	ServerVersion   string   `json:"serverVersion"`
	ProtocolVersion string   `json:"protocolVersion"`
	Capabilities    []string `json:"capabilities"`
	Tools           []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	Digest string `json:"digest"`
}

// runProbe runs the real `adapter probe args…` and returns its exit code and output.
func runProbe(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, peers.AdapterBinary(t), append([]string{"probe"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("adapter probe %q: %v\n%s", args, err, errOut.String())
	}
	return code, out.String(), errOut.String()
}

// TestProbeServerEverything probes @modelcontextprotocol/server-everything (pinned in
// test/mcp-peers) over streamable HTTP and SSE with the real `adapter probe`, and
// compares with what the official TypeScript SDK client lists: the same server, the
// same tools in the same order, input schemas equal as parsed JSON.
func TestProbeServerEverything(t *testing.T) {
	for _, tc := range []struct{ transport, path string }{
		{peers.TransportStreamableHTTP, "/mcp"},
		{peers.TransportSSE, "/sse"},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			t.Parallel()
			ctx := testkit.Context(t, testTimeout)
			url := peers.StartServerEverything(t, ctx, tc.transport) + tc.path

			code, stdout, stderr := runProbe(t, ctx, "--transport", tc.transport, "--timeout", "20s", url)
			if code != 0 {
				t.Fatalf("adapter probe exited %d:\n%s", code, stderr)
			}
			var got probeOutput
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("adapter probe printed no JSON result: %v\n%s", err, stdout)
			}
			want := peers.TSClient(t, ctx, peers.TSClientOptions{URL: url, Transport: tc.transport})

			if got.ServerName != want.ServerInfo.Name || got.ServerVersion != want.ServerInfo.Version {
				t.Errorf("server %q %q, the TS client saw %q %q", got.ServerName, got.ServerVersion, want.ServerInfo.Name, want.ServerInfo.Version)
			}
			if !slices.Contains([]string{"2025-11-25", "2025-06-18", "2025-03-26"}, got.ProtocolVersion) {
				t.Errorf("negotiated protocol version %q", got.ProtocolVersion)
			}
			for name := range want.Capabilities {
				if !slices.Contains(got.Capabilities, name) {
					t.Errorf("capabilities %v lack %q, which the TS client saw", got.Capabilities, name)
				}
			}
			if len(got.Digest) != 64 {
				t.Errorf("digest %q is not sha256 hex", got.Digest)
			}
			var names []string
			for _, tool := range got.Tools {
				names = append(names, tool.Name)
			}
			if !slices.Equal(names, want.ToolNames()) {
				t.Fatalf("tools %v, the TS client listed %v", names, want.ToolNames())
			}
			for i, tool := range got.Tools {
				w := want.Tools[i]
				if tool.Description != w.Description {
					t.Errorf("%s: description %q, want %q", tool.Name, tool.Description, w.Description)
				}
				if !testkit.JSONEqual(t, tool.InputSchema, w.InputSchema) {
					t.Errorf("%s: inputSchema differs from the TS client's\n got: %s\nwant: %s", tool.Name, tool.InputSchema, w.InputSchema)
				}
			}
			t.Logf("%s: %d tools, protocol %s, capabilities %v", tc.transport, len(got.Tools), got.ProtocolVersion, got.Capabilities)
		})
	}
}

// conformanceClientScenarios: the client scenarios of the pinned suite (`conformance
// list --client`) and whether `adapter probe` runs them; the reason says why not.
var conformanceClientScenarios = map[string]string{
	"initialize":                          "",
	"tools_call":                          "the scenario passes only when the client calls its add_numbers tool; a probe lists tools and never calls one",
	"elicitation-sep1034-client-defaults": "the client must answer elicitation/create during a tool call; a probe calls no tool and declares no elicitation capability",
	"sse-retry": "the scenario closes the stream of a tools/call and checks the GET reconnection timing; a probe calls no tool " +
		"(resuming a closed stream with Last-Event-ID is covered for tools/list in internal/mcpclient's TestProbeResumesClosedStream)",
	// New in 0.2.0-alpha.12. The 2026-07-28 client obligations belong to the probe's
	// move to that protocol (the relay issue); today it negotiates 2025-11-25 and older.
	"request-metadata":                   "per-request _meta and MCP-Protocol-Version obligations of protocol 2026-07-28 (SEP-2575); the probe negotiates 2025-11-25 and older",
	"http-standard-headers":              "Mcp-Method and Mcp-Name headers are a 2026-07-28 obligation (SEP-2243); the probe negotiates 2025-11-25 and older",
	"sep-2322-client-request-state":      "input-required results (SEP-2322) answer tool calls; a probe calls no tool",
	"http-custom-headers":                "mirrors x-mcp-header parameters of a tools/call into headers; a probe calls no tool",
	"http-invalid-tool-headers":          "the client must refuse to call tools whose x-mcp-header annotations are invalid; a probe calls no tool",
	"json-schema-ref-no-deref":           "not run yet: the probe keeps schemas as data and resolves no $ref, which this scenario would confirm; it comes with the probe's 2026-07-28 work",
	"json-schema-2020-12-preservation":   "not run yet: the probe keeps schemas byte for byte (TestGatewayServesImportedDefinitionsAsTheRemoteDefinedThem checks it end to end); it comes with the probe's 2026-07-28 work",
	"sep-2640-client-no-prefetch":        "a host's obligation when it loads Agent Skills; a probe lists tools and loads no skill",
	"sep-2640-client-verify-digest":      "a host's obligation when it loads Agent Skills; a probe lists tools and loads no skill",
	"sep-2640-client-verify-size":        "a host's obligation when it loads Agent Skills; a probe lists tools and loads no skill",
	"sep-2640-client-verify-frontmatter": "a host's obligation when it loads Agent Skills; a probe lists tools and loads no skill",
}

// notApplicableClientPrefix: the auth/* scenarios need OAuth (discovery, dynamic
// registration, token exchange); probes send static headers from Secrets.
const notApplicableClientPrefix = "auth/"

// TestProbeConformanceClient runs the conformance suite's client scenario
// `initialize` against the real `adapter probe`: at least one check, all SUCCESS
// (server-info is an INFO note of what the mock server announced).
func TestProbeConformanceClient(t *testing.T) {
	ctx := testkit.Context(t, conformanceTimeout)
	for scenario, notApplicable := range conformanceClientScenarios {
		if notApplicable != "" {
			continue
		}
		t.Run(scenario, func(t *testing.T) {
			checks := peers.RunConformanceClient(t, ctx, []string{peers.AdapterBinary(t), "probe"}, scenario)
			if !slices.ContainsFunc(checks, func(c peers.Check) bool { return c.ID == "mcp-client-initialization" }) {
				t.Errorf("no mcp-client-initialization check among %d", len(checks))
			}
			peers.RequireChecksPassed(t, scenario, checks, "server-info")
		})
	}
}

// TestProbeClientScenariosAccountedFor fails when the pinned suite gains a client
// scenario that is neither run nor explained above.
func TestProbeClientScenariosAccountedFor(t *testing.T) {
	ctx := testkit.Context(t, testTimeout)
	for _, name := range peers.ConformanceScenarios(t, ctx, true) {
		if _, ok := conformanceClientScenarios[name]; !ok && !strings.HasPrefix(name, notApplicableClientPrefix) {
			t.Errorf("client scenario %q is neither run by TestProbeConformanceClient nor listed as not applicable", name)
		}
	}
}

// TestProbeCommandFailure: a failed probe exits 1 and prints the marked error and its
// reason to stderr; a bad command line exits 2.
func TestProbeCommandFailure(t *testing.T) {
	ctx := testkit.Context(t, testTimeout)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	code, stdout, stderr := runProbe(t, ctx, "--header", "Authorization: Bearer not-printed-secret", "http://"+addr+"/mcp", "--timeout", "5s")
	if code != 1 || stdout != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
	}
	if !strings.HasPrefix(stderr, "mcp_handshake_failed: connection refused by "+addr) || !strings.Contains(stderr, "reason: ConnectionRefused") {
		t.Errorf("stderr %q", stderr)
	}
	if strings.Contains(stderr, "not-printed-secret") {
		t.Errorf("stderr shows the header value: %q", stderr)
	}
	if code, _, stderr := runProbe(t, ctx, "--transport", "sse"); code != 2 {
		t.Errorf("no URL: exit %d, want 2\n%s", code, stderr)
	}
}
