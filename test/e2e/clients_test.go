package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// TestTypeScriptSDKClient connects the official TypeScript SDK client to the adapter
// over each transport (and both session modes of streamable HTTP), lists the tools,
// calls a template skill and checks how invalid arguments are reported.
func TestTypeScriptSDKClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  configOptions
	}{
		{"streamable-http/stateless", configOptions{transport: adapterconfig.TransportStreamableHTTP, stateless: true}},
		{"streamable-http/stateful", configOptions{transport: adapterconfig.TransportStreamableHTTP, stateless: false}},
		{"sse", configOptions{transport: adapterconfig.TransportSSE}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Context(t, testTimeout)
			url := startAdapter(t, ctx, tc.cfg)
			client := func(call string, args any) peers.TSClientOutput {
				return peers.TSClient(t, ctx, peers.TSClientOptions{
					URL: url, Transport: tc.cfg.transport, Call: call, Args: args,
				})
			}

			out := client("greet", map[string]any{"name": "Ada", "times": 2})
			if out.ServerInfo.Name != serverName || out.ServerInfo.Version != serverVersion {
				t.Errorf("serverInfo = %+v, want %s %s", out.ServerInfo, serverName, serverVersion)
			}
			if !slices.Contains([]string{"2025-11-25", "2025-06-18", "2025-03-26"}, out.ProtocolVersion) {
				t.Errorf("negotiated protocol version %q, want one the SDK and the spec know", out.ProtocolVersion)
			}
			if out.Instructions != instructions {
				t.Errorf("instructions = %q, want %q", out.Instructions, instructions)
			}
			if _, ok := out.Capabilities["tools"]; !ok {
				t.Errorf("capabilities %v lack tools", out.Capabilities)
			}
			assertToolsAsConfigured(t, out.Tools)

			if out.Result == nil || out.Result.IsError {
				t.Fatalf("greet result = %+v, want a success", out.Result)
			}
			if got, want := out.Result.Text(), "Hello, Ada! (2x)"; got != want {
				t.Errorf("greet text = %q, want %q", got, want)
			}
			if got := client("greet", map[string]any{"name": "Bo"}).Result.Text(); got != "Hello, Bo! (1x)" {
				t.Errorf("greet without the optional argument = %q, want %q", got, "Hello, Bo! (1x)")
			}
			if got := client("test_simple_text", nil).Result.Text(); got != simpleTextResponse {
				t.Errorf("test_simple_text = %q, want %q", got, simpleTextResponse)
			}
			if res := client("lookup", map[string]any{"key": "k1"}).Result; res.IsError || res.Text() != `got {"key":"k1"}` {
				t.Errorf("lookup (http skill) = %+v, want the backend's answer %q", res, `got {"key":"k1"}`)
			}
			wantErr := "http_call_failed: 500 Internal Server Error: " + errorResponse
			if res := client("test_error_handling", nil).Result; !res.IsError || res.Text() != wantErr {
				t.Errorf("test_error_handling (failing http skill) = %+v, want isError %q", res, wantErr)
			}

			for _, bad := range []struct {
				args     map[string]any
				argument string // the message must name it
			}{
				{map[string]any{"name": 5}, "/name"},
				{map[string]any{"name": "Ada", "times": 9}, "/times"},
				{map[string]any{"times": 1}, "name"},
			} {
				res := client("greet", bad.args).Result
				if res == nil || !res.IsError {
					t.Errorf("greet %v = %+v, want isError", bad.args, res)
					continue
				}
				if text := res.Text(); !strings.HasPrefix(text, "invalid arguments: ") || !strings.Contains(text, bad.argument) {
					t.Errorf("greet %v error = %q, want it to begin with %q and name %q", bad.args, text, "invalid arguments: ", bad.argument)
				}
			}
		})
	}
}

// assertToolsAsConfigured checks the listed tools against skillTools: the same set of
// names (MCP fixes no order; mcp-go sorts by name), descriptions, and input schemas
// passed through unchanged.
func assertToolsAsConfigured(t *testing.T, got []peers.Tool) {
	t.Helper()
	byName := map[string]peers.Tool{}
	var names []string
	for _, tool := range got {
		byName[tool.Name] = tool
		names = append(names, tool.Name)
	}
	want := skillTools("")
	if len(got) != len(want) || len(byName) != len(want) {
		t.Fatalf("tools/list = %v, want %d distinct tools", names, len(want))
	}
	for _, w := range want {
		g, ok := byName[w.Name]
		if !ok {
			t.Errorf("tools/list = %v, lacks %s", names, w.Name)
			continue
		}
		if g.Description != w.Description {
			t.Errorf("tool %s description = %q, want %q", w.Name, g.Description, w.Description)
		}
		if !testkit.JSONEqual(t, g.InputSchema, w.InputSchema) {
			t.Errorf("tool %s inputSchema = %s, want it unchanged: %s", w.Name, g.InputSchema, w.InputSchema)
		}
	}
	var ann struct {
		Title        string `json:"title"`
		ReadOnlyHint *bool  `json:"readOnlyHint"`
	}
	if err := json.Unmarshal(byName["greet"].Annotations, &ann); err != nil || ann.Title != "Greeter" || ann.ReadOnlyHint == nil || !*ann.ReadOnlyHint {
		t.Errorf("greet annotations = %s (%v), want title Greeter and readOnlyHint true", byName["greet"].Annotations, err)
	}
}

