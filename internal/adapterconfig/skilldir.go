package adapterconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// ImageSkill is an Agent Skill whose files the adapter reads from a folder when it loads
// the config: on the kubernetes runtime, an image volume the operator cannot read. The
// adapter checks it with the rules a ConfigMap skill passes in the operator (ReadSkillDir)
// and leaves out, logged and counted, one that breaks them rather than refuse the config.
type ImageSkill struct {
	// Path is the skill's path, as AgentSkill.Path: its last segment is the skill's name
	// and must equal the frontmatter's name.
	Path string `json:"path"`
	// Dir is the absolute folder holding the skill (SKILL.md at its root).
	Dir string `json:"dir"`
	// Source names where Dir comes from (the image reference), for logs.
	Source string `json:"source,omitempty"`
}

// maxSkillDirEntries bounds the entries ReadSkillDir visits (files and folders), so a
// hostile image of millions of empty folders costs a bounded walk.
const maxSkillDirEntries = 4 * MaxSkillFiles

// ReadSkillDir reads the skill whose files are under dir and checks them with the rules
// every skill passes: regular files and folders only (no symlinks, devices or pipes), at
// most MaxSkillFiles files and MaxSkillBytes bytes, file paths without empty, . or ..
// segments, a SKILL.md whose frontmatter has a name equal to skillPath's last segment
// and a description. It returns the skill as the config would name it (files by digest)
// and the bytes of its files by the 64 hex digits of their digest; an error names the
// file and the rule.
func ReadSkillDir(dir, skillPath string) (AgentSkill, map[string][]byte, error) {
	skill := AgentSkill{Path: skillPath}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return skill, nil, fmt.Errorf("open the skill's folder %s: %w", dir, err)
	}
	defer func() { _ = root.Close() }()
	found, err := skillDirFiles(root)
	if err != nil {
		return skill, nil, err
	}
	data := make(map[string][]byte, len(found))
	var manifest []byte
	for _, f := range found {
		b, err := readSkillFile(root, f.path, f.size)
		if err != nil {
			return skill, nil, err
		}
		sum := sha256.Sum256(b)
		hexDigest := hex.EncodeToString(sum[:])
		data[hexDigest] = b
		skill.Files = append(skill.Files, SkillFile{
			Path: f.path, Digest: DigestPrefix + hexDigest, Size: int64(len(b)), MimeType: imageFileMimeType(f.path, b),
		})
		if f.path == SkillManifestFile {
			manifest = b
		}
	}
	if manifest == nil {
		return skill, nil, errors.New("no file SKILL.md at the root of the skill's folder: every agent skill has one")
	}
	fm, err := SkillFrontmatter(manifest)
	if err != nil {
		return skill, nil, fmt.Errorf("file SKILL.md: %w", err)
	}
	skill.Frontmatter = fm
	if problems := skillProblems(&skill); len(problems) > 0 {
		return skill, nil, errors.New(strings.Join(problems, "; "))
	}
	return skill, data, nil
}

// skillDirFile is a regular file found in a skill's folder.
type skillDirFile struct {
	path string
	size int64
}

// skillDirFiles lists the regular files under root, sorted by path, refusing what a
// skill may not hold before reading any of it. Each folder is read with a bound on its
// entries, so a hostile image's folder of millions of entries costs a bounded read.
func skillDirFiles(root *os.Root) ([]skillDirFile, error) {
	var files []skillDirFile
	var total int64
	entries := 0
	for dirs := []string{"."}; len(dirs) > 0; {
		dir := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		list, err := readDirAtMost(root, dir, maxSkillDirEntries-entries)
		if err != nil {
			return nil, err
		}
		entries += len(list)
		for _, d := range list {
			p := path.Join(dir, d.Name())
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				return nil, fmt.Errorf("%s is a symbolic link: a skill's files must be regular files in its folder", p)
			case d.IsDir():
				dirs = append(dirs, p)
				continue
			case !d.Type().IsRegular():
				return nil, fmt.Errorf("%s is not a regular file (%s): a skill holds only files and folders", p, d.Type())
			}
			if problem := filePathProblem(p); problem != "" {
				return nil, fmt.Errorf("file %q: %s", ClipName(p), problem)
			}
			info, err := d.Info()
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			total += info.Size()
			files = append(files, skillDirFile{path: p, size: info.Size()})
			switch {
			case len(files) > MaxSkillFiles:
				return nil, fmt.Errorf("more than the %d files a skill may have", MaxSkillFiles)
			case total > MaxSkillBytes:
				return nil, fmt.Errorf("its files hold more than the %d bytes a skill may hold", MaxSkillBytes)
			}
		}
	}
	slices.SortFunc(files, func(a, b skillDirFile) int { return strings.Compare(a.path, b.path) })
	return files, nil
}

// readDirAtMost reads the entries of dir, refusing a folder with more than n.
func readDirAtMost(root *os.Root, dir string, n int) ([]fs.DirEntry, error) {
	f, err := root.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	defer func() { _ = f.Close() }()
	list, err := f.ReadDir(n + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	if len(list) > n {
		return nil, fmt.Errorf("more than %d files and folders: a skill has at most %d files", maxSkillDirEntries, MaxSkillFiles)
	}
	return list, nil
}

// readSkillFile reads one file through root (which refuses to leave the folder), and
// refuses a file whose size changed since it was listed: the bounds were checked on
// the listed sizes.
func readSkillFile(root *os.Root, p string, size int64) ([]byte, error) {
	f, err := root.Open(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if int64(len(b)) != size {
		return nil, fmt.Errorf("%s changed while it was read", p)
	}
	return b, nil
}

// imageFileMimeType is SkillFileMimeType for a file read from a folder, which has no
// data/binaryData split: bytes that are not UTF-8 are binary, and are never given a text
// type, which would serve them as text and change them.
func imageFileMimeType(p string, b []byte) string {
	binary := !utf8.Valid(b)
	t := SkillFileMimeType(p, binary)
	if _, known := textTypes[strings.ToLower(path.Ext(p))]; binary && (known || strings.HasPrefix(t, "text/") || strings.HasSuffix(t, "+xml") || strings.HasSuffix(t, "+json")) {
		return "application/octet-stream"
	}
	return t
}

// textTypes are served as text by extension where Go's table says nothing or says
// something less useful to an agent.
var textTypes = map[string]string{
	".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain",
	".json": "application/json", ".yaml": "application/yaml", ".yml": "application/yaml",
	".py": "text/x-python", ".sh": "application/x-sh", ".js": "text/javascript",
	".ts": "text/x-typescript", ".csv": "text/csv", ".html": "text/html", ".xml": "application/xml",
}

// SkillFileMimeType guesses a file's media type from its extension; a data key (text)
// with an unknown extension is text/plain, a binaryData key (binary)
// application/octet-stream.
func SkillFileMimeType(p string, binary bool) string {
	ext := strings.ToLower(path.Ext(p))
	if t, ok := textTypes[ext]; ok {
		return t
	}
	if t, _, err := mime.ParseMediaType(mime.TypeByExtension(ext)); err == nil && t != "" {
		return t
	}
	if binary {
		return "application/octet-stream"
	}
	return "text/plain"
}
