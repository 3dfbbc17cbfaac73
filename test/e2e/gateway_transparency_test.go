package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/peers"
	"github.com/cantus-dev/cantus-operator/test/testenv/conformanceremote"
)

// Where TestGatewayTransparency runs each scenario.
const (
	targetDirect    = "direct"
	targetStateful  = "stateful"
	targetStateless = "stateless"
)

// statelessMayRefuse are the scenarios issue 37 lets a stateless gateway refuse that it
// does refuse, and why; a list of check IDs limits the leave to those checks of the
// scenario. Its server requests to a 2025-11-25 caller (sampling, elicitation) it
// passes: with one replica it takes the caller's answer to the call that asked.
var statelessMayRefuse = map[string]struct {
	why    string
	checks []string
}{
	"resources-subscribe":         {why: "a 2025-11-25 subscription lives on the caller's session (2026-07-28 callers use subscriptions/listen)"},
	"resources-unsubscribe":       {why: "a 2025-11-25 subscription lives on the caller's session"},
	"server-session-lifecycle":    {why: "it checks the session a stateless gateway does not keep"},
	"server-sse-polling":          {why: "resuming a stream by Last-Event-ID needs the session the events were stored under"},
	"server-sse-multiple-streams": {why: "several streams of one session need a session"},
	"server-initialize":           {why: "a stateless gateway gives no session ID to check", checks: []string{"server-session-id-visible-ascii"}},
}

// fixtureGaps are the scenarios the conformance fixture does not pass directly, and
// why. The test fails when one of them starts passing (so the list stays true), and
// still requires every check that passes directly to pass through the gateways.
var fixtureGaps = map[string]string{
	"tasks-status-notifications":  "the scenario records only a SKIPPED check, against any server",
	"sep-2640-skills-directory":   gapNoSkills,
	"sep-2640-skills-enumeration": gapNoSkills,
	"sep-2640-skills-manifest":    gapNoSkills,
}

// gapNoSkills: the Agent Skills extension is beyond what the fixture serves; the
// gateway's re-export of skills is tested against the project's own SkillServer.
const gapNoSkills = "the fixture serves no Agent Skills (SEP-2640 extension), so every check but the wire schema's is SKIPPED"

// gatewayGap is a scenario a gateway fails today although it passes directly: what
// the gateway does wrong, per kind of gateway ("" where that gateway passes).
type gatewayGap struct{ stateful, stateless string }

// knownGaps are today's real gateway failures, each with its diagnosis. They are
// logged, not failed; a gap that closes fails the test until it is taken off the list.
var knownGaps = map[string]gatewayGap{}

// TestGatewayTransparency runs every server scenario of the conformance suite against
// the project's dual-era conformance fixture directly, then through a stateful and a
// stateless gateway that import it as the operator does (names unchanged, relay of
// elicitation, sampling and roots). A scenario that passes directly must pass through
// each gateway, warnings included, except the refusals issue 37 allows a stateless
// gateway and the known gaps, each named with its diagnosis.
func TestGatewayTransparency(t *testing.T) {
	ctx := testkit.Context(t, conformanceTimeout)
	started := time.Now()
	remote := conformanceremote.Start(t)
	imported := importAsTheOperatorDoes(t, ctx, remote.URL)
	targets := map[string]string{
		targetDirect:    remote.URL,
		targetStateful:  startTransparentGateway(t, ctx, false, imported),
		targetStateless: startTransparentGateway(t, ctx, true, imported),
	}
	scenarios := peers.ConformanceScenarios(t, ctx, false)
	results := runEverywhere(t, ctx, scenarios, targets)
	t.Logf("%d scenarios × %d targets in %s", len(scenarios), len(targets), time.Since(started).Round(time.Second))

	for _, scenario := range scenarios {
		t.Run(scenario, func(t *testing.T) {
			judgeTransparency(t, scenario, results[scenario])
		})
	}
	t.Log("\n" + transparencyTable(scenarios, results))
}

