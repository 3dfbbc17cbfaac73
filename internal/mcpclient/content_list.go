package mcpclient

import (
	"context"
	"encoding/json"

	"github.com/cantus-dev/cantus-operator/internal/definition"
)

// ReasonContentListFailed is a JSON-RPC error answer to prompts/list or skills/list, or a
// looping cursor.
const ReasonContentListFailed = "ContentListFailed"

var (
	promptsListing = listing{method: "prompts/list", member: "prompts", key: "name", item: definition.PromptKind, refused: ReasonContentListFailed}
	// skillsListing is the Skills extension's skills/list: entries named by the URI of
	// their SKILL.md.
	skillsListing = listing{method: "skills/list", member: "skills", key: "uri", item: definition.SkillKind, refused: ReasonContentListFailed}
)

// ListPrompts returns every prompts/list entry as sent, at most limit of them.
func (s *Session) ListPrompts(ctx context.Context, limit int) ([]json.RawMessage, error) {
	return s.list(ctx, promptsListing, limit)
}

// ListSkills returns every skills/list entry as sent, at most limit of them.
func (s *Session) ListSkills(ctx context.Context, limit int) ([]json.RawMessage, error) {
	return s.list(ctx, skillsListing, limit)
}