// TestInspectorCLI drives the adapter with the MCP inspector's CLI mode.
func TestInspectorCLI(t *testing.T) {
	for _, transport := range []string{adapterconfig.TransportStreamableHTTP, adapterconfig.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			ctx := testkit.Context(t, testTimeout)
			url := startAdapter(t, ctx, configOptions{transport: transport, stateless: true})

			var list struct {
				Tools []peers.Tool `json:"tools"`
			}
			out := peers.InspectorList(t, ctx, url)
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				t.Fatalf("tools/list output is not JSON: %v\n%s", err, out)
			}
			assertToolsAsConfigured(t, list.Tools)

			call := func(args map[string]string) peers.CallToolResult {
				t.Helper()
				out := peers.InspectorCall(t, ctx, url, "greet", args)
				var res peers.CallToolResult
				if err := json.Unmarshal([]byte(out), &res); err != nil {
					t.Fatalf("tools/call output is not JSON: %v\n%s", err, out)
				}
				return res
			}
			// --tool-arg values are parsed as JSON: times=3 is a number, name=Ada a string.
			if res := call(map[string]string{"name": "Ada", "times": "3"}); res.IsError || res.Text() != "Hello, Ada! (3x)" {
				t.Errorf("greet = %+v, want %q", res, "Hello, Ada! (3x)")
			}
			// The CLI exits 0 for an isError result; the result says what is wrong.
			if res := call(map[string]string{"name": "Ada", "times": "9"}); !res.IsError || !strings.Contains(res.Text(), "/times") {
				t.Errorf("greet with times above the maximum = %+v, want isError naming /times", res)
			}
		})
	}
}

// TestBearerToken checks that a configured token is required, by a real client.
func TestBearerToken(t *testing.T) {
	ctx := testkit.Context(t, testTimeout)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-e2e-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := startAdapter(t, ctx, configOptions{transport: adapterconfig.TransportStreamableHTTP, stateless: true, bearerTokenFile: tokenFile})

	for name, headers := range map[string]map[string]string{
		"no token":    nil,
		"wrong token": {"Authorization": "Bearer nope"},
	} {
		_, err := peers.TryTSClient(t, ctx, peers.TSClientOptions{URL: url, Headers: headers})
		if err == nil {
			t.Errorf("%s: the client connected, want the handshake refused", name)
		} else if !strings.Contains(err.Error(), "401") {
			t.Errorf("%s: error = %v, want an HTTP 401", name, err)
		}
	}
	out := peers.TSClient(t, ctx, peers.TSClientOptions{
		URL: url, Headers: map[string]string{"Authorization": "Bearer s3cret-e2e-token"},
		Call: "greet", Args: map[string]any{"name": "Ada"},
	})
	if got := out.Result.Text(); got != "Hello, Ada! (1x)" {
		t.Errorf("greet with the token = %q", got)
	}
	list := peers.Inspector(t, ctx, url, "--method", "tools/list", "--header", "Authorization: Bearer s3cret-e2e-token")
	if !strings.Contains(list, `"greet"`) {
		t.Errorf("inspector tools/list with the token printed:\n%s", list)
	}
}

// TestAdapterStopsCleanly checks the binary's side of the shutdown contract: after
// serving a call, SIGTERM makes it exit 0 well within the shutdown grace.
func TestAdapterStopsCleanly(t *testing.T) {
	for _, transport := range []string{adapterconfig.TransportStreamableHTTP, adapterconfig.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			ctx := testkit.Context(t, testTimeout)
			srv := peers.StartAdapterServer(t, ctx, writeConfig(t, configOptions{transport: transport, stateless: true}))
			path := adapterconfig.PathMCP
			if transport == adapterconfig.TransportSSE {
				path = adapterconfig.PathSSE
			}
			peers.TSClient(t, ctx, peers.TSClientOptions{URL: srv.BaseURL + path, Transport: transport, Call: "greet", Args: map[string]any{"name": "Ada"}})
			res := srv.Stop()
			if res.Killed || res.ExitCode != 0 {
				t.Errorf("after SIGTERM: exit code %d, killed %v, took %s; want a clean exit\n%s", res.ExitCode, res.Killed, res.Took, srv.Logs())
			}
		})
	}
}
