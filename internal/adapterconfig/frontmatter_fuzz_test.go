package adapterconfig

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzFrontmatterIsBoundedAndRefusesAliases feeds SkillFrontmatter any SKILL.md. It
// must not panic, what it returns must stay within MaxFrontmatterJSON, and a
// frontmatter in which the YAML parser sees an anchor or an alias must be refused, as
// must the same frontmatter with an alias added.
func FuzzFrontmatterIsBoundedAndRefusesAliases(f *testing.F) {
	f.Add([]byte("---\nname: x\ndescription: d\n---\nbody\n"))
	f.Add([]byte("---\nname: x\ndescription: d\nmetadata: {tags: [a, b], n: 0x1F, t: 2026-12-06}\n---\n"))
	f.Add([]byte(aliasBomb(3)))
	f.Add([]byte("---\nname: &n x\ndescription: *n\n---\n"))
	f.Add([]byte("---\nbase: &b {a: 1}\nname: x\nmeta:\n  <<: *b\n---\n"))
	f.Add([]byte("---\nname: x\ndeep: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n---\n"))
	f.Add([]byte("---\nname: \"<&>\u2028\"\ndescription: '*not an alias*'\n---\n"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, md []byte) {
		out, err := SkillFrontmatter(md)
		if err == nil && len(out) > MaxFrontmatterJSON {
			t.Fatalf("the frontmatter is %d bytes as JSON, over the bound of %d", len(out), MaxFrontmatterJSON)
		}
		block, blockErr := frontmatterBlock(md)
		if blockErr != nil {
			return
		}
		if err == nil && yamlHasAnAnchorOrAlias(block) {
			t.Fatalf("a frontmatter with an anchor or alias was read: %q", block)
		}
		if err != nil {
			return
		}
		// The same frontmatter with an alias added in front is refused. (In front: the
		// parser stops reading at some dedents, so an alias added at the end may never
		// be parsed, and then it expands nothing.)
		withAlias := append([]byte("---\nzz_anchor: &zz x\nzz_alias: *zz\n"), block...)
		withAlias = append(withAlias, "---\n"...)
		if _, err := SkillFrontmatter(withAlias); err == nil {
			t.Fatalf("a frontmatter with an alias added was read: %q", withAlias)
		}
	})
}

// yamlHasAnAnchorOrAlias asks the YAML parser itself, apart from SkillFrontmatter's
// walk, whether the text has an anchor or an alias anywhere.
func yamlHasAnAnchorOrAlias(block []byte) bool {
	var doc yaml.Node
	if yaml.Unmarshal(block, &doc) != nil {
		return false
	}
	var has func(n *yaml.Node) bool
	has = func(n *yaml.Node) bool {
		if n.Kind == yaml.AliasNode || n.Anchor != "" {
			return true
		}
		for _, c := range n.Content {
			if has(c) {
				return true
			}
		}
		return false
	}
	return has(&doc)
}
