package content

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Set is everything a config serves besides tools: its skills, resources,
// resource templates and prompts, with every file's bytes read from ContentDir and
// checked against its digest, held in memory (bounded by adapterconfig's limits).
// Reload swaps the whole set; handlers look things up in the current one.
type Set struct {
	skills     []*servedSkill // by URI
	skillByURI map[string]*servedSkill
	// files are the skill files and the static resources, by URI.
	files map[string]*servedFile
	// fileURIs are the keys of files, sorted: the resources/list order.
	fileURIs []string
	dirs     map[string]*servedDir
	// templates and prompts are in config order.
	templates    []*servedTemplate
	prompts      []*servedPrompt
	promptByName map[string]*servedPrompt
	// leftOut are the image skills not served, each with why.
	leftOut []leftOutSkill
	// imported is what a gateway re-exports of its imports besides tools.
	imported *importedSet
}

// leftOutSkill is an image skill the adapter does not serve.
type leftOutSkill struct {
	skill adapterconfig.ImageSkill
	err   error
}

// servedSkill is one skill, its skills/list entry encoded once.
type servedSkill struct {
	path string
	uri  string // of its SKILL.md
	// entry is the Skill entry: uri, frontmatter (verbatim), resources.
	entry json.RawMessage
}

// servedFile is a skill file or a static resource.
type servedFile struct {
	// listing is its resources/list entry.
	listing mcp.Resource
	// body is what resources/read answers, made once at load rather than per read: the
	// text, or the base64 of a blob.
	body string
	// text serves body as text, otherwise as a blob.
	text bool
	// skillPath is the skill a skill file belongs to; "" for a resource.
	skillPath string
}

func (f *servedFile) setBody(data []byte, text bool) {
	f.text = text
	if text {
		f.body = string(data)
	} else {
		f.body = base64.StdEncoding.EncodeToString(data)
	}
}

// servedDir is a directory of a skill: its direct children, sorted by URI.
type servedDir struct {
	skillPath string
	children  []mcp.Resource
}

type servedTemplate struct {
	adapterconfig.ResourceTemplate
	matcher  *uritemplate.Template
	template *template.Template
}

type servedPrompt struct {
	adapterconfig.Prompt
	// texts are the parsed templates of the messages, by "i" (content.text),
	// "i.uri" and "i.text" (an embedded resource's).
	texts map[string]*template.Template
}

// servesResources says whether the resources capability is declared.
func (c *Set) servesResources() bool {
	return len(c.files) > 0 || len(c.templates) > 0 || len(c.imported.resources) > 0 || len(c.imported.templates) > 0
}

// Load builds the content set of a valid cfg, reading every file from
// ContentDir: a file that is missing, of another size or another digest fails the load.
func Load(cfg *adapterconfig.Config) (*Set, error) {
	c := &Set{
		skillByURI:   map[string]*servedSkill{},
		files:        map[string]*servedFile{},
		dirs:         map[string]*servedDir{},
		promptByName: map[string]*servedPrompt{},
	}
	store := contentReader{dir: cfg.ContentDir, read: map[string][]byte{}}
	imported, err := loadImported(cfg.Imported)
	if err != nil {
		return nil, err
	}
	c.imported = imported
	for i := range cfg.AgentSkills {
		if err := c.addSkill(&cfg.AgentSkills[i], &store); err != nil {
			return nil, err
		}
	}
	for i := range cfg.Resources {
		if err := c.addResource(&cfg.Resources[i], &store); err != nil {
			return nil, err
		}
	}
	c.addImageSkills(cfg, &store)
	for i := range cfg.ResourceTemplates {
		t := cfg.ResourceTemplates[i]
		tmpl, err := prepareTemplate(t)
		if err != nil {
			return nil, err
		}
		matcher, err := adapterconfig.CompileURITemplate(t.URITemplate)
		if err != nil {
			return nil, err
		}
		c.templates = append(c.templates, &servedTemplate{ResourceTemplate: t, matcher: matcher, template: tmpl})
	}
	for i := range cfg.Prompts {
		p, err := preparePrompt(cfg.Prompts[i])
		if err != nil {
			return nil, err
		}
		c.prompts = append(c.prompts, p)
		c.promptByName[p.Name] = p
	}
	for _, skill := range c.imported.skills {
		if c.skillByURI[skill.uri] == nil { // the server's own wins
			c.skills = append(c.skills, skill)
			c.skillByURI[skill.uri] = skill
			c.addImportedDirectories(skill.path)
		}
	}
	slices.SortFunc(c.skills, func(a, b *servedSkill) int { return strings.Compare(a.uri, b.uri) })
	for uri := range c.files {
		c.fileURIs = append(c.fileURIs, uri)
	}
	slices.Sort(c.fileURIs)
	for _, d := range c.dirs {
		slices.SortFunc(d.children, func(a, b mcp.Resource) int { return strings.Compare(a.URI, b.URI) })
	}
	return c, nil
}

