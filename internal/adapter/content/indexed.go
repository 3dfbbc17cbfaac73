package content

import (
	"encoding/json"
)

// IndexedSkill is an agent skill as the discovery index reads it.
type IndexedSkill struct {
	// Path is the skill's path, which authorization rules govern.
	Path string
	// URI is its SKILL.md's URI, which skills/get and resources/read take.
	URI string
	// Frontmatter is SKILL.md's frontmatter, verbatim.
	Frontmatter json.RawMessage
	// Body is SKILL.md's text (frontmatter included); empty for an imported skill,
	// which is indexed by its frontmatter only.
	Body string
}

// IndexedSkills are the skills the set serves, its own and the imported ones, for the
// discovery index.
func (c *Set) IndexedSkills() []IndexedSkill {
	out := make([]IndexedSkill, 0, len(c.skills)+len(c.imported.skills))
	for _, s := range c.skills {
		skill := IndexedSkill{Path: s.path, URI: s.uri, Frontmatter: frontmatterOf(s.entry)}
		if f := c.files[s.uri]; f != nil && f.text {
			skill.Body = f.body
		}
		out = append(out, skill)
	}
	for _, s := range c.imported.skills {
		out = append(out, IndexedSkill{Path: s.path, URI: s.uri, Frontmatter: frontmatterOf(s.entry)})
	}
	return out
}

// frontmatterOf reads the frontmatter of a skills/list entry.
func frontmatterOf(entry json.RawMessage) json.RawMessage {
	var e struct {
		Frontmatter json.RawMessage `json:"frontmatter"`
	}
	_ = json.Unmarshal(entry, &e) // an entry the set encoded, or a remote's: no frontmatter then
	return e.Frontmatter
}
