//go:build unix

package memory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The crash helper is this test binary re-executed with crashEnv set to a store root.
const crashEnv = "MEMORY_CRASH_HELPER_ROOT"

var crashFiles = []string{"/memories/crash/alpha.md", "/memories/crash/beta.md", "/memories/crash/gamma.md", "/memories/crash/delta.md"}

// crashBody makes each version 8 KiB+, so that a torn write would show.
var crashBody = strings.Repeat("0123456789abcdef", 512) + "\n"

// crashContent is a version of a crash file. The helper moves every file through
// (1,1) -str_replace-> (2,1) -create-> (2,2) -str_replace-> (3,2) -> ...
func crashContent(gen, end int) string {
	return fmt.Sprintf("gen=%d\n%send=%d\n", gen, crashBody, end)
}

// parseCrash returns the (gen, end) of a complete version; ok is false for anything else (torn, empty, mixed).
func parseCrash(b []byte) (gen, end int, ok bool) {
	s := string(b)
	if _, err := fmt.Sscanf(s, "gen=%d\n", &gen); err != nil {
		return 0, 0, false
	}
	i := strings.LastIndex(s, "end=")
	if i < 0 {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(s[i:], "end=%d\n", &end); err != nil {
		return 0, 0, false
	}
	if (end != gen && end != gen-1) || gen < 1 || s != crashContent(gen, end) {
		return 0, 0, false
	}
	return gen, end, true
}

// previousCrash is the version before (gen, end), if any.
func previousCrash(gen, end int) (int, int, bool) {
	switch {
	case gen == 1 && end == 1:
		return 0, 0, false
	case end == gen:
		return gen, gen - 1, true
	default:
		return gen - 1, gen - 1, true
	}
}

// stepsBack returns how many versions before (gen, end) the version with the
// given hash is (0 = this one), or -1 if it is not within limit steps.
func stepsBack(gen, end int, sha string, limit int) int {
	for back := 0; back <= limit; back++ {
		if sum([]byte(crashContent(gen, end))) == sha {
			return back
		}
		var ok bool
		if gen, end, ok = previousCrash(gen, end); !ok {
			return -1
		}
	}
	return -1
}

// TestHelperProcess is not a test: TestCrashSafety runs it in a child process
// that loops create/str_replace through Store.Handle until it is killed.
func TestHelperProcess(t *testing.T) {
	root := os.Getenv(crashEnv)
	if root == "" {
		return
	}
	s, err := Open(Config{Root: root})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	ctx := context.Background()
	for i := 0; ; i++ {
		name := crashFiles[i%len(crashFiles)]
		var a map[string]any
		b, err := os.ReadFile(s.hostPath(name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			a = map[string]any{"command": "create", "path": name, "file_text": crashContent(1, 1)}
		case err != nil:
			fmt.Fprintln(os.Stderr, "read:", err)
			os.Exit(3)
		default:
			gen, end, ok := parseCrash(b)
			switch {
			case !ok:
				fmt.Fprintf(os.Stderr, "%s is torn (%d bytes)\n", name, len(b))
				os.Exit(3)
			case gen == end:
				a = map[string]any{"command": "str_replace", "path": name, "old_str": fmt.Sprintf("gen=%d\n", gen), "new_str": fmt.Sprintf("gen=%d\n", gen+1), "confirm": true}
			default:
				a = map[string]any{"command": "create", "path": name, "file_text": crashContent(gen, gen), "confirm": true}
			}
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = adapterconfig.DefaultMemoryToolName
		req.Params.Arguments = a
		res, err := s.Handle(ctx, req)
		if err != nil || res.IsError {
			fmt.Fprintf(os.Stderr, "call %v: %v %+v\n", a["command"], err, res)
			os.Exit(4)
		}
	}
}

// TestCrashSafety kills the helper with SIGKILL at random moments (100 times, or
// as many as fit in ~20 s) and checks after each kill that every file is a
// complete old or new version, that the journal parses, and that it records
// every change: before recovery its last entry for each file is the file's
// current version or the one before (the kill fell between the rename and the
// journal append), and after Open (which journals that change from
// .intent.json) it is the current version.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a helper process 100 times")
	}
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	deadline := time.Now().Add(20 * time.Second)
	kills, maxGen, skipped, settled := 0, 0, 0, 0
	for kills < 100 && time.Now().Before(deadline) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+root)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, rd := "", bufio.NewReader(stdout)
		for i := 0; i < 10 && line != "ready\n"; i++ { // skip any test framework output
			if line, err = rd.ReadString('\n'); err != nil {
				break
			}
		}
		if err != nil || line != "ready\n" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("helper did not start: %q %v\n%s", line, err, stderr.String())
		}
		// The kill lands at a random moment of the helper's writes, on purpose: the
		// point of the test is that any moment leaves a store that opens.
		time.Sleep(time.Duration(rng.IntN(25_000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("helper: %v\n%s", err, stderr.String())
		}
		if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("helper ended by itself (%v) instead of being killed:\n%s", err, stderr.String())
		}
		kills++
		if g := verifyAfterCrash(t, root, kills, &skipped, &settled); g > maxGen {
			maxGen = g
		}
	}
	t.Logf("%d kills; the files reached generation %d; %d torn journal lines skipped; the recovery journaled an interrupted change after %d kills", kills, maxGen, skipped, settled)
	if kills < 100 {
		t.Logf("stopped at the time bound after %d kills", kills)
	}
	if kills < 20 || maxGen < 3 {
		t.Fatalf("too little happened: %d kills, generation %d", kills, maxGen)
	}
}

