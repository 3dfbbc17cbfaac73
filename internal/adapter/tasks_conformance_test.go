package adapter

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/peers"
	"github.com/cantus-dev/cantus-operator/test/testenv/taskremote"
)

// tasksScenarios are the server scenarios of @modelcontextprotocol/conformance
// (0.2.0-alpha.12) of the Tasks extension.
var tasksScenarios = []string{
	"tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
	"tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-status-notifications",
	"tasks-required-task-error", "tasks-mrtr-composition",
}

// suiteSkips are the checks the suite itself reports SKIPPED, with why.
var suiteSkips = map[string]string{
	"tasks-status-notifications": "the suite skips it pending a rewrite on subscriptions/listen (0.2.0-alpha.12)",
}

// conformanceTaskTools re-export every tool of the task fixture under its own name,
// relaying elicitation (the asking tools need it).
func conformanceTaskTools(url string) []adapterconfig.Tool {
	var tools []adapterconfig.Tool
	for _, name := range append(taskremote.ConformanceTools(), taskremote.ToolJob) {
		tool := remoteTool(name, objectSchema, url, adapterconfig.TransportStreamableHTTP, name)
		tool.Remote.Eras = []string{adapterconfig.EraModern}
		tool.Remote.Extensions = []string{adapterconfig.ExtensionTasks}
		tool.Remote.Relay = []string{adapterconfig.RelayElicitation}
		tools = append(tools, tool)
	}
	return tools
}

// checkStatuses are the statuses of checks by ID and name (an ID may name several).
func checkStatuses(checks []peers.Check) map[string][]string {
	out := map[string][]string{}
	for _, c := range checks {
		key := c.ID + " (" + c.Name + ")"
		out[key] = append(out[key], c.Status)
	}
	for _, statuses := range out {
		slices.Sort(statuses)
	}
	return out
}

// The conformance suite's tasks-* scenarios pass against the task fixture directly
// (every check but the one the suite skips itself) and end the same through a
// stateless and a stateful gateway that re-export it: no check differs in its status.
func TestTasksConformance_ScenariosPassDirectlyAndThroughTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance suite on Node")
	}
	remote := taskremote.Start(t)
	gateways := map[string]string{
		"stateless": serve(t, configWith(adapterconfig.TransportStreamableHTTP, true, conformanceTaskTools(remote.URL)...)).baseURL,
		"stateful":  serve(t, configWith(adapterconfig.TransportStreamableHTTP, false, conformanceTaskTools(remote.URL)...)).baseURL,
	}
	for _, scenario := range tasksScenarios {
		ctx := testkit.Context(t, 3*time.Minute)
		direct := peers.RunConformance(t, ctx, remote.URL, scenario)
		want := checkStatuses(direct)
		t.Logf("%s directly: %s", scenario, summary(direct))
		for _, c := range direct {
			if c.Status != "SUCCESS" && (c.Status != "SKIPPED" || suiteSkips[c.ID] == "") {
				t.Errorf("%s directly: %s %s: %s", scenario, c.Status, c.ID, c.ErrorMessage)
			}
		}
		for _, name := range []string{"stateless", "stateful"} {
			through := peers.RunConformance(t, ctx, gateways[name]+adapterconfig.PathMCP, scenario)
			got := checkStatuses(through)
			var differ []string
			for key, statuses := range want {
				if !slices.Equal(got[key], statuses) {
					differ = append(differ, fmt.Sprintf("%s: directly %v, through the gateway %v", key, statuses, got[key]))
				}
			}
			for key, statuses := range got {
				if _, ok := want[key]; !ok {
					differ = append(differ, fmt.Sprintf("%s: only through the gateway, %v", key, statuses))
				}
			}
			slices.Sort(differ)
			if len(differ) > 0 {
				t.Errorf("%s through the %s gateway (%s) differs from directly (%s):\n%s", scenario, name, summary(through), summary(direct),
					strings.Join(differ, "\n"))
				for _, c := range through {
					if c.Status != "SUCCESS" {
						t.Logf("  %s %s: %s", c.Status, c.ID, c.ErrorMessage)
					}
				}
			}
		}
	}
}

// summary counts checks by status.
func summary(checks []peers.Check) string {
	counts := map[string]int{}
	for _, c := range checks {
		counts[c.Status]++
	}
	var parts []string
	for _, status := range slices.Sorted(func(yield func(string) bool) {
		for s := range counts {
			if !yield(s) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[status], status))
	}
	return strings.Join(parts, ", ")
}
