// Command doccommands reads the fenced code blocks of Markdown files, so that
// hack/doc-commands.sh can run the docs' shell commands as a reader would type them.
//
// Every block whose info string is "sh" is either run or marked, on the line right above
// its fence, with <!-- not run: reason -->. Blocks to run are written to one bash script
// per Markdown file (in -out), in order, so that a variable set in one block is there in
// the next. It fails on a mark without a reason, a mark that stands above no sh block,
// a shell block under another info string (bash, shell, zsh), and a relative link whose
// file or heading does not exist.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

func main() {
	out := flag.String("out", "", "folder to write one bash script per Markdown file with blocks to run (none: only check)")
	flag.Parse()
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "doccommands:", err)
		os.Exit(1)
	}
}

func run(out string, files []string) error {
	docs := make(map[string]*doc, len(files))
	var problems []string
	for _, name := range files {
		d, err := read(name)
		if err != nil {
			return err
		}
		docs[filepath.Clean(name)] = d
		problems = append(problems, d.problems...)
	}
	for _, name := range files {
		problems = append(problems, brokenLinks(docs[filepath.Clean(name)], docs)...)
	}
	runs, skips := 0, 0
	for i, name := range files {
		d := docs[filepath.Clean(name)]
		for _, b := range d.blocks {
			if b.skip != "" {
				skips++
				fmt.Printf("not run  %s:%d  %s\n", name, b.line, b.skip)
				continue
			}
			runs++
			fmt.Printf("run      %s:%d\n", name, b.line)
		}
		if out != "" {
			if err := writeScript(filepath.Join(out, fmt.Sprintf("%02d.sh", i)), name, d.blocks); err != nil {
				return err
			}
		}
	}
	fmt.Printf("%d sh blocks to run, %d marked not run\n", runs, skips)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

// block is one fenced sh block: the line of its opening fence, its commands with the
// fence's indentation removed, and the reason it is not run (empty: it runs).
type block struct {
	line int
	text string
	skip string
}

type doc struct {
	name     string
	blocks   []block
	anchors  map[string]bool
	links    []link
	problems []string
}

type link struct {
	line   int
	target string
}

var (
	fenceRE   = regexp.MustCompile("^( *)(```+|~~~+)(.*)$")
	notRunRE  = regexp.MustCompile(`^\s*<!--\s*not run:\s*(.*?)\s*-->\s*$`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeRE    = regexp.MustCompile("`[^`]*`")
)

// shellLike are info strings that hold shell commands under another name: the script
// would not see them, so they must be sh (run or marked) or an output's name (console).
var shellLike = map[string]bool{"bash": true, "shell": true, "zsh": true, "sh-session": true}

func read(name string) (*doc, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	d := &doc{name: name, anchors: map[string]bool{}}
	var (
		fence    string // the open fence's marker, empty outside a block
		indent   int
		info     string
		body     []string
		start    int
		markLine int // the line of a not-run mark waiting for its block
		mark     string
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if fence != "" {
			if m := fenceRE.FindStringSubmatch(l); m != nil && strings.HasPrefix(m[2], fence) && strings.TrimSpace(m[3]) == "" {
				if info == "sh" {
					d.blocks = append(d.blocks, block{line: start, text: strings.Join(body, "\n"), skip: mark})
					mark, markLine = "", 0
				}
				fence = ""
				continue
			}
			body = append(body, strings.TrimPrefix(l, strings.Repeat(" ", indent)))
			continue
		}
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			fence, indent, info, body, start = m[2], len(m[1]), strings.TrimSpace(m[3]), nil, n
			if shellLike[info] {
				d.problems = append(d.problems, fmt.Sprintf("%s:%d: a %q block: write shell commands as sh (run, or marked <!-- not run: reason -->)", name, n, info))
			}
			if markLine != 0 && info != "sh" {
				d.problems = append(d.problems, fmt.Sprintf("%s:%d: a not-run mark stands above a %q block, not an sh one", name, markLine, info))
				mark, markLine = "", 0
			}
			continue
		}
		if markLine != 0 && strings.TrimSpace(l) != "" {
			d.problems = append(d.problems, fmt.Sprintf("%s:%d: a not-run mark must stand right above the sh block it marks", name, markLine))
			mark, markLine = "", 0
		}
		if m := notRunRE.FindStringSubmatch(l); m != nil {
			if m[1] == "" {
				d.problems = append(d.problems, fmt.Sprintf("%s:%d: a not-run mark needs a reason: <!-- not run: why -->", name, n))
			}
			mark, markLine = m[1], n
			if mark == "" {
				mark = "(no reason)"
			}
			continue
		}
		if m := headingRE.FindStringSubmatch(l); m != nil {
			d.anchors[slug(m[1])] = true
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(l, ""), -1) {
			d.links = append(d.links, link{line: n, target: m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if fence != "" {
		d.problems = append(d.problems, fmt.Sprintf("%s:%d: a code block that is never closed", name, start))
	}
	if markLine != 0 {
		d.problems = append(d.problems, fmt.Sprintf("%s:%d: a not-run mark stands above no sh block", name, markLine))
	}
	return d, nil
}

// slug is the anchor GitHub gives a heading: lower case, punctuation dropped, spaces
// turned into hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// brokenLinks names the relative links of d whose file, or heading in a Markdown file,
// does not exist. Links to other sites are not followed.
func brokenLinks(d *doc, docs map[string]*doc) []string {
	var problems []string
	for _, l := range d.links {
		if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
			continue
		}
		path, anchor, _ := strings.Cut(l.target, "#")
		target := d
		if path != "" {
			full := filepath.Clean(filepath.Join(filepath.Dir(d.name), path))
			if _, err := os.Stat(full); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: no such file", d.name, l.line, l.target))
				continue
			}
			target = docs[full]
			if target == nil && anchor != "" && strings.HasSuffix(full, ".md") {
				t, err := read(full)
				if err != nil {
					return append(problems, err.Error())
				}
				target = t
			}
		}
		if anchor != "" && target != nil && !target.anchors[anchor] {
			problems = append(problems, fmt.Sprintf("%s:%d: link to %s: no such heading", d.name, l.line, l.target))
		}
	}
	return problems
}

// writeScript writes the blocks of one file that run as one bash script, each announced
// with where it stands, so that a failure names its block.
func writeScript(path, name string, blocks []block) error {
	var b strings.Builder
	b.WriteString("set -euo pipefail\n")
	some := false
	for _, bl := range blocks {
		if bl.skip != "" {
			continue
		}
		some = true
		fmt.Fprintf(&b, "echo %q >&2\n%s\n", fmt.Sprintf("== %s:%d", name, bl.line), bl.text)
	}
	if !some {
		return nil
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write the script of %s: %w", name, err)
	}
	return nil
}
