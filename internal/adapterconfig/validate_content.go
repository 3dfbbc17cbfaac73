package adapterconfig

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/yosida95/uritemplate/v3"
)

// skillNamePattern is the Agent Skills name rule: lowercase letters and digits in
// groups joined by single hyphens (no leading, trailing or doubled hyphen).
var skillNamePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// digestPattern is a well-formed digest.
var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidDigest says whether d is "sha256:" and 64 lowercase hex digits.
func ValidDigest(d string) bool { return digestPattern.MatchString(d) }

// DigestHex is the 64 hex digits of a valid digest: the file's name in ContentDir.
func DigestHex(d string) string { return strings.TrimPrefix(d, DigestPrefix) }

// SkillURI is the URI of a file of the skill at skillPath.
func SkillURI(skillPath, filePath string) string {
	return SkillURIScheme + skillPath + "/" + filePath
}

// ParseTemplate parses a template of a backend, prompt or resource:
// missingkey=error turns a forgotten argument into an error instead of "<no value>".
func ParseTemplate(name, text string) (*template.Template, error) {
	return parseToolTemplate(name, text)
}

// validateContent checks the skills, resources, resource templates and prompts of cfg.
func validateContent(cfg *Config) []error {
	var errs []error
	errs = append(errs, validateSkills(cfg.AgentSkills)...)
	errs = append(errs, validateImageSkills(cfg.ImageSkills, cfg.AgentSkills)...)
	errs = append(errs, validateResources(cfg.Resources)...)
	errs = append(errs, validateResourceTemplates(cfg.ResourceTemplates)...)
	errs = append(errs, validatePrompts(cfg.Prompts)...)
	errs = append(errs, validateImported(cfg.Imported)...)
	if cfg.ContentDir == "" && needsContentDir(cfg) {
		errs = append(errs, fmt.Errorf("contentDir is empty, but skills or resources name content by digest: set the folder that holds it"))
	}
	if total := contentBytes(cfg); total > MaxContentBytes {
		errs = append(errs, fmt.Errorf("the skills and resources hold %d bytes together, more than the %d an adapter serves", total, MaxContentBytes))
	}
	errs = append(errs, validateRuleKinds(cfg.Auth)...)
	return errs
}

func needsContentDir(cfg *Config) bool {
	if len(cfg.AgentSkills) > 0 {
		return true
	}
	for i := range cfg.Resources {
		if cfg.Resources[i].Content != nil {
			return true
		}
	}
	return false
}

// contentBytes is what cfg asks the adapter to hold from ContentDir; a file shared by
// digest counts once.
func contentBytes(cfg *Config) int64 {
	seen := map[string]bool{}
	var total int64
	add := func(digest string, size int64) {
		if !seen[digest] && size > 0 {
			seen[digest] = true
			total += size
		}
	}
	for _, s := range cfg.AgentSkills {
		for _, f := range s.Files {
			add(f.Digest, f.Size)
		}
	}
	for _, r := range cfg.Resources {
		if r.Content != nil {
			add(r.Content.Digest, r.Content.Size)
		}
	}
	return total
}

func validateRuleKinds(auth *AuthConfig) []error {
	if auth == nil || auth.Authorization == nil {
		return nil
	}
	var errs []error
	for i, r := range auth.Authorization.Rules {
		if len(r.Tools)+len(r.Prompts)+len(r.Resources)+len(r.Skills) == 0 {
			errs = append(errs, fmt.Errorf("authorization rule %d names nothing it allows: set tools, prompts, resources or skills", i+1))
		}
	}
	return errs
}

// validateSkills checks the Agent Skills rules and the Skills extension's limits.
func validateSkills(skills []AgentSkill) []error {
	var errs []error
	firstIndexOf := map[string]int{}
	digestOf := map[string]string{} // file URI → digest, across skills (nested skills share files)
	for i := range skills {
		s := &skills[i]
		if first, seen := firstIndexOf[s.Path]; seen {
			errs = append(errs, fmt.Errorf("agentSkills[%d] %q: the path is already used by agentSkills[%d]: skill paths must be unique", i, s.Path, first))
		} else {
			firstIndexOf[s.Path] = i
		}
		for _, p := range skillProblems(s) {
			errs = append(errs, fmt.Errorf("agentSkills[%d] %q: %s", i, ClipName(s.Path), p))
		}
		for _, f := range s.Files {
			uri := SkillURI(s.Path, f.Path)
			if d, seen := digestOf[uri]; seen && d != f.Digest {
				errs = append(errs, fmt.Errorf("agentSkills[%d] %q: file %s is also a file of another skill with other content", i, ClipName(s.Path), uri))
			}
			digestOf[uri] = f.Digest
		}
	}
	return errs
}

