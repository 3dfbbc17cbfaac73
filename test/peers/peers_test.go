package peers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// These tests check the wrappers themselves against the MCP project's reference server,
// so that a failure in test/e2e points at the adapter, not at the harness.

func TestParseListeningLine(t *testing.T) {
	for line, want := range map[string]string{
		"listening on http://127.0.0.1:43817":     "http://127.0.0.1:43817",
		"listening on http://127.0.0.1:43817/\r":  "http://127.0.0.1:43817",
		"  listening on http://[::1]:80 ":         "http://[::1]:80",
		"listening on http://127.0.0.1:0":         "",
		"listening on 127.0.0.1:8080":             "",
		"starting, will be listening on http://x": "",
		`{"level":"info","msg":"listening"}`:      "",
	} {
		if got := parseListeningLine(line); got != want {
			t.Errorf("parseListeningLine(%q) = %q, want %q", line, got, want)
		}
	}
}

func TestCheckProblems(t *testing.T) {
	ok := Check{ID: "a", Status: CheckSuccess}
	info := Check{ID: "b", Status: CheckInfo}
	warn := Check{ID: "c", Status: CheckWarning, ErrorMessage: "meh"}
	for _, tc := range []struct {
		name      string
		checks    []Check
		allowInfo []string
		want      int
	}{
		{"no checks is a failure", nil, nil, 1},
		{"all success", []Check{ok, ok}, nil, 0},
		{"info not allowed", []Check{ok, info}, nil, 1},
		{"info allowed by id", []Check{ok, info}, []string{"b"}, 0},
		{"warning never allowed", []Check{ok, warn}, []string{"c"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckProblems(tc.checks, tc.allowInfo...); len(got) != tc.want {
				t.Errorf("CheckProblems = %q, want %d problem(s)", got, tc.want)
			}
		})
	}
}

func TestPeersAgainstServerEverything(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	streamable := StartServerEverything(t, ctx, TransportStreamableHTTP) + "/mcp"
	sse := StartServerEverything(t, ctx, TransportSSE) + "/sse"

	for _, tc := range []struct{ transport, url string }{
		{TransportStreamableHTTP, streamable},
		{TransportSSE, sse},
	} {
		t.Run("ts-client/"+tc.transport, func(t *testing.T) {
			out := TSClient(t, ctx, TSClientOptions{
				URL: tc.url, Transport: tc.transport,
				Headers: map[string]string{"X-Cantus-Test": "1"},
				Call:    "echo", Args: map[string]any{"message": "hi there"},
			})
			if out.ServerInfo.Name == "" || out.ProtocolVersion == "" {
				t.Errorf("missing serverInfo or protocolVersion: %+v", out)
			}
			if !slices.Contains(out.ToolNames(), "echo") {
				t.Errorf("tools %v lack echo", out.ToolNames())
			}
			if out.Result == nil || out.Result.IsError || out.Result.Text() != "Echo: hi there" {
				t.Errorf("echo result = %+v", out.Result)
			}

			bad := TSClient(t, ctx, TSClientOptions{URL: tc.url, Transport: tc.transport, Call: "echo", Args: map[string]any{"message": 5}})
			if bad.Result == nil || !bad.Result.IsError || !strings.Contains(bad.Result.Text(), "message") {
				t.Errorf("invalid-args result = %+v, want isError naming message", bad.Result)
			}
		})
	}

	t.Run("ts-client/unreachable", func(t *testing.T) {
		_, err := TryTSClient(t, ctx, TSClientOptions{URL: "http://127.0.0.1:1/mcp", Timeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "connect failed") {
			t.Errorf("err = %v, want a connect failure", err)
		}
	})

	t.Run("inspector", func(t *testing.T) {
		var list struct{ Tools []Tool }
		if err := json.Unmarshal([]byte(InspectorList(t, ctx, streamable)), &list); err != nil || len(list.Tools) == 0 {
			t.Fatalf("tools/list: %v, %d tools", err, len(list.Tools))
		}
		var res CallToolResult
		out := InspectorCall(t, ctx, sse, "echo", map[string]string{"message": "hello"})
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Text() != "Echo: hello" {
			t.Errorf("tools/call: %v: %s", err, out)
		}
	})

	t.Run("conformance", func(t *testing.T) {
		checks := RunConformance(t, ctx, streamable, "server-initialize")
		RequireChecksPassed(t, "server-initialize", checks)

		// server-everything listens on all interfaces and does not check Host: the suite
		// must report that, which proves failures reach the caller.
		checks = RunConformance(t, ctx, streamable, "dns-rebinding-protection")
		if len(CheckProblems(checks)) == 0 {
			t.Errorf("dns-rebinding-protection passed against server-everything; expected a FAILURE check: %v", checks)
		}
	})

	t.Run("conformance-list", func(t *testing.T) {
		names := ConformanceScenarios(t, ctx, false)
		for _, want := range []string{"server-initialize", "tools-call-simple-text", "dns-rebinding-protection"} {
			if !slices.Contains(names, want) {
				t.Errorf("server scenarios %v lack %s", names, want)
			}
		}
	})
}
