package mcpclient

import (
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// TestListSkillsAndPrompts: skills/list entries are named by their URI and prompts/list
// entries by their name, each page followed, each entry kept as sent.
func TestListSkillsAndPrompts(t *testing.T) {
	const skill = `{"uri":"skill://a/SKILL.md","frontmatter":{"name":"a","description":"A"},"resources":[]}`
	s := connectTo(t, pagedServer(t, map[string]string{
		"": `{"skills":[` + skill + `],"nextCursor":"p2"}`, "p2": `{"skills":[{"uri":"skill://b/SKILL.md"}]}`,
	}), TransportStreamableHTTP)
	skills, err := s.ListSkills(testkit.Context(t, testBudget), 10)
	if err != nil || len(skills) != 2 || string(skills[0]) != skill {
		t.Fatalf("skills %s, %v", skills, err)
	}
	s = connectTo(t, pagedServer(t, map[string]string{"": `{"skills":[{"name":"a"}]}`}), TransportStreamableHTTP)
	_, err = s.ListSkills(testkit.Context(t, testBudget), 10)
	if ReasonOf(err) != ReasonProtocolError || !strings.Contains(err.Error(), "uri") {
		t.Errorf("want a ProtocolError saying the entry has no uri, got %v", err)
	}

	s = connectTo(t, pagedServer(t, map[string]string{"": `{"prompts":[{"name":"greet"},{"name":"bye"}]}`}), TransportStreamableHTTP)
	prompts, err := s.ListPrompts(testkit.Context(t, testBudget), 10)
	if err != nil || len(prompts) != 2 {
		t.Fatalf("prompts %s, %v", prompts, err)
	}
}