// outcome is what one run of a scenario against one target left.
type outcome struct {
	checks []peers.Check
	err    error
}

// summary lists the checks as ID=STATUS, for the log.
func (o outcome) summary() string {
	parts := make([]string, 0, len(o.checks))
	for _, c := range o.checks {
		parts = append(parts, c.ID+"="+c.Status)
	}
	return strings.Join(parts, " ")
}

// wireSchemaCheck is the check the suite adds to every scenario: the messages it saw
// were valid, which says nothing of what the scenario tests.
const wireSchemaCheck = "wire-schema-valid"

// passes says the scenario passed: a check of its own succeeded and none failed or
// warned (a run of INFO and SKIPPED checks only tested nothing).
func (o outcome) passes() bool {
	if o.err != nil {
		return false
	}
	return slices.ContainsFunc(o.checks, func(c peers.Check) bool { return c.Status == peers.CheckSuccess && c.ID != wireSchemaCheck }) &&
		!slices.ContainsFunc(o.checks, func(c peers.Check) bool {
			return c.Status == peers.CheckFailure || c.Status == peers.CheckWarning
		})
}

// lost are the checks that pass in direct and do not pass in o, except those in
// excused: the checks a gateway loses.
func (o outcome) lost(direct outcome, excused []string) []string {
	passed := map[string]int{}
	for _, c := range o.checks {
		if c.Status == peers.CheckSuccess {
			passed[c.ID]++
		}
	}
	var lost []string
	for _, c := range direct.checks {
		if c.Status != peers.CheckSuccess || slices.Contains(excused, c.ID) {
			continue
		}
		if passed[c.ID] > 0 {
			passed[c.ID]--
			continue
		}
		lost = append(lost, o.describe(c.ID))
	}
	if direct.passes() && len(lost) == 0 {
		// Same checks passed, and nothing new failed or warned.
		for _, c := range o.checks {
			if (c.Status == peers.CheckFailure || c.Status == peers.CheckWarning) && !slices.Contains(excused, c.ID) {
				lost = append(lost, c.String())
			}
		}
	}
	if o.err != nil {
		lost = append(lost, o.err.Error())
	}
	return lost
}

// describe says what o recorded for the check id.
func (o outcome) describe(id string) string {
	for _, c := range o.checks {
		if c.ID == id {
			return c.String()
		}
	}
	return "MISSING [" + id + "]"
}

// judgeTransparency fails the test for a scenario that passes directly and not
// through a gateway, unless issue 37 allows it or it is a known gap; and for a known
// gap or fixture gap that no longer is one.
func judgeTransparency(t *testing.T, scenario string, runs map[string]outcome) {
	direct := runs[targetDirect]
	for _, target := range []string{targetDirect, targetStateful, targetStateless} {
		t.Logf("%s %s", target, runs[target].summary())
	}
	why, isFixtureGap := fixtureGaps[scenario]
	switch {
	case direct.err != nil:
		t.Errorf("directly: %v", direct.err)
	case !direct.passes() && !isFixtureGap:
		t.Errorf("the fixture fails the scenario directly:\n  %s", strings.Join(problems(direct), "\n  "))
	case !direct.passes():
		t.Logf("fixture gap (%s):\n  %s", why, strings.Join(problems(direct), "\n  "))
	case isFixtureGap:
		t.Errorf("the fixture now passes the scenario directly: take it off fixtureGaps (%s)", why)
	}
	gap := knownGaps[scenario]
	for _, target := range []string{targetStateful, targetStateless} {
		var excused []string
		refusal, mayRefuse := statelessMayRefuse[scenario]
		if target == targetStateless && mayRefuse && len(refusal.checks) > 0 {
			excused, mayRefuse = refusal.checks, false
		}
		lost := runs[target].lost(direct, excused)
		diagnosis := gap.stateful
		if target == targetStateless {
			diagnosis = gap.stateless
		}
		switch {
		case len(lost) == 0 && diagnosis != "":
			t.Errorf("%s: the known gap is closed, take it off knownGaps: %s", target, diagnosis)
		case len(lost) == 0:
		case target == targetStateless && mayRefuse:
			t.Logf("%s may refuse it (%s); lost:\n  %s", target, refusal.why, strings.Join(lost, "\n  "))
		case diagnosis != "":
			t.Logf("%s: known gap: %s; lost:\n  %s", target, diagnosis, strings.Join(lost, "\n  "))
		default:
			t.Errorf("%s: passes directly but not through the gateway; lost:\n  %s", target, strings.Join(lost, "\n  "))
		}
	}
}

