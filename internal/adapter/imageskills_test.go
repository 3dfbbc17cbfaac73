package adapter

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapter/content"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// Skills from image folders are served like the others, every file read back with the
// digest and size its entry lists (a file that is not UTF-8 as a blob of its exact
// bytes); one that breaks a rule (here: its frontmatter's name, and a symlink to a file
// outside its folder) is left out, logged and counted by
// cantus_adapter_image_skills_left_out, while the rest of the server keeps serving.
func TestImageSkillsServedAndBadOnesLeftOut(t *testing.T) {
	good := testkit.WriteTree(t, "", map[string]string{
		"SKILL.md": skillMD("cataloguing", "Catalogue a new book"), "references/MARC.md": "# MARC", "assets/label.md": "\xff\xfe label",
	})
	misnamed := testkit.WriteTree(t, "", map[string]string{"SKILL.md": skillMD("other-name", "Misnamed")})
	escaping := testkit.WriteTree(t, "", map[string]string{"SKILL.md": skillMD("escaping", "Reads the host")})
	if err := os.Symlink("/etc/passwd", filepath.Join(escaping, "passwd")); err != nil {
		t.Fatal(err)
	}
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a_tool", objectSchema, "A"))
	cfg.ImageSkills = []adapterconfig.ImageSkill{
		{Path: "library/cataloguing", Dir: good, Source: "registry.example/skills:1"},
		{Path: "misnamed", Dir: misnamed, Source: "registry.example/skills:1"},
		{Path: "escaping", Dir: escaping, Source: "registry.example/skills:1"},
	}
	srv := serve(t, cfg)
	c := connect(t, srv.baseURL, protocol20251125, nil)

	skills, _ := listSkillPages(t, srv.baseURL, nil)
	if len(skills) != 1 || skills[0].URI != "skill://library/cataloguing/SKILL.md" {
		t.Fatalf("skills/list = %+v, want only skill://library/cataloguing/SKILL.md", skills)
	}
	want := map[string]string{
		"skill://library/cataloguing/SKILL.md":           skillMD("cataloguing", "Catalogue a new book"),
		"skill://library/cataloguing/references/MARC.md": "# MARC",
		"skill://library/cataloguing/assets/label.md":    "\xff\xfe label",
	}
	if len(skills[0].Resources) != len(want) {
		t.Fatalf("the entry lists %+v, want %d files", skills[0].Resources, len(want))
	}
	for _, r := range skills[0].Resources {
		data, _ := readBytes(t, c, r.URI)
		sum := sha256.Sum256(data)
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != r.Digest || int64(len(data)) != r.Size || string(data) != want[r.URI] {
			t.Errorf("%s: read %q (%s), the entry says %d bytes with %s", r.URI, data, got, r.Size, r.Digest)
		}
	}
	if _, rpcErr := rpc(t, srv.baseURL, nil, "skills/get", map[string]string{"uri": "skill://misnamed/SKILL.md"}); rpcErr == nil {
		t.Error("skills/get of a left-out skill answers")
	}
	if body := metricsText(t, srv.Server); !strings.Contains(body, "\ncantus_adapter_image_skills_left_out 2\n") {
		t.Errorf("/metrics does not count the two left-out skills:\n%s", grepLines(body, "image_skills"))
	}
	res := callTool(t, c, "a_tool", map[string]any{})
	wantSuccess(t, res, "A")
}

// A server whose every image skill was left out still answers skills/list (with no
// skill) and declares the extension, so the operator's verification names the skills
// missing instead of finding no method.
func TestImageSkillsAllLeftOutStillListsNone(t *testing.T) {
	misnamed := testkit.WriteTree(t, "", map[string]string{"SKILL.md": skillMD("other-name", "Misnamed")})
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true)
	cfg.ImageSkills = []adapterconfig.ImageSkill{{Path: "broken", Dir: misnamed}}
	srv := serve(t, cfg)
	if skills, _ := listSkillPages(t, srv.baseURL, nil); len(skills) != 0 {
		t.Errorf("skills/list = %+v, want none", skills)
	}
	c := connect(t, srv.baseURL, protocol20251125, nil)
	if caps := c.GetServerCapabilities(); caps.Extensions[content.SkillsExtension] == nil || caps.Resources == nil {
		t.Errorf("capabilities %+v lack the skills extension or resources", caps)
	}
}
