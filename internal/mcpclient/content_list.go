package mcpclient

import (
	"context"
	"encoding/json"
)

// ReasonContentListFailed is a JSON-RPC error answer to prompts/list or skills/list, or a
// looping cursor.
const ReasonContentListFailed = "ContentListFailed"

// SkillKind is a skill's manifest, the Skills extension's skills/list entry: the URI of
// its SKILL.md, its frontmatter and its resources (each file's uri, digest and size),
// and _meta. Clients read the frontmatter's name and description and each resource's
// uri and digest by name, so their case variants are refused too.
var SkillKind = ItemKind{Name: "skill", Members: []string{"uri", "frontmatter", "resources", "_meta"}, Inner: map[string][]string{
	"frontmatter": {"name", "description"},
	"resources":   {"uri", "digest", "size", "mimeType"},
}}

var (
	promptsListing = listing{method: "prompts/list", member: "prompts", key: "name", item: PromptKind, refused: ReasonContentListFailed}
	// skillsListing is the Skills extension's skills/list: entries named by the URI of
	// their SKILL.md.
	skillsListing = listing{method: "skills/list", member: "skills", key: "uri", item: SkillKind, refused: ReasonContentListFailed}
)

// ListPrompts returns every prompts/list entry as sent, at most limit of them.
func (s *Session) ListPrompts(ctx context.Context, limit int) ([]json.RawMessage, error) {
	return s.list(ctx, promptsListing, limit)
}

// ListSkills returns every skills/list entry as sent, at most limit of them.
func (s *Session) ListSkills(ctx context.Context, limit int) ([]json.RawMessage, error) {
	return s.list(ctx, skillsListing, limit)
}