// lastEntries parses the journal file as the killed helper left it (before any
// recovery, so a torn last line may end it) and returns each path's last entry.
func lastEntries(t *testing.T, root string) map[string]JournalEntry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, journalName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	last := map[string]JournalEntry{}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		var e JournalEntry
		if json.Unmarshal(line, &e) == nil && e.Command != "" {
			last[e.Path] = e
		}
	}
	return last
}

// verifyAfterCrash checks the files and the journal on disk (before any
// recovery), then opens the store (which recovers) and checks the journal
// against the files again. settled counts the kills after which the recovery
// had to journal the interrupted change.
func verifyAfterCrash(t *testing.T, root string, kill int, skipped, settled *int) (maxGen int) {
	t.Helper()
	type version struct {
		exists   bool
		gen, end int
		sha      string
	}
	files := map[string]version{}
	for _, name := range crashFiles {
		b, err := os.ReadFile(filepath.Join(root, memoriesDir, strings.TrimPrefix(name, VirtualRoot+"/")))
		if errors.Is(err, os.ErrNotExist) {
			files[name] = version{}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		gen, end, ok := parseCrash(b)
		if !ok {
			t.Fatalf("kill %d: %s is torn or mixed (%d bytes): %.40q…", kill, name, len(b), b)
		}
		files[name] = version{true, gen, end, sum(b)}
		maxGen = max(maxGen, gen)
	}
	// check compares the journal's last entries with the files: each may lag by
	// at most limit versions. Only the mutation the kill interrupted can be
	// missing, since the helper's Open journaled what the previous kill left.
	check := func(when string, last map[string]JournalEntry, limit int) (lagging bool) {
		for name, v := range files {
			e, journaled := last[name]
			switch {
			case !v.exists && journaled:
				t.Fatalf("kill %d, %s: %s is missing but journaled: %+v", kill, when, name, e)
			case !v.exists:
			case !journaled:
				// only the first create may be missing
				if stepsBack(v.gen, v.end, sum([]byte(crashContent(1, 1))), limit) < 0 {
					t.Fatalf("kill %d, %s: %s is at (%d,%d) with no journal entry", kill, when, name, v.gen, v.end)
				}
				lagging = true
			default:
				back := stepsBack(v.gen, v.end, e.SHA256After, limit)
				if back < 0 {
					t.Fatalf("kill %d, %s: %s is at (%d,%d) but the journal's last entry is not among its %d previous versions: %+v", kill, when, name, v.gen, v.end, limit, e)
				}
				lagging = lagging || back > 0
			}
		}
		return lagging
	}
	lagging := check("before recovery", lastEntries(t, root), 1)

	s, err := Open(Config{Root: root})
	if err != nil {
		t.Fatalf("kill %d: reopen: %v", kill, err)
	}
	defer s.Close()
	rep, err := s.ReadJournal()
	if err != nil {
		t.Fatalf("kill %d: journal: %v", kill, err)
	}
	if n := len(rep.Skipped); n > *skipped {
		t.Logf("kill %d: a torn journal line is skipped and reported (%d so far): %+v", kill, n, rep.Skipped[n-1])
		*skipped = n
	}
	last := map[string]JournalEntry{}
	for _, e := range rep.Entries {
		last[e.Path] = e
	}
	check("after recovery", last, 0)
	if lagging {
		*settled++
	}
	if fi, err := os.Stat(filepath.Join(root, intentName)); err != nil || fi.Size() != 0 {
		t.Fatalf("kill %d: %s after recovery: %v, %v bytes", kill, intentName, err, fi.Size())
	}
	if _, err := s.Trash(); err != nil {
		t.Fatalf("kill %d: trash: %v", kill, err)
	}
	return maxGen
}
