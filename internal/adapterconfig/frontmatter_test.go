package adapterconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// aliasBomb is a SKILL.md whose frontmatter is a billion-laughs: each level
// names the one before ten times, so it expands to 10^(levels+1) strings. Five levels
// (about 500 bytes) expanded to 14.7 MB before aliases were refused; more would exhaust
// the test machine, so the test stays at five.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("---\nname: x\ndescription: d\n")
	b.WriteString(`l0: &l0 ["aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa"]` + "\n")
	for i := 1; i <= levels; i++ {
		ref := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(ref+",", 10), ","))
	}
	b.WriteString("---\nbody\n")
	return b.String()
}

func TestFrontmatterWithAnAliasBombIsRefusedFast(t *testing.T) {
	start := time.Now()
	_, err := SkillFrontmatter([]byte(aliasBomb(5)))
	if err == nil || !strings.Contains(err.Error(), "YAML anchors and aliases are not allowed") {
		t.Fatalf("an alias bomb: got %v, want a refusal naming the rule", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("an alias bomb took %v to refuse", d)
	}
}

func TestFrontmatterWithAnAliasOrAnAnchorIsRefused(t *testing.T) {
	for name, md := range map[string]string{
		"a plain alias":            "---\nname: x\ndescription: &d hello\nother: *d\n---\n",
		"an anchor alone":          "---\nname: &n x\ndescription: d\n---\n",
		"a merge key":              "---\nbase: &b {a: 1}\nname: x\ndescription: d\nmeta:\n  <<: *b\n---\n",
		"an anchor on the mapping": "--- \n&top\nname: x\ndescription: d\n---\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := SkillFrontmatter([]byte(md))
			if err == nil || !strings.Contains(err.Error(), "YAML anchors and aliases are not allowed") {
				t.Fatalf("got %v, want a refusal naming the rule", err)
			}
		})
	}
}

func TestFrontmatterWithTooManyNodesIsRefused(t *testing.T) {
	// No alias: a flat list of short items, each one node. It is small in bytes but
	// would cost far more as YAML nodes and JSON values.
	md := "---\nname: x\ndescription: d\nitems: [" + strings.TrimSuffix(strings.Repeat("a,", MaxFrontmatterNodes+1), ",") + "]\n---\n"
	if len(md) > MaxFrontmatterBytes {
		t.Fatalf("the test's frontmatter is %d bytes, over the byte bound: it would not test the node bound", len(md))
	}
	_, err := SkillFrontmatter([]byte(md))
	if err == nil || !strings.Contains(err.Error(), "YAML values") {
		t.Fatalf("got %v, want a refusal for too many values", err)
	}
}

func TestFrontmatterLargerThanTheBoundIsRefused(t *testing.T) {
	md := "---\nname: x\ndescription: " + strings.Repeat("a", MaxFrontmatterBytes) + "\n---\n"
	_, err := SkillFrontmatter([]byte(md))
	if err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("got %v, want a refusal for the frontmatter's size", err)
	}
}

func TestFrontmatterWithinTheBoundsIsRead(t *testing.T) {
	md := "---\nname: x\ndescription: d\nmetadata:\n  tags: [a, b]\n---\nbody\n"
	got, err := SkillFrontmatter([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(got, &v); err != nil || v["name"] != "x" {
		t.Fatalf("got %s (%v)", got, err)
	}
}

// Finding the frontmatter costs what the frontmatter costs, not what the file does: an
// image skill's SKILL.md may hold 16 MiB, and one line per byte must not become
// millions of slices.
func TestFindingTheFrontmatterDoesNotCostTheWholeFile(t *testing.T) {
	md := append([]byte("---\n"), bytes.Repeat([]byte("\n"), MaxSkillBytes-4)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := SkillFrontmatter(md)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("got %v, want a refusal of a frontmatter without end", err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 4*MaxFrontmatterBytes {
		t.Errorf("reading a %d-byte SKILL.md allocated %d bytes", len(md), allocated)
	}
}