// validateImageSkills checks what the config says of skills read from folders: a valid
// path used by no other skill, and an absolute folder. Their files are checked when the
// adapter reads them.
func validateImageSkills(images []ImageSkill, skills []AgentSkill) []error {
	var errs []error
	used := map[string]string{}
	for i := range skills {
		used[skills[i].Path] = fmt.Sprintf("agentSkills[%d]", i)
	}
	for i, s := range images {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("imageSkills[%d] %q: %s", i, ClipName(s.Path), fmt.Sprintf(format, args...)))
		}
		if _, problem := skillName(s.Path); problem != "" {
			fail("%s", problem)
		}
		if other, seen := used[s.Path]; seen {
			fail("the path is already used by %s: skill paths must be unique", other)
		} else {
			used[s.Path] = fmt.Sprintf("imageSkills[%d]", i)
		}
		if !path.IsAbs(s.Dir) || path.Clean(s.Dir) != s.Dir {
			fail("dir %q must be a clean absolute path", ClipName(s.Dir))
		}
	}
	return errs
}

// skillProblems lists what is wrong with one skill.
func skillProblems(s *AgentSkill) []string {
	var problems []string
	name, pathProblem := skillName(s.Path)
	if pathProblem != "" {
		problems = append(problems, pathProblem)
	}
	problems = append(problems, frontmatterProblems(s.Frontmatter, name)...)
	problems = append(problems, skillFileProblems(s.Files)...)
	return problems
}

// skillName returns the last segment of a skill path and what is wrong with the path.
func skillName(p string) (string, string) {
	if p == "" {
		return "", "path is empty: give at least the skill's name"
	}
	if strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return "", "path must not start or end with /"
	}
	segments := strings.Split(p, "/")
	for _, seg := range segments {
		if problem := segmentProblem(seg); problem != "" {
			return "", "path " + problem
		}
	}
	name := segments[len(segments)-1]
	switch {
	case len(name) > MaxSkillNameLength:
		return name, fmt.Sprintf("name %q is longer than %d characters", ClipName(name), MaxSkillNameLength)
	case !skillNamePattern.MatchString(name):
		return name, fmt.Sprintf("name %q (the path's last segment) must be lowercase letters, digits and single hyphens, not starting or ending with one", ClipName(name))
	}
	return name, ""
}

// segmentProblem says what is wrong with one segment of a skill or file path.
func segmentProblem(seg string) string {
	switch {
	case seg == "":
		return "has an empty segment (//)"
	case seg == "." || seg == "..":
		return fmt.Sprintf("has a %q segment", seg)
	case strings.ContainsAny(seg, "\\?#%\x00") || !utf8.ValidString(seg):
		return fmt.Sprintf("segment %q holds a character a URI path cannot carry as is (\\ ? # %% or NUL)", ClipName(seg))
	case strings.TrimSpace(seg) != seg:
		return fmt.Sprintf("segment %q starts or ends with white space", ClipName(seg))
	}
	return ""
}

// frontmatterProblems checks the frontmatter object's name and description.
func frontmatterProblems(raw json.RawMessage, name string) []string {
	var fm map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fm); err != nil || fm == nil {
		return []string{"frontmatter is not a JSON object (SKILL.md's YAML frontmatter)"}
	}
	var problems []string
	var fmName, description string
	if json.Unmarshal(fm["name"], &fmName) != nil || fmName == "" {
		problems = append(problems, "SKILL.md frontmatter has no name (a string)")
	} else if name != "" && fmName != name {
		problems = append(problems, fmt.Sprintf("SKILL.md frontmatter name %q must equal the skill directory's name %q", ClipName(fmName), name))
	}
	if json.Unmarshal(fm["description"], &description) != nil || strings.TrimSpace(description) == "" {
		problems = append(problems, "SKILL.md frontmatter has no description (a non-empty string)")
	} else if n := utf8.RuneCountInString(description); n > MaxSkillDescriptionLength {
		problems = append(problems, fmt.Sprintf("SKILL.md frontmatter description has %d characters, more than %d", n, MaxSkillDescriptionLength))
	}
	return problems
}

