package peers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// RunConformanceClient runs one client scenario of the MCP conformance suite
// (`conformance client --command "CMD" --scenario X -o DIR`, on Node 22): the suite
// starts a mock server and runs command with the server's URL appended. It returns the
// checks of DIR/*/checks.json; as with RunConformance the suite's own verdict is not
// trusted (zero checks count as a pass there), so assert with RequireChecksPassed.
//
// The suite joins nothing and splits the command on spaces, then runs it through a
// shell: no element of command may hold whitespace or shell metacharacters.
func RunConformanceClient(t testing.TB, ctx context.Context, command []string, scenario string) []Check {
	t.Helper()
	for _, arg := range command {
		if arg == "" || strings.ContainsAny(arg, " \t\n|&;<>()$`\\\"'*?[]#~=%{}!") {
			t.Fatalf("peers: conformance client command element %q would not survive the suite's split-on-spaces and shell", arg)
		}
	}
	cli := moduleFile(t, "@modelcontextprotocol/conformance", "dist", "index.js")
	out := t.TempDir()
	r := run(ctx, out, nil, Node22(t), cli, "client", "--command", strings.Join(command, " "), "--scenario", scenario, "-o", out)
	checks, files := readChecks(t, out, fmt.Sprintf("conformance client scenario %s of %q", scenario, command), r)
	// What the client printed, for the test log (the suite saves it beside the checks).
	for _, f := range files {
		for _, name := range []string{"stdout.txt", "stderr.txt"} {
			if b, err := os.ReadFile(filepath.Join(filepath.Dir(f), name)); err == nil && len(b) > 0 {
				t.Logf("conformance client %s %s:\n%s", scenario, name, clip(string(b)))
			}
		}
	}
	return checks
}
