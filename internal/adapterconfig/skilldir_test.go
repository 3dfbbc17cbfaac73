package adapterconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

const dirSkillMD = "---\nname: cataloguing\ndescription: Catalogue a new book.\nenabled: yes\n---\nRead references/MARC.md.\n"

// A skill folder reads into the skill the config would name: every file by the digest
// and size of its bytes, the frontmatter with YAML 1.2 semantics, and bytes that are not
// UTF-8 typed as binary even under a text extension (served as text they would change).
func TestReadSkillDirReadsWhatTheFolderHolds(t *testing.T) {
	raw := "\xff\xfe\x00binary"
	dir := testkit.WriteTree(t, "", map[string]string{
		"SKILL.md": dirSkillMD, "references/MARC.md": "# MARC\n", "assets/label.md": raw, "assets/logo.png": "\x89PNG",
	})
	skill, data, err := ReadSkillDir(dir, "library/cataloguing")
	if err != nil {
		t.Fatalf("ReadSkillDir: %v", err)
	}
	if got, want := string(skill.Frontmatter), `{"description":"Catalogue a new book.","enabled":"yes","name":"cataloguing"}`; got != want {
		t.Errorf("frontmatter %s, want %s", got, want)
	}
	want := []struct{ path, content, mime string }{
		{"SKILL.md", dirSkillMD, "text/markdown"},
		{"assets/label.md", raw, "application/octet-stream"},
		{"assets/logo.png", "\x89PNG", "image/png"},
		{"references/MARC.md", "# MARC\n", "text/markdown"},
	}
	if len(skill.Files) != len(want) {
		t.Fatalf("files %+v, want %d", skill.Files, len(want))
	}
	for i, w := range want {
		sum := sha256.Sum256([]byte(w.content))
		f := skill.Files[i]
		if f.Path != w.path || f.Digest != DigestPrefix+hex.EncodeToString(sum[:]) || f.Size != int64(len(w.content)) || f.MimeType != w.mime {
			t.Errorf("file %d = %+v, want %s of %d bytes, %s", i, f, w.path, len(w.content), w.mime)
		}
		if string(data[hex.EncodeToString(sum[:])]) != w.content {
			t.Errorf("the bytes of %s are not returned under its digest", w.path)
		}
	}
	if err := Validate(&Config{Transport: TransportStreamableHTTP, ContentDir: "/content", AgentSkills: []AgentSkill{skill}}); err != nil {
		t.Errorf("the skill read does not pass the contract: %v", err)
	}
}

// Each rule a ConfigMap skill passes refuses a folder that breaks it, with a message
// that names the file and the rule.
func TestReadSkillDirRefusesWhatBreaksARule(t *testing.T) {
	cases := map[string]struct {
		setup func(t *testing.T, dir string)
		want  string
	}{
		"no SKILL.md": {func(t *testing.T, dir string) { write(t, dir, "README.md", "x") }, "no file SKILL.md"},
		"name differs": {func(t *testing.T, dir string) {
			write(t, dir, "SKILL.md", strings.Replace(dirSkillMD, "name: cataloguing", "name: shelving", 1))
		}, `name "shelving" must equal the skill directory's name "cataloguing"`},
		"no description": {func(t *testing.T, dir string) {
			write(t, dir, "SKILL.md", "---\nname: cataloguing\n---\n")
		}, "no description"},
		"no frontmatter": {func(t *testing.T, dir string) { write(t, dir, "SKILL.md", "# just text\n") }, "first line must be ---"},
		"an alias in the frontmatter": {func(t *testing.T, dir string) {
			write(t, dir, "SKILL.md", aliasBomb(3))
		}, "file SKILL.md: SKILL.md frontmatter: line 3: YAML anchors and aliases are not allowed"},
		"symlinked file": {func(t *testing.T, dir string) {
			write(t, dir, "SKILL.md", dirSkillMD)
			symlink(t, "/etc/passwd", filepath.Join(dir, "passwd"))
		}, "passwd is a symbolic link"},
		"symlinked folder": {func(t *testing.T, dir string) {
			write(t, dir, "SKILL.md", dirSkillMD)
			symlink(t, "/etc", filepath.Join(dir, "references"))
		}, "references is a symbolic link"},
		"named pipe": {func(t *testing.T, dir string) {
			write(t, dir, "SKILL.md", dirSkillMD)
			if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
				t.Skip("mkfifo:", err)
			}
		}, "pipe is not a regular file"},
		"too many files": {func(t *testing.T, dir string) {
			write(t, dir, "SKILL.md", dirSkillMD)
			for i := range MaxSkillFiles {
				write(t, dir, fmt.Sprintf("refs/%03d.md", i), "x")
			}
		}, "more than the 512 files"},
		"too large": {func(t *testing.T, dir string) {
			write(t, dir, "SKILL.md", dirSkillMD)
			f, err := os.Create(filepath.Join(dir, "big.bin"))
			if err == nil {
				err = f.Truncate(MaxSkillBytes + 1) // sparse: costs no disk
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
		}, "more than the 16777216 bytes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			_, data, err := ReadSkillDir(dir, "library/cataloguing")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadSkillDir = %v, want an error containing %q", err, tc.want)
			}
			if data != nil {
				t.Errorf("a refused skill returns no bytes")
			}
		})
	}
	if _, _, err := ReadSkillDir(filepath.Join(t.TempDir(), "absent"), "cataloguing"); err == nil {
		t.Error("a folder that is not there is refused")
	}
}

func write(t *testing.T, dir, p, data string) {
	t.Helper()
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// The config's imageSkills need a valid, unused path and a clean absolute folder.
func TestValidateImageSkills(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	cfgWith := func(images ...ImageSkill) *Config {
		return &Config{Transport: TransportStreamableHTTP, ContentDir: "/content", ImageSkills: images, AgentSkills: []AgentSkill{{
			Path: "taken", Frontmatter: []byte(`{"name":"taken","description":"d"}`), Files: []SkillFile{{Path: "SKILL.md", Digest: digest, Size: 1}},
		}}}
	}
	if err := Validate(cfgWith(ImageSkill{Path: "library/cataloguing", Dir: "/var/lib/cantus/skill-images/0/skills/cataloguing"})); err != nil {
		t.Fatalf("a valid image skill is refused: %v", err)
	}
	for want, img := range map[string]ImageSkill{
		"already used by agentSkills[0]": {Path: "taken", Dir: "/x"},
		"lowercase letters":              {Path: "Cataloguing", Dir: "/x"},
		"clean absolute path":            {Path: "cataloguing", Dir: "relative/dir"},
	} {
		if err := Validate(cfgWith(img)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: Validate = %v, want an error containing %q", img, err, want)
		}
	}
	if err := Validate(cfgWith(ImageSkill{Path: "a", Dir: "/a"}, ImageSkill{Path: "a", Dir: "/b"})); err == nil || !strings.Contains(err.Error(), "already used by imageSkills[0]") {
		t.Errorf("a path used twice: Validate = %v", err)
	}
}

// A folder of more entries than a skill can use is refused after reading a bounded
// number of them, not listed in full.
func TestReadSkillDirBoundsTheWalk(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "SKILL.md", dirSkillMD)
	for i := range maxSkillDirEntries {
		if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("empty-%04d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := ReadSkillDir(dir, "cataloguing"); err == nil || !strings.Contains(err.Error(), "more than 2048 files and folders") {
		t.Fatalf("ReadSkillDir = %v, want the walk refused", err)
	}
}