// problems are the checks of o that did not pass.
func problems(o outcome) []string {
	if o.err != nil {
		return []string{o.err.Error()}
	}
	if len(o.checks) == 0 {
		return []string{"no checks recorded"}
	}
	var out []string
	for _, c := range o.checks {
		if c.Status == peers.CheckFailure || c.Status == peers.CheckWarning {
			out = append(out, c.String())
		}
	}
	return out
}

// runEverywhere runs the whole suite against every target at once (one process per
// target: a process per scenario costs minutes of CPU) and returns the outcomes by
// scenario and target.
func runEverywhere(t *testing.T, ctx context.Context, scenarios []string, targets map[string]string) map[string]map[string]outcome {
	t.Helper()
	runner := peers.NewConformanceRunner(t)
	type suiteRun struct {
		target string
		checks map[string][]peers.Check
		err    error
		took   time.Duration
	}
	runs := make(chan suiteRun, len(targets))
	for target, url := range targets {
		go func() {
			began := time.Now()
			checks, err := runner.RunSuite(ctx, url)
			runs <- suiteRun{target: target, checks: checks, err: err, took: time.Since(began)}
		}()
	}
	results := map[string]map[string]outcome{}
	for _, scenario := range scenarios {
		results[scenario] = map[string]outcome{}
	}
	for range targets {
		run := <-runs
		t.Logf("the suite against %s took %s", run.target, run.took.Round(100*time.Millisecond))
		for _, scenario := range scenarios {
			o := outcome{checks: run.checks[scenario], err: run.err}
			if run.err == nil && o.checks == nil {
				o.err = fmt.Errorf("the suite left no checks for %s", scenario)
			}
			results[scenario][run.target] = o
		}
	}
	return results
}