// skillFileProblems checks a skill's file list: SKILL.md present, paths relative and
// unique, digests well-formed, within the limits.
func skillFileProblems(files []SkillFile) []string {
	var problems []string
	if len(files) > MaxSkillFiles {
		problems = append(problems, fmt.Sprintf("%d files, more than the %d a skill may have", len(files), MaxSkillFiles))
	}
	seen := map[string]bool{}
	var total int64
	for _, f := range files {
		if p := filePathProblem(f.Path); p != "" {
			problems = append(problems, fmt.Sprintf("file %q: %s", ClipName(f.Path), p))
		}
		if seen[f.Path] {
			problems = append(problems, fmt.Sprintf("file %q is listed twice", ClipName(f.Path)))
		}
		seen[f.Path] = true
		if !ValidDigest(f.Digest) {
			problems = append(problems, fmt.Sprintf("file %q: digest %q must be sha256: and 64 lowercase hex digits", ClipName(f.Path), ClipName(f.Digest)))
		}
		if f.Size < 0 {
			problems = append(problems, fmt.Sprintf("file %q: size %d is negative", ClipName(f.Path), f.Size))
		}
		total += f.Size
	}
	if !seen[SkillManifestFile] {
		problems = append(problems, "no SKILL.md: every skill has one at its root")
	}
	if total > MaxSkillBytes {
		problems = append(problems, fmt.Sprintf("files total %d bytes, more than the %d a skill may hold", total, MaxSkillBytes))
	}
	return problems
}

func filePathProblem(p string) string {
	if p == "" {
		return "path is empty"
	}
	if strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return "path must be relative to the skill's directory and name a file (no leading or trailing /)"
	}
	for _, seg := range strings.Split(p, "/") {
		if problem := segmentProblem(seg); problem != "" {
			return "path " + problem
		}
	}
	return ""
}

// validateResources checks static resources: unique, absolute URIs outside skill://,
// exactly one content source.
func validateResources(resources []Resource) []error {
	return validateEach("resources", resources, func(r *Resource) string { return r.URI },
		"the URI is already used by resources[%d]: resource URIs must be unique", checkResource)
}

func checkResource(r *Resource, fail failFunc) {
	if p := resourceURIProblem(r.URI); p != "" {
		fail("%s", p)
	}
	checkListing(r.Name, r.Annotations, fail)
	switch {
	case (r.Text == nil) == (r.Content == nil):
		fail("set exactly one of text and content")
	case r.Text != nil && len(*r.Text) > MaxInlineTextBytes:
		fail("inline text has %d bytes, more than %d: store it as content", len(*r.Text), MaxInlineTextBytes)
	case r.Content != nil && !ValidDigest(r.Content.Digest):
		fail("content.digest %q must be sha256: and 64 lowercase hex digits", ClipName(r.Content.Digest))
	case r.Content != nil && r.Content.Size < 0:
		fail("content.size %d is negative", r.Content.Size)
	}
}

// failFunc reports a problem of the item being checked.
type failFunc func(format string, args ...any)

// validateEach checks a list of items with keys that must be unique (URIs, names):
// every problem is reported as `field[i] "key": problem`, the first being a key an
// earlier item has already (duplicate says so, given that item's index); check finds
// the others.
func validateEach[T any](field string, items []T, key func(*T) string, duplicate string, check func(*T, failFunc)) []error {
	var errs []error
	firstIndexOf := map[string]int{}
	for i := range items {
		item := &items[i]
		k := key(item)
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s[%d] %q: %s", field, i, ClipName(k), fmt.Sprintf(format, args...)))
		}
		if first, seen := firstIndexOf[k]; seen {
			fail(duplicate, first)
		} else {
			firstIndexOf[k] = i
		}
		check(item, fail)
	}
	return errs
}

func resourceURIProblem(uri string) string {
	u, err := url.Parse(uri)
	switch {
	case err != nil || u.Scheme == "" || len(uri) > 2048:
		return "uri must be an absolute URI with a scheme (e.g. docs://team/guide), at most 2048 characters"
	case strings.HasPrefix(uri, SkillURIScheme):
		return "skill:// URIs are the files of agentSkills: serve the file as a skill instead"
	}
	return ""
}

// checkListing checks what resources and templates alike are listed with: a name and
// annotations a client can read.
func checkListing(name string, annotations *ResourceAnnotations, fail failFunc) {
	if strings.TrimSpace(name) == "" {
		fail("name is empty")
	}
	for _, p := range annotationProblems(annotations) {
		fail("%s", p)
	}
}

func annotationProblems(a *ResourceAnnotations) []string {
	if a == nil {
		return nil
	}
	var problems []string
	for _, who := range a.Audience {
		if who != RoleUser && who != RoleAssistant {
			problems = append(problems, fmt.Sprintf("annotations.audience %q must be user or assistant", ClipName(who)))
		}
	}
	if a.Priority != nil && (*a.Priority < 0 || *a.Priority > 1) {
		problems = append(problems, fmt.Sprintf("annotations.priority %v must be between 0 and 1", *a.Priority))
	}
	if a.LastModified != "" {
		if _, err := time.Parse(time.RFC3339, a.LastModified); err != nil {
			problems = append(problems, fmt.Sprintf("annotations.lastModified %q must be an RFC 3339 time", ClipName(a.LastModified)))
		}
	}
	return problems
}

