package adapterconfig

import (
	"encoding/json"
	"strings"
	"testing"
)

// Each Agent Skills rule and contract check refuses its config with a message that
// names the skill, resource or prompt and the rule.
func TestValidateContentSaysWhatIsWrong(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	skill := func(path, name string, files ...SkillFile) AgentSkill {
		fm, _ := json.Marshal(map[string]string{"name": name, "description": "d"})
		if len(files) == 0 {
			files = []SkillFile{{Path: "SKILL.md", Digest: digest, Size: 1}}
		}
		return AgentSkill{Path: path, Frontmatter: fm, Files: files}
	}
	text := "t"
	cases := map[string]struct {
		edit func(*Config)
		want string
	}{
		"valid":              {func(*Config) {}, ""},
		"name with capitals": {func(c *Config) { c.AgentSkills = []AgentSkill{skill("Refunds", "Refunds")} }, "lowercase letters, digits and single hyphens"},
		"double hyphen":      {func(c *Config) { c.AgentSkills = []AgentSkill{skill("a--b", "a--b")} }, "single hyphens"},
		"name too long":      {func(c *Config) { n := strings.Repeat("a", 65); c.AgentSkills = []AgentSkill{skill(n, n)} }, "longer than 64"},
		"name differs":       {func(c *Config) { c.AgentSkills = []AgentSkill{skill("acme/refunds", "other")} }, `must equal the skill directory's name "refunds"`},
		"parent segment":     {func(c *Config) { c.AgentSkills = []AgentSkill{skill("acme/../refunds", "refunds")} }, `".." segment`},
		"absolute path":      {func(c *Config) { c.AgentSkills = []AgentSkill{skill("/refunds", "refunds")} }, "must not start or end with /"},
		"file escapes": {func(c *Config) {
			c.AgentSkills = []AgentSkill{skill("r", "r", SkillFile{Path: "SKILL.md", Digest: digest, Size: 1}, SkillFile{Path: "../x", Digest: digest, Size: 1})}
		}, `file "../x": path has a ".." segment`},
		"no SKILL.md": {func(c *Config) {
			c.AgentSkills = []AgentSkill{skill("r", "r", SkillFile{Path: "README.md", Digest: digest, Size: 1})}
		}, "no SKILL.md"},
		"bad digest": {func(c *Config) {
			c.AgentSkills = []AgentSkill{skill("r", "r", SkillFile{Path: "SKILL.md", Digest: "sha256:ABC", Size: 1})}
		}, "64 lowercase hex digits"},
		"too large": {func(c *Config) {
			c.AgentSkills = []AgentSkill{skill("r", "r", SkillFile{Path: "SKILL.md", Digest: digest, Size: MaxSkillBytes + 1})}
		}, "more than the 16777216 a skill may hold"},
		"too many files": {func(c *Config) {
			files := []SkillFile{{Path: "SKILL.md", Digest: digest, Size: 1}}
			for i := range MaxSkillFiles {
				files = append(files, SkillFile{Path: "f" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + strings.Repeat("y", i/26), Digest: digest, Size: 1})
			}
			c.AgentSkills = []AgentSkill{skill("r", "r", files...)}
		}, "more than the 512 a skill may have"},
		"no content dir": {func(c *Config) { c.ContentDir = ""; c.AgentSkills = []AgentSkill{skill("r", "r")} }, "contentDir is empty"},
		"resource twice": {func(c *Config) {
			r := Resource{URI: "docs://a", Name: "a", Text: &text}
			c.Resources = []Resource{r, r}
		}, "resource URIs must be unique"},
		"resource two srcs": {func(c *Config) {
			c.Resources = []Resource{{URI: "docs://a", Name: "a", Text: &text, Content: &ContentRef{Digest: digest}}}
		}, "exactly one of text and content"},
		"skill:// resource": {func(c *Config) { c.Resources = []Resource{{URI: "skill://a/SKILL.md", Name: "a", Text: &text}} }, "files of agentSkills"},
		"bad uri template": {func(c *Config) {
			c.ResourceTemplates = []ResourceTemplate{{URITemplate: "x://{a", Name: "a", Template: &TemplateBackend{Text: "a"}}}
		}, "not an RFC 6570 template"},
		"prompt bad role": {func(c *Config) {
			c.Prompts = []Prompt{{Name: "p", Messages: []PromptMessage{{Role: "system", Content: PromptContent{Type: "text", Text: "x"}}}}}
		}, `role "system" must be user or assistant`},
		"rule with no kinds": {func(c *Config) {
			c.Auth = &AuthConfig{Authorization: &Authorization{Rules: []AuthorizationRule{{Groups: []string{"g"}}}}}
		}, "names nothing it allows"},
	}
	for name, tc := range cases {
		cfg := &Config{Transport: TransportStreamableHTTP, ContentDir: "/content"}
		tc.edit(cfg)
		err := Validate(cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error with %q", name, err, tc.want)
		}
	}
}