// transparencyTable is the scenario × target summary: pass, or the failed and warned
// checks, and the totals.
func transparencyTable(scenarios []string, results map[string]map[string]outcome) string {
	order := []string{targetDirect, targetStateful, targetStateless}
	var b strings.Builder
	fmt.Fprintf(&b, "%-46s %-10s %-10s %-10s\n", "scenario", order[0], order[1], order[2])
	passed := map[string]int{}
	for _, scenario := range scenarios {
		fmt.Fprintf(&b, "%-46s", scenario)
		for _, target := range order {
			o := results[scenario][target]
			cell := "pass"
			if o.passes() {
				passed[target]++
			} else {
				cell = cellOf(o)
			}
			fmt.Fprintf(&b, " %-10s", cell)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%-46s", fmt.Sprintf("passed (of %d)", len(scenarios)))
	for _, target := range order {
		fmt.Fprintf(&b, " %-10d", passed[target])
	}
	return b.String()
}

// cellOf says how a run that did not pass went: F failures, W warnings, of N checks;
// "untested" when it recorded only INFO and SKIPPED checks.
func cellOf(o outcome) string {
	if o.err != nil {
		return "error"
	}
	counts := map[string]int{}
	for _, c := range o.checks {
		counts[c.Status]++
	}
	if !o.passes() && counts[peers.CheckFailure]+counts[peers.CheckWarning] == 0 {
		return "untested"
	}
	return fmt.Sprintf("%dF%dW/%d", counts[peers.CheckFailure], counts[peers.CheckWarning], len(o.checks))
}

// importAsTheOperatorDoes probes the remote with the operator's handshake
// (mcpclient.Probe, declaring what a gateway can relay) and returns the gateway config
// the operator renders for an import of it with names unchanged and relay of
// elicitation, sampling and roots: the union of the tools the remote lists in each era
// (internal/controller/remotetoolimport_eras.go), each with the eras it is listed in
// and its definition of 2026-07-28 where that differs, the Tasks extension where the
// remote announced it, and its prompts, resources and templates, each served as the
// remote defined it (internal/render: reexport, remoteBackend, toolEras,
// reexportContent).
func importAsTheOperatorDoes(t *testing.T, ctx context.Context, url string) transparentImport {
	t.Helper()
	res, err := mcpclient.Probe(ctx, mcpclient.Options{URL: url, Capabilities: mcpclient.RelayableCapabilities(), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("probing the fixture: %v", err)
	}
	backend := remoteSpec{Import: "e2e/conformance", URL: url, Transport: peers.TransportStreamableHTTP, Timeout: "30s",
		Relay: []string{adapterconfig.RelayElicitation, adapterconfig.RelayRoots, adapterconfig.RelaySampling}, Eras: res.Eras, RemoteEras: res.Eras,
		// As render sets it for an import whose changes are not held for approval.
		ListChanges: true}
	if res.Serves(mcpclient.EraModern) && slices.Contains(slices.Concat(res.Extensions, res.ModernExtensions), adapterconfig.ExtensionTasks) {
		backend.Extensions = []string{adapterconfig.ExtensionTasks}
	}
	var imp transparentImport
	for _, tool := range toolsOfEveryEra(res) {
		b := backend
		b.RemoteName = tool.Name
		b.Definition = withoutMember(t, tool.Raw, "name")
		b.Eras, b.ModernDefinition = tool.eras, nil
		if tool.modern != nil {
			b.ModernDefinition = withoutMember(t, tool.modern.Raw, "name")
		}
		schema := tool.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		imp.tools = append(imp.tools, gatewayTool{Name: tool.Name, Description: tool.Description, InputSchema: schema, Remote: &b})
	}
	readable := backend
	readable.Subscribe = slices.Contains(res.Capabilities, "resources.subscribe")
	item := func(key string, def json.RawMessage, r remoteSpec) map[string]any {
		return map[string]any{"key": key, "definition": def, "remote": r}
	}
	var prompts, resources, templates []any
	for _, e := range contentOfEveryEra(t, res, func(c *mcpclient.Content) []json.RawMessage { return c.Prompts }, "name") {
		b := backend
		b.RemoteName, b.Eras = e.key, e.eras
		prompts = append(prompts, item(e.key, e.def, b))
	}
	for _, e := range contentOfEveryEra(t, res, func(c *mcpclient.Content) []json.RawMessage { return c.Resources }, "uri") {
		r := readable
		r.Eras = e.eras
		resources = append(resources, item(e.key, e.def, r))
	}
	for _, e := range contentOfEveryEra(t, res, func(c *mcpclient.Content) []json.RawMessage { return c.ResourceTemplates }, "uriTemplate") {
		r := readable
		r.Eras = e.eras
		templates = append(templates, item(e.key, e.def, r))
	}
	imp.content = map[string]any{"imported": map[string]any{"prompts": prompts, "resources": resources, "resourceTemplates": templates}}
	t.Logf("imported %d tools, %d prompts, %d resources, %d templates; eras %v; extensions %v; capabilities %v",
		len(imp.tools), len(prompts), len(resources), len(templates), res.Eras, backend.Extensions, res.Capabilities)
	return imp
}

// eraTool is a tool of the union of the eras' listings: its main definition (that of
// 2025-11-25 where it has one), the eras it is listed in, and its definition of
// 2026-07-28 where that differs.
type eraTool struct {
	mcpclient.Tool
	eras   []string
	modern *mcpclient.Tool
}

// toolsOfEveryEra merges the listings of each era by name, as the controller does:
// those of 2025-11-25 in their order, then those listed only in 2026-07-28.
func toolsOfEveryEra(res *mcpclient.Result) []eraTool {
	inModern := map[string]mcpclient.Tool{}
	for _, tool := range res.ModernTools {
		inModern[tool.Name] = tool
	}
	var out []eraTool
	seen := map[string]bool{}
	for _, tool := range res.Tools {
		et := eraTool{Tool: tool, eras: []string{mcpclient.EraLegacy}}
		if m, ok := inModern[tool.Name]; ok {
			et.eras = []string{mcpclient.EraModern, mcpclient.EraLegacy}
			if m.Digest() != tool.Digest() {
				et.modern = &m
			}
		}
		seen[tool.Name] = true
		out = append(out, et)
	}
	for _, tool := range res.ModernTools {
		if !seen[tool.Name] {
			out = append(out, eraTool{Tool: tool, eras: []string{mcpclient.EraModern}})
		}
	}
	if len(res.Eras) < 2 {
		for i := range out {
			out[i].eras = res.Eras
		}
	}
	return out
}

// eraEntry is a content entry of the union of the eras' listings: its key, its
// definition (that of 2025-11-25 where it has one) and the eras it is listed in.
type eraEntry struct {
	key  string
	def  json.RawMessage
	eras []string
}

// contentOfEveryEra merges the listings of one kind (of) of each era by key, as the
// controller does: those of 2025-11-25 in their order, then those listed only in
// 2026-07-28; with the remote's eras for every entry when it serves one.
func contentOfEveryEra(t *testing.T, res *mcpclient.Result, of func(*mcpclient.Content) []json.RawMessage, key string) []eraEntry {
	t.Helper()
	var out []eraEntry
	if res.ModernContent == nil || len(res.Eras) < 2 {
		for _, def := range of(&res.Content) {
			out = append(out, eraEntry{key: member(t, def, key), def: def, eras: res.Eras})
		}
		return out
	}
	inModern := map[string]bool{}
	for _, def := range of(res.ModernContent) {
		inModern[member(t, def, key)] = true
	}
	seen := map[string]bool{}
	for _, def := range of(&res.Content) {
		e := eraEntry{key: member(t, def, key), def: def, eras: []string{mcpclient.EraLegacy}}
		if inModern[e.key] {
			e.eras = mcpclient.Eras()
		}
		seen[e.key] = true
		out = append(out, e)
	}
	for _, def := range of(res.ModernContent) {
		if k := member(t, def, key); !seen[k] {
			out = append(out, eraEntry{key: k, def: def, eras: []string{mcpclient.EraModern}})
		}
	}
	return out
}

// transparentImport is the gateway config of one import: its tools and content.
type transparentImport struct {
	tools   []gatewayTool
	content map[string]any
}

func startTransparentGateway(t *testing.T, ctx context.Context, stateless bool, imp transparentImport) string {
	t.Helper()
	return startAskingGateway(t, ctx, stateless, imp.tools, imp.content)
}

// member is the string member name of the JSON object def.
func member(t *testing.T, def json.RawMessage, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	var s string
	if json.Unmarshal(def, &m) != nil || json.Unmarshal(m[name], &s) != nil {
		t.Fatalf("the listed entry %s has no string %q", def, name)
	}
	return s
}

// withoutMember is the JSON object def without its member name.
func withoutMember(t *testing.T, def json.RawMessage, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(def, &m); err != nil {
		t.Fatalf("the listed entry %s is not an object: %v", def, err)
	}
	delete(m, name)
	out, _ := json.Marshal(m)
	return out
}
