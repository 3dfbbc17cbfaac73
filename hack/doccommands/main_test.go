package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeDoc(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBlocksAreRunOrMarkedWithTheirReason(t *testing.T) {
	path := writeDoc(t, t.TempDir(), "a.md", strings.Join([]string{
		"# Title",
		"```sh",
		"echo one",
		"```",
		"<!-- not run: needs a cluster -->",
		"```sh",
		"kubectl apply -f x",
		"```",
		"- a list item:",
		"",
		"  ```sh",
		"  echo indented",
		"  ```",
		"```yaml",
		"a: b",
		"```",
	}, "\n"))
	d, err := read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.problems) > 0 {
		t.Fatalf("problems: %v", d.problems)
	}
	want := []block{{line: 2, text: "echo one"}, {line: 6, text: "kubectl apply -f x", skip: "needs a cluster"}, {line: 11, text: "echo indented"}}
	if len(d.blocks) != len(want) {
		t.Fatalf("blocks %+v, want %+v", d.blocks, want)
	}
	for i := range want {
		if d.blocks[i] != want[i] {
			t.Errorf("block %d: %+v, want %+v", i, d.blocks[i], want[i])
		}
	}
}

func TestWhatIsNeitherRunNorMarkedIsAProblem(t *testing.T) {
	for name, text := range map[string]string{
		"a mark without a reason": "<!-- not run: -->\n```sh\necho\n```\n",
		"a bash block":            "```bash\necho\n```\n",
		"a mark above yaml":       "<!-- not run: why -->\n```yaml\na: b\n```\n",
		"a mark above prose":      "<!-- not run: why -->\nsome words\n```sh\necho\n```\n",
		"a mark above nothing":    "text\n<!-- not run: why -->\n",
		"a block never closed":    "```sh\necho\n",
	} {
		t.Run(name, func(t *testing.T) {
			d, err := read(writeDoc(t, t.TempDir(), "a.md", text))
			if err != nil {
				t.Fatal(err)
			}
			if len(d.problems) == 0 {
				t.Errorf("no problem found in %q", text)
			}
		})
	}
}

func TestBrokenRelativeLinksAreFound(t *testing.T) {
	dir := t.TempDir()
	other := writeDoc(t, dir, "b.md", "# B\n## The `spec.limits` field\n")
	path := writeDoc(t, dir, "a.md", strings.Join([]string{
		"# A",
		"[ok](b.md) [ok](b.md#the-speclimits-field) [ok](#a) [web](https://example.com/x)",
		"[gone](c.md) [no heading](b.md#nothing) [here](#nothing) `[code](d.md)`",
	}, "\n"))
	docs := map[string]*doc{}
	for _, p := range []string{path, other} {
		d, err := read(p)
		if err != nil {
			t.Fatal(err)
		}
		docs[p] = d
	}
	problems := brokenLinks(docs[path], docs)
	if len(problems) != 3 {
		t.Fatalf("problems %q, want 3: c.md, b.md#nothing, #nothing", problems)
	}
	for i, want := range []string{"c.md: no such file", "b.md#nothing: no such heading", "#nothing: no such heading"} {
		if !strings.Contains(problems[i], want) {
			t.Errorf("problem %q, want it to say %q", problems[i], want)
		}
	}
}

// The repository's own docs: every sh block is run or marked, and every relative link
// lands (make test checks this in a second; make doc-commands also runs the blocks).
func TestTheDocsOfThisRepository(t *testing.T) {
	root := filepath.Join("..", "..")
	files := []string{"README.md", "ARCHITECTURE.md", "CONTRIBUTING.md"}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range files {
		files[i] = filepath.Join(root, files[i])
	}
	if err := run("", append(files, pages...)); err != nil {
		t.Fatal(err)
	}
}