// addImageSkills reads and serves the skills of cfg's image folders. One that breaks a
// rule, or would take the server's content past MaxContentBytes, is left out rather than
// failing the load: an image is the tenant's to build, and the operator cannot read it
// first, so what is wrong with one skill must not take the others (or the tools) away.
func (c *Set) addImageSkills(cfg *adapterconfig.Config, store *contentReader) {
	held := int64(0)
	for _, data := range store.read {
		held += int64(len(data))
	}
	for _, img := range cfg.ImageSkills {
		skill, files, err := adapterconfig.ReadSkillDir(img.Dir, img.Path)
		if err == nil {
			var size int64
			for _, f := range skill.Files {
				size += f.Size
			}
			if held+size > adapterconfig.MaxContentBytes {
				err = fmt.Errorf("its %d bytes would take the server's content past the %d bytes an adapter holds", size, adapterconfig.MaxContentBytes)
			} else {
				held += size
			}
		}
		if err == nil {
			for hexDigest, data := range files {
				store.read[adapterconfig.DigestPrefix+hexDigest] = data
			}
			err = c.addSkill(&skill, store)
		}
		if err != nil {
			c.leftOut = append(c.leftOut, leftOutSkill{skill: img, err: err})
		}
	}
}

// contentReader reads content-addressed files once each.
type contentReader struct {
	dir  string
	read map[string][]byte
}

// bytesOf returns the bytes of digest, checked against it and size.
func (r *contentReader) bytesOf(digest string, size int64) ([]byte, error) {
	if data, ok := r.read[digest]; ok {
		return data, nil
	}
	name := filepath.Join(r.dir, adapterconfig.DigestHex(digest))
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("content %s: %w", digest, err)
	}
	defer func() { _ = f.Close() }()
	// One byte more than expected shows a longer file without reading all of it.
	data, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil {
		return nil, fmt.Errorf("content %s: read %s: %w", digest, name, err)
	}
	if int64(len(data)) != size {
		return nil, fmt.Errorf("content %s: %s holds %s bytes, the config says %d", digest, name, sizeSeen(len(data), size), size)
	}
	sum := sha256.Sum256(data)
	if got := adapterconfig.DigestPrefix + hex.EncodeToString(sum[:]); got != digest {
		return nil, fmt.Errorf("content %s: %s has digest %s", digest, name, got)
	}
	r.read[digest] = data
	return data, nil
}

func sizeSeen(n int, want int64) string {
	if int64(n) > want {
		return fmt.Sprintf("more than %d", want)
	}
	return fmt.Sprint(n)
}

// SkillResource is one file of a Skill entry.
type SkillResource struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// SkillEntry is the Skill entry of skills/list and skills/get.
type SkillEntry struct {
	URI         string          `json:"uri"`
	Frontmatter json.RawMessage `json:"frontmatter"`
	Resources   []SkillResource `json:"resources"`
}

func (c *Set) addSkill(s *adapterconfig.AgentSkill, store *contentReader) error {
	var fm struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal(s.Frontmatter, &fm); err != nil {
		return fmt.Errorf("skill %s: frontmatter: %w", s.Path, err)
	}
	entry := SkillEntry{URI: adapterconfig.SkillURI(s.Path, adapterconfig.SkillManifestFile), Frontmatter: compactJSON(s.Frontmatter)}
	for _, f := range s.Files {
		data, err := store.bytesOf(f.Digest, f.Size)
		if err != nil {
			return fmt.Errorf("skill %s, file %s: %w", s.Path, f.Path, err)
		}
		uri := adapterconfig.SkillURI(s.Path, f.Path)
		entry.Resources = append(entry.Resources, SkillResource{URI: uri, Digest: f.Digest, Size: f.Size})
		file := &servedFile{skillPath: s.Path, listing: mcp.Resource{URI: uri, Name: path.Base(f.Path), MIMEType: skillFileMimeType(f), Size: &f.Size}}
		if f.Path == adapterconfig.SkillManifestFile {
			file.listing.Name, file.listing.Description = fm.Name, fm.Description
		}
		file.setBody(data, isTextMimeType(file.listing.MIMEType))
		c.files[uri] = file
		c.addToDirectory(s.Path, f.Path, file.listing)
	}
	raw, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("skill %s: encode its entry: %w", s.Path, err)
	}
	skill := &servedSkill{path: s.Path, uri: entry.URI, entry: raw}
	c.skills = append(c.skills, skill)
	c.skillByURI[skill.uri] = skill
	return nil
}