// CompileURITemplate parses an RFC 6570 URI template as mcp-go matches them.
func CompileURITemplate(raw string) (*uritemplate.Template, error) {
	t, err := uritemplate.New(raw)
	if err != nil {
		return nil, fmt.Errorf("uriTemplate %q is not an RFC 6570 template: %w", ClipName(raw), err)
	}
	return t, nil
}

func validateResourceTemplates(templates []ResourceTemplate) []error {
	return validateEach("resourceTemplates", templates, func(t *ResourceTemplate) string { return t.URITemplate },
		"the uriTemplate is already used by resourceTemplates[%d]", checkResourceTemplate)
}

func checkResourceTemplate(t *ResourceTemplate, fail failFunc) {
	if _, err := CompileURITemplate(t.URITemplate); err != nil {
		fail("%v", err)
	} else if strings.HasPrefix(t.URITemplate, SkillURIScheme) {
		fail("skill:// URIs are the files of agentSkills")
	}
	checkListing(t.Name, t.Annotations, fail)
	switch {
	case (t.Template == nil) == (t.HTTP == nil):
		fail("set exactly one backend: template or http")
	case t.Template != nil:
		if _, err := ParseTemplate(t.Name, t.Template.Text); err != nil {
			fail("template does not parse: %v", err)
		}
	default:
		for _, p := range httpBackendProblems(t.HTTP) {
			fail("%s", p)
		}
	}
}

func validatePrompts(prompts []Prompt) []error {
	return validateEach("prompts", prompts, func(p *Prompt) string { return p.Name },
		"the name is already used by prompts[%d]: prompt names must be unique", func(p *Prompt, fail failFunc) {
			for _, problem := range promptProblems(p) {
				fail("%s", problem)
			}
		})
}

func promptProblems(p *Prompt) []string {
	var problems []string
	if strings.TrimSpace(p.Name) == "" {
		problems = append(problems, "name is empty")
	}
	args := map[string]bool{}
	for _, a := range p.Arguments {
		if strings.TrimSpace(a.Name) == "" {
			problems = append(problems, "an argument has no name")
		}
		if args[a.Name] {
			problems = append(problems, fmt.Sprintf("argument %q is listed twice", ClipName(a.Name)))
		}
		args[a.Name] = true
	}
	switch {
	case (len(p.Messages) == 0) == (p.HTTP == nil):
		problems = append(problems, "set exactly one of messages and http")
	case p.HTTP != nil:
		problems = append(problems, httpBackendProblems(p.HTTP)...)
	}
	for i, m := range p.Messages {
		for _, problem := range messageProblems(p.Name, m) {
			problems = append(problems, fmt.Sprintf("messages[%d]: %s", i, problem))
		}
	}
	return problems
}

func messageProblems(name string, m PromptMessage) []string {
	var problems []string
	if m.Role != RoleUser && m.Role != RoleAssistant {
		problems = append(problems, fmt.Sprintf("role %q must be user or assistant", ClipName(m.Role)))
	}
	c := m.Content
	parses := func(what, text string) {
		if _, err := ParseTemplate(name, text); err != nil {
			problems = append(problems, fmt.Sprintf("%s does not parse: %v", what, err))
		}
	}
	switch c.Type {
	case ContentText:
		parses("content.text", c.Text)
	case ContentImage, ContentAudio:
		if _, err := base64.StdEncoding.DecodeString(c.Data); err != nil || c.Data == "" {
			problems = append(problems, "content.data must be non-empty base64")
		}
		if c.MimeType == "" {
			problems = append(problems, "content.mimeType is empty")
		}
	case ContentResource:
		r := c.Resource
		if r == nil {
			problems = append(problems, "content.resource is missing")
			break
		}
		parses("content.resource.uri", r.URI)
		switch {
		case (r.Text == nil) == (r.Blob == nil):
			problems = append(problems, "content.resource: set exactly one of text and blob")
		case r.Text != nil:
			parses("content.resource.text", *r.Text)
		default:
			if _, err := base64.StdEncoding.DecodeString(*r.Blob); err != nil {
				problems = append(problems, "content.resource.blob must be base64")
			}
		}
	default:
		problems = append(problems, fmt.Sprintf("content.type %q must be text, image, audio or resource", ClipName(c.Type)))
	}
	return problems
}

// SkillDirectories are the directory paths of a skill's files, relative to the skill's
// root ("" is the root itself), each once.
func SkillDirectories(files []SkillFile) []string {
	seen := map[string]bool{"": true}
	dirs := []string{""}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	return dirs
}
