package e2e

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
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
//
// The adapters serve testdata/conformance-content.json besides their tools: the skill,
// resources, resource template and prompts the resources-*, prompts-* and sep-2640-*
// scenarios look for. Scenarios of protocol 2026-07-28 (statelessOnly) have no sessions.
var conformanceScenarios = []struct {
	name          string
	statelessToo  bool
	statelessOnly bool
	allowInfoFrom []string // check IDs the suite may report as INFO (optional behaviour)
	// notApplicable are checks that cannot apply to a declarative server, with why;
	// whatever their status, they are not counted.
	notApplicable map[string]string
}{
	// INFO: a stateless server gives no session ID, so there is none to check for visible ASCII.
	{name: "server-initialize", statelessToo: true, allowInfoFrom: []string{"server-session-id-visible-ascii"}},
	{name: "ping", statelessToo: true},
	{name: "tools-list", statelessToo: true},
	{name: "logging-set-level", statelessToo: true},
	{name: "tools-call-simple-text", statelessToo: true},
	{name: "tools-call-error", statelessToo: true},
	{name: "json-schema-2020-12", statelessToo: true, notApplicable: map[string]string{
		"sep-2106-composition-keywords-preserved": "SEP-2106 applies from 2026-07-28; the suite runs this scenario at 2025-11-25 and reports SKIPPED",
		"sep-2106-conditional-keywords-preserved": "SEP-2106 applies from 2026-07-28; the suite runs this scenario at 2025-11-25 and reports SKIPPED",
		"sep-2106-anchor-keyword-preserved":       "SEP-2106 applies from 2026-07-28; the suite runs this scenario at 2025-11-25 and reports SKIPPED",
	}},
	{name: "dns-rebinding-protection", statelessToo: true},
	// INFO here means "every POST was answered with JSON, SSE streams are optional"
	// (SEP-1699); the suite's own summary counts it as passed.
	{name: "server-sse-multiple-streams", allowInfoFrom: []string{"server-sse-streams-functional"}},
	// Initialize, use, DELETE, then a request on the ended session must get 404: the
	// adapter remembers the sessions terminated on it (sessions.go).
	{name: "server-session-lifecycle"},
	{name: "resources-list", statelessToo: true},
	{name: "resources-read-text", statelessToo: true},
	{name: "resources-read-binary", statelessToo: true},
	{name: "resources-templates-read", statelessToo: true},
	{name: "prompts-list", statelessToo: true},
	{name: "prompts-get-simple", statelessToo: true},
	{name: "prompts-get-with-args", statelessToo: true},
	{name: "prompts-get-embedded-resource", statelessToo: true},
	{name: "prompts-get-with-image", statelessToo: true},
	{name: "sep-2164-resource-not-found", statelessOnly: true},
	{name: "caching", statelessOnly: true},
	{name: "http-header-validation", statelessOnly: true},
	{name: "sep-2640-skills-enumeration", statelessOnly: true},
	{name: "sep-2640-skills-manifest", statelessOnly: true},
	{name: "sep-2640-skills-directory", statelessOnly: true},
	{name: "server-stateless", statelessOnly: true, notApplicable: serverStatelessDiagnostics},
}

// serverStatelessDiagnostics are the server-stateless checks that call the suite's own
// diagnostic tools, which a declarative skill server does not have.
var serverStatelessDiagnostics = map[string]string{
	"sep-2575-server-rejects-undeclared-capability":              "calls the suite's diagnostic tool test_missing_capability",
	"sep-2575-missing-capability-http-400":                       "calls the suite's diagnostic tool test_missing_capability",
	"sep-2575-http-server-no-independent-requests-on-stream":     "calls the suite's diagnostic tool test_streaming_elicitation",
	"sep-2575-server-no-log-without-loglevel":                    "calls the suite's diagnostic tool test_logging_tool",
	"sep-2575-server-sends-prompts-list-changed-on-subscription": "changes the prompt list through the suite's diagnostic tool test_trigger_prompt_change; a declarative server's lists change by a config reload (tested in internal/adapter)",
	"sep-2575-server-sends-tools-list-changed-on-subscription":   "changes the tool list through a diagnostic tool of the suite; a declarative server's lists change by a config reload (tested in internal/adapter)",
}

// TestConformance runs the MCP conformance suite's server scenarios against the adapter
// in both session modes, and requires at least one check per scenario, all SUCCESS.
func TestConformance(t *testing.T) {
	ctx := testkit.Context(t, conformanceTimeout)
	for _, mode := range []struct {
		name      string
		stateless bool
	}{{"stateless", true}, {"stateful", false}} {
		t.Run(mode.name, func(t *testing.T) {
			url := startAdapter(t, ctx, configOptions{transport: adapterconfig.TransportStreamableHTTP, stateless: mode.stateless, content: true})
			for _, sc := range conformanceScenarios {
				if (mode.stateless && !sc.statelessToo && !sc.statelessOnly) || (!mode.stateless && sc.statelessOnly) {
					continue
				}
				t.Run(sc.name, func(t *testing.T) {
					checks := peers.RunConformance(t, ctx, url, sc.name)
					for _, c := range checks {
						if c.Status == peers.CheckInfo {
							t.Logf("INFO %s: %s", c.ID, c.Description)
						}
					}
					var counted []peers.Check
					for _, c := range checks {
						if why, ok := sc.notApplicable[c.ID]; ok {
							t.Logf("not applicable %s (%s): %s", c.ID, c.Status, why)
							continue
						}
						counted = append(counted, c)
					}
					peers.RequireChecksPassed(t, sc.name, counted, sc.allowInfoFrom...)
				})
			}
		})
	}
}

// TestConformanceScenariosAccountedFor keeps conformance-not-applicable.md honest: every
// server scenario of the pinned suite is either run above or listed there, and nothing
// is both.
func TestConformanceScenariosAccountedFor(t *testing.T) {
	ctx := testkit.Context(t, testTimeout)
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
