package e2e

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapter"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// conformanceScenarios are the server scenarios of @modelcontextprotocol/conformance
// that apply to a skill server. The others are listed, with the reason, in
// conformance-not-applicable.md.
//
// Session mode, found by reading the scenarios (conformance 0.1.16):
//   - dns-rebinding-protection POSTs a bare initialize with Host/Origin evil.example.com
//     (must get a 4xx) and with the server's own host (must get a 2xx); it needs no
//     session. mcp-go applies its Host check in both modes, so it runs against both.
//   - server-sse-multiple-streams needs an Mcp-Session-Id: without one the suite
//     records a single WARNING ("Server did not provide session ID") and nothing else.
//     It therefore runs against the stateful adapter only.
var conformanceScenarios = []struct {
	name          string
	statelessToo  bool
	allowInfoFrom []string // check IDs the suite may report as INFO (optional behaviour)
}{
	{name: "server-initialize", statelessToo: true},
	{name: "ping", statelessToo: true},
	{name: "tools-list", statelessToo: true},
	{name: "logging-set-level", statelessToo: true},
	{name: "tools-call-simple-text", statelessToo: true},
	{name: "tools-call-error", statelessToo: true},
	{name: "json-schema-2020-12", statelessToo: true},
	{name: "dns-rebinding-protection", statelessToo: true},
	// INFO here means "every POST was answered with JSON, SSE streams are optional"
	// (SEP-1699); the suite's own summary counts it as passed.
	{name: "server-sse-multiple-streams", allowInfoFrom: []string{"server-sse-streams-functional"}},
}

// TestConformance runs the MCP conformance suite's server scenarios against the adapter
// in both session modes, and requires at least one check per scenario, all SUCCESS.
func TestConformance(t *testing.T) {
	ctx := testContext(t, conformanceTimeout)
	for _, mode := range []struct {
		name      string
		stateless bool
	}{{"stateless", true}, {"stateful", false}} {
		t.Run(mode.name, func(t *testing.T) {
			url := startAdapter(t, ctx, configOptions{transport: adapter.TransportStreamableHTTP, stateless: mode.stateless})
			for _, sc := range conformanceScenarios {
				if mode.stateless && !sc.statelessToo {
					continue
				}
				t.Run(sc.name, func(t *testing.T) {
					checks := peers.RunConformance(t, ctx, url, sc.name)
					for _, c := range checks {
						if c.Status == peers.CheckInfo {
							t.Logf("INFO %s: %s", c.ID, c.Description)
						}
					}
					peers.RequireChecksPassed(t, sc.name, checks, sc.allowInfoFrom...)
				})
			}
		})
	}
}

// TestConformanceScenariosAccountedFor keeps conformance-not-applicable.md honest: every
// server scenario of the pinned suite is either run above or listed there, and nothing
// is both.
func TestConformanceScenariosAccountedFor(t *testing.T) {
	ctx := testContext(t, testTimeout)
	doc, err := os.ReadFile("conformance-not-applicable.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		listed[m[1]] = true
	}
	run := map[string]bool{}
	for _, sc := range conformanceScenarios {
		run[sc.name] = true
	}
	suite := peers.ConformanceScenarios(t, ctx, false)
	for _, name := range suite {
		switch {
		case run[name] && listed[name]:
			t.Errorf("scenario %s is run by TestConformance and also listed as not applicable", name)
		case !run[name] && !listed[name]:
			t.Errorf("scenario %s of the suite is neither run nor listed in conformance-not-applicable.md", name)
		}
	}
	for name := range listed {
		if !slices.Contains(suite, name) {
			t.Errorf("conformance-not-applicable.md lists %s, which the pinned suite does not have (suite: %s)", name, strings.Join(suite, ", "))
		}
	}
}
