package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Check statuses the conformance suite reports.
const (
	CheckSuccess = "SUCCESS"
	CheckFailure = "FAILURE"
	CheckWarning = "WARNING"
	CheckInfo    = "INFO"
)

// Check is one entry of a conformance run's checks.json.
type Check struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Status         string          `json:"status"`
	ErrorMessage   string          `json:"errorMessage,omitempty"`
	Timestamp      string          `json:"timestamp,omitempty"`
	Details        json.RawMessage `json:"details,omitempty"`
	SpecReferences []struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	} `json:"specReferences,omitempty"`
}

func (c Check) String() string {
	s := fmt.Sprintf("%s [%s] %s", c.Status, c.ID, c.Description)
	if c.ErrorMessage != "" {
		s += ": " + c.ErrorMessage
	}
	if len(c.Details) > 0 && c.Status != CheckSuccess {
		s += "\n    details: " + clip(string(c.Details))
	}
	return s
}

// RunConformance runs one server scenario of the MCP conformance suite
// (`conformance server --url URL --scenario X -o DIR`, on Node 22) and returns the
// checks it recorded in DIR/*/checks.json. The suite's own exit code and summary are
// not trusted (a run with zero checks is reported as passed): the caller asserts on the
// checks, e.g. with RequireChecksPassed. Only a run that leaves no checks.json fails
// the test here. The suite speaks streamable HTTP only.
func RunConformance(t testing.TB, ctx context.Context, url, scenario string) []Check {
	t.Helper()
	checks, err := NewConformanceRunner(t).Run(ctx, url, scenario)
	if err != nil {
		t.Fatalf("peers: %v", err)
	}
	return checks
}

// ConformanceRunner runs server scenarios of the conformance suite from any goroutine:
// what needs the test (installing the peers, temporary folders) is done when it is
// made, and Run reports by error instead of failing the test.
type ConformanceRunner struct {
	node, cli string
	dir       func() string
}

// NewConformanceRunner finds Node 22 and the suite, installing the peers if needed.
func NewConformanceRunner(t testing.TB) *ConformanceRunner {
	t.Helper()
	return &ConformanceRunner{node: Node22(t), cli: moduleFile(t, "@modelcontextprotocol/conformance", "dist", "index.js"), dir: t.TempDir}
}

// Run runs one server scenario against url, as RunConformance does, and returns its
// checks; the error says why a run left no checks.
func (c *ConformanceRunner) Run(ctx context.Context, url, scenario string) ([]Check, error) {
	out := c.dir()
	r := run(ctx, out, nil, c.node, c.cli, "server", "--url", url, "--scenario", scenario, "-o", out)
	checks, _, err := readChecksOf(out, fmt.Sprintf("conformance scenario %s against %s", scenario, url), r, "*")
	return checks, err
}

// RunSuite runs every server scenario of the suite (--suite all) against url in one
// process, which is far quicker than a process per scenario, and returns the checks of
// each scenario by its name.
func (c *ConformanceRunner) RunSuite(ctx context.Context, url string) (map[string][]Check, error) {
	out := c.dir()
	r := run(ctx, out, nil, c.node, c.cli, "server", "--url", url, "--suite", "all", "-o", out)
	dirs, _ := filepath.Glob(filepath.Join(out, "server-*"))
	if len(dirs) == 0 {
		return nil, fmt.Errorf("the conformance suite against %s left no scenario folders in %s:\n%s", url, out, r.describe())
	}
	byScenario := map[string][]Check{}
	for _, dir := range dirs {
		name := suiteScenarioName(filepath.Base(dir))
		checks, _, err := readChecksOf(filepath.Dir(dir), "conformance scenario "+name+" against "+url, r, filepath.Base(dir))
		if err != nil {
			return nil, err
		}
		byScenario[name] = append(byScenario[name], checks...)
	}
	return byScenario, nil
}

// suiteTimestamp ends the folder of each scenario a suite run writes:
// server-<scenario>-2026-12-06T18-49-59-189Z.
var suiteTimestamp = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// suiteScenarioName is the scenario a suite run's folder holds.
func suiteScenarioName(folder string) string {
	return suiteTimestamp.ReplaceAllString(strings.TrimPrefix(folder, "server-"), "")
}

// readChecks reads every checks.json a conformance run left under dir and returns the
// checks and the files they came from; a run that left none fails the test.
func readChecks(t testing.TB, dir, what string, r result) ([]Check, []string) {
	t.Helper()
	checks, files, err := readChecksOf(dir, what, r, "*")
	if err != nil {
		t.Fatalf("peers: %v", err)
	}
	return checks, files
}

// readChecksOf reads the checks.json of the folders of dir that match glob.
func readChecksOf(dir, what string, r result, glob string) ([]Check, []string, error) {
	files, _ := filepath.Glob(filepath.Join(dir, glob, "checks.json"))
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("%s left no checks.json in %s:\n%s", what, dir, r.describe())
	}
	sort.Strings(files)
	var checks []Check
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", what, err)
		}
		var cs []Check
		if err := json.Unmarshal(data, &cs); err != nil {
			return nil, nil, fmt.Errorf("%s: %s is not a JSON array of checks: %w", what, f, err)
		}
		checks = append(checks, cs...)
	}
	return checks, files, nil
}

// CheckProblems returns a line for every check that is not SUCCESS, except those whose
// ID is in allowInfo and whose status is INFO (the suite uses INFO for optional
// behaviour it merely notes). A run with no check at all is a problem too.
func CheckProblems(checks []Check, allowInfo ...string) []string {
	if len(checks) == 0 {
		return []string{"the scenario recorded no checks (the suite would still call that a pass)"}
	}
	var problems []string
	for _, c := range checks {
		if c.Status == CheckSuccess {
			continue
		}
		if c.Status == CheckInfo && contains(allowInfo, c.ID) {
			continue
		}
		problems = append(problems, c.String())
	}
	return problems
}

// RequireChecksPassed fails the test unless there is at least one check and every
// check is SUCCESS (or INFO for an ID in allowInfo); it prints the failing checks.
func RequireChecksPassed(t testing.TB, scenario string, checks []Check, allowInfo ...string) {
	t.Helper()
	if problems := CheckProblems(checks, allowInfo...); len(problems) > 0 {
		var all []string
		for _, c := range checks {
			all = append(all, "  "+c.Status+" "+c.ID)
		}
		t.Fatalf("conformance scenario %s: %d problem(s):\n  %s\nall checks:\n%s",
			scenario, len(problems), strings.Join(problems, "\n  "), strings.Join(all, "\n"))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ConformanceScenarios lists the scenario names of the suite (`conformance list
// --server`, or --client when client is true).
func ConformanceScenarios(t testing.TB, ctx context.Context, client bool) []string {
	t.Helper()
	cli := moduleFile(t, "@modelcontextprotocol/conformance", "dist", "index.js")
	flag := "--server"
	if client {
		flag = "--client"
	}
	r := run(ctx, Dir(t), nil, Node22(t), cli, "list", flag)
	if r.err != nil {
		t.Fatalf("peers: conformance list %s:\n%s", flag, r.describe())
	}
	var names []string
	for _, line := range strings.Split(r.stdout, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "- ")
		if !ok {
			continue
		}
		if name, _, _ := strings.Cut(rest, " "); name != "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		t.Fatalf("peers: conformance list %s printed no scenarios:\n%s", flag, r.describe())
	}
	return names
}