// compactJSON drops the insignificant white space of a valid JSON value.
func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// addImportedDirectories serves resources/directory/read for the imported skill at
// skillPath from the files its remote listed with it (its skills/list entry), each
// listed as the remote lists the resource when it does.
func (c *Set) addImportedDirectories(skillPath string) {
	root := adapterconfig.SkillURIScheme + skillPath + "/"
	for uri, owner := range c.imported.skillOf {
		file, ok := strings.CutPrefix(uri, root)
		if owner != skillPath || !ok || file == "" {
			continue
		}
		listing := mcp.Resource{URI: uri, Name: path.Base(file)}
		if r := c.imported.resources[uri]; r != nil {
			listing = r.listing
		}
		c.addToDirectory(skillPath, file, listing)
	}
}

// addToDirectory lists the file in its directory and every directory above it, up to
// the skill's root, as a directory resource in its parent.
func (c *Set) addToDirectory(skillPath, filePath string, file mcp.Resource) {
	child := file
	for dir := path.Dir(filePath); ; dir = path.Dir(dir) {
		uri := adapterconfig.SkillURIScheme + skillPath
		if dir != "." {
			uri += "/" + dir
		}
		d := c.dirs[uri]
		known := d != nil
		if !known {
			d = &servedDir{skillPath: skillPath}
			c.dirs[uri] = d
		}
		if !slices.ContainsFunc(d.children, func(r mcp.Resource) bool { return r.URI == child.URI }) {
			d.children = append(d.children, child)
		}
		if dir == "." || known {
			return
		}
		child = mcp.Resource{URI: uri, Name: path.Base(dir), MIMEType: adapterconfig.MimeTypeDirectory}
	}
}

func (c *Set) addResource(r *adapterconfig.Resource, store *contentReader) error {
	file := &servedFile{listing: mcp.Resource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MimeType}}
	file.listing.Annotations = mcpAnnotations(r.Annotations)
	if r.Text != nil {
		file.body, file.text = *r.Text, true
	} else {
		data, err := store.bytesOf(r.Content.Digest, r.Content.Size)
		if err != nil {
			return fmt.Errorf("resource %s: %w", r.URI, err)
		}
		file.setBody(data, !r.Content.Binary)
		file.listing.Size = &r.Content.Size
	}
	c.files[r.URI] = file
	return nil
}

func mcpAnnotations(a *adapterconfig.ResourceAnnotations) *mcp.Annotations {
	if a == nil {
		return nil
	}
	out := &mcp.Annotations{Priority: a.Priority, LastModified: a.LastModified}
	for _, who := range a.Audience {
		out.Audience = append(out.Audience, mcp.Role(who))
	}
	return out
}

// skillFileMimeType is the file's media type: as configured, else text/markdown for
// SKILL.md (as the Skills extension asks) and what the extension says for the others.
func skillFileMimeType(f adapterconfig.SkillFile) string {
	switch {
	case f.MimeType != "":
		return f.MimeType
	case f.Path == adapterconfig.SkillManifestFile || strings.HasSuffix(f.Path, ".md"):
		return "text/markdown"
	}
	if t := mime.TypeByExtension(path.Ext(f.Path)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// isTextMimeType says whether content of that type is served as text rather than as a
// base64 blob.
func isTextMimeType(mimeType string) bool {
	mediaType, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		return false
	}
	if strings.HasPrefix(mediaType, "text/") {
		return true
	}
	switch mediaType {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml",
		"application/javascript", "application/x-sh", "application/toml":
		return true
	}
	return strings.HasSuffix(mediaType, "+json") || strings.HasSuffix(mediaType, "+xml")
}

func prepareTemplate(t adapterconfig.ResourceTemplate) (*template.Template, error) {
	if t.Template == nil {
		return nil, nil
	}
	tmpl, err := adapterconfig.ParseTemplate(t.Name, t.Template.Text)
	if err != nil {
		return nil, fmt.Errorf("resource template %s: %w", t.URITemplate, err)
	}
	return tmpl, nil
}

func preparePrompt(p adapterconfig.Prompt) (*servedPrompt, error) {
	out := &servedPrompt{Prompt: p, texts: map[string]*template.Template{}}
	parse := func(key, text string) error {
		tmpl, err := adapterconfig.ParseTemplate(p.Name, text)
		if err != nil {
			return fmt.Errorf("prompt %s, messages[%s]: %w", p.Name, key, err)
		}
		out.texts[key] = tmpl
		return nil
	}
	for i, m := range p.Messages {
		key := fmt.Sprint(i)
		var err error
		switch m.Content.Type {
		case adapterconfig.ContentText:
			err = parse(key, m.Content.Text)
		case adapterconfig.ContentResource:
			if err = parse(key+".uri", m.Content.Resource.URI); err == nil && m.Content.Resource.Text != nil {
				err = parse(key+".text", *m.Content.Resource.Text)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
