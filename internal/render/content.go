package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/definition"
)

// ContentMountPath is where the kubernetes runtime mounts the content files (the
// contract's ContentDir); the local runtime points ContentDir at a folder of its host.
const ContentMountPath = "/var/lib/cantus/content"

// ContentInputs are the ConfigMaps a SkillServer's content names, read by the caller.
type ContentInputs struct {
	// ConfigMaps by name: those found with the label cantus.dev/content=true.
	ConfigMaps map[string]*corev1.ConfigMap
	// Unlabelled are names of ConfigMaps that exist without the label.
	Unlabelled map[string]bool
}

// Content is what agentSkills, resources, resource templates and prompts add to the
// adapter config, and the bytes the config names by digest.
type Content struct {
	AgentSkills       []adapterconfig.AgentSkill
	Resources         []adapterconfig.Resource
	ResourceTemplates []adapterconfig.ResourceTemplate
	Prompts           []adapterconfig.Prompt
	// Files are the content-addressed bytes: key = 64 hex digits of their sha256.
	Files map[string][]byte
	// Skills are the status entries of the skills rendered, in spec order.
	Skills []cantusv1alpha1.ServedAgentSkill
	// ImageSkills are the skills mounted from images (kubernetes runtime).
	ImageSkills []ImageSkill
}

// ImageSkill is an agent skill whose files come from an image volume.
type ImageSkill struct {
	// Volume is the pod volume's name, MountPath where the adapter container sees it.
	Volume, MountPath string
	Source            cantusv1alpha1.SkillImageSource
	// Config is what the adapter config says of it: the skill's path and the folder
	// of the mounted image the adapter reads it from.
	Config adapterconfig.ImageSkill
}

// ContentProblem is content that cannot be served; the owner fixes it in a ConfigMap.
type ContentProblem struct {
	Reason  string
	Message string
}

// ConfigMapNames are the ConfigMaps a SkillServer's content reads, each once, sorted.
func ConfigMapNames(spec *cantusv1alpha1.SkillServerSpec) []string {
	var names []string
	for _, s := range spec.AgentSkills {
		if s.ConfigMap != nil {
			names = append(names, s.ConfigMap.Name)
		}
	}
	for _, r := range spec.Resources {
		if r.ConfigMapKeyRef != nil {
			names = append(names, r.ConfigMapKeyRef.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// RenderContent renders a SkillServer's agent skills, resources, resource templates and
// prompts, reading skill files and resource contents from in. Every problem with what
// the ConfigMaps hold is returned (naming the ConfigMap, the file and the rule), so an
// owner fixes them in one round; problems of the spec itself are left to the
// contract's validation of the whole config.
func RenderContent(ss *cantusv1alpha1.SkillServer, in ContentInputs) (Content, []ContentProblem) {
	out := Content{Files: map[string][]byte{}}
	var problems []ContentProblem
	for i := range ss.Spec.AgentSkills {
		spec := &ss.Spec.AgentSkills[i]
		if spec.Image != nil {
			out.ImageSkills = append(out.ImageSkills, imageSkill(i, spec))
			continue
		}
		skill, files, ps := renderSkill(spec, in)
		problems = append(problems, ps...)
		if len(ps) > 0 {
			continue
		}
		for k, v := range files {
			out.Files[k] = v
		}
		out.AgentSkills = append(out.AgentSkills, skill)
		out.Skills = append(out.Skills, servedSkill(spec.Name, skill))
	}
	for i := range ss.Spec.Resources {
		r, data, p := renderResource(&ss.Spec.Resources[i], in)
		if p != nil {
			problems = append(problems, *p)
			continue
		}
		if r.Content != nil {
			out.Files[adapterconfig.DigestHex(r.Content.Digest)] = data
		}
		out.Resources = append(out.Resources, r)
	}
	for i := range ss.Spec.ResourceTemplates {
		out.ResourceTemplates = append(out.ResourceTemplates, resourceTemplate(&ss.Spec.ResourceTemplates[i]))
	}
	for i := range ss.Spec.Prompts {
		out.Prompts = append(out.Prompts, prompt(&ss.Spec.Prompts[i]))
	}
	return out, problems
}

// imageSkillsMountPath is the folder under which the i-th agent skill's image is
// mounted, at <imageSkillsMountPath>/<i>.
const imageSkillsMountPath = "/var/lib/cantus/skill-images"

// imageSkill is the volume, mount and config entry of the i-th agent skill, an image.
func imageSkill(i int, spec *cantusv1alpha1.AgentSkill) ImageSkill {
	mount := path.Join(imageSkillsMountPath, strconv.Itoa(i))
	return ImageSkill{
		Volume: fmt.Sprintf("skill-image-%d", i), MountPath: mount, Source: *spec.Image,
		Config: adapterconfig.ImageSkill{Path: spec.SkillPath(), Dir: path.Join(mount, spec.Image.Path), Source: spec.Image.Reference},
	}
}

// maxStatusFrontmatter bounds the frontmatter a skill's status entry carries: 64 skills
// then add at most 256 KiB to the status.
const maxStatusFrontmatter = 4 << 10

// servedSkill is the status entry of a rendered skill.
func servedSkill(name string, skill adapterconfig.AgentSkill) cantusv1alpha1.ServedAgentSkill {
	return ServedSkillEntry(name, adapterconfig.SkillURI(skill.Path, adapterconfig.SkillManifestFile),
		SkillManifestDigest(skill.Path, skill.Frontmatter, skill.Files), skill.Frontmatter)
}

// ServedSkillEntry is the status entry of a skill: from what the operator rendered, or,
// for a skill from an image, from the pods' skills/list entry.
func ServedSkillEntry(name, uri, digest string, frontmatter json.RawMessage) cantusv1alpha1.ServedAgentSkill {
	served := cantusv1alpha1.ServedAgentSkill{URI: uri, Name: name, Digest: digest}
	var fm struct {
		Description string `json:"description"`
	}
	// The contract's validation (the operator's, or the adapter's for an image) has
	// checked that the frontmatter is an object with a string description of at most
	// 1024 characters; a pod that lists something else gets no description.
	if json.Unmarshal(frontmatter, &fm) == nil && utf8.RuneCountInString(fm.Description) <= adapterconfig.MaxSkillDescriptionLength {
		served.Description = fm.Description
	}
	if len(frontmatter) <= maxStatusFrontmatter && json.Valid(frontmatter) {
		served.Frontmatter = &runtime.RawExtension{Raw: frontmatter}
	} else {
		served.FrontmatterClipped = true
	}
	return served
}

// Apply puts the content into cfg, with contentDir as the folder of its files.
func (c *Content) Apply(cfg *adapterconfig.Config, contentDir string) {
	cfg.AgentSkills, cfg.Resources, cfg.ResourceTemplates, cfg.Prompts = c.AgentSkills, c.Resources, c.ResourceTemplates, c.Prompts
	cfg.ImageSkills = nil
	for _, img := range c.ImageSkills {
		cfg.ImageSkills = append(cfg.ImageSkills, img.Config)
	}
	if len(c.Files) > 0 {
		cfg.ContentDir = contentDir
	}
}

// SkillManifestDigest is the digest of a skill's manifest: "sha256:" and the item
// digest (definition.SkillKind) of SkillManifest. Any change to a file's bytes or name,
// to the set of files or to the frontmatter changes it; the status shows it, and the
// verification of the pods computes it again from what they list.
func SkillManifestDigest(skillPath string, frontmatter json.RawMessage, files []adapterconfig.SkillFile) string {
	digest, err := definition.SkillKind.Digest(SkillManifest(skillPath, frontmatter, files))
	if err != nil {
		panic("render: digest a skill's manifest: " + err.Error())
	}
	return adapterconfig.DigestPrefix + digest
}

// SkillManifest is what the digest of a skill covers of its skills/list entry: the URI
// of its SKILL.md, its frontmatter and its resources (uri, digest, size) sorted by uri.
func SkillManifest(skillPath string, frontmatter json.RawMessage, files []adapterconfig.SkillFile) json.RawMessage {
	type resource struct {
		URI    string `json:"uri"`
		Digest string `json:"digest"`
		Size   int64  `json:"size"`
	}
	resources := make([]resource, 0, len(files))
	for _, f := range files {
		resources = append(resources, resource{adapterconfig.SkillURI(skillPath, f.Path), f.Digest, f.Size})
	}
	slices.SortFunc(resources, func(a, b resource) int { return strings.Compare(a.URI, b.URI) })
	entry, err := json.Marshal(map[string]any{
		"uri": adapterconfig.SkillURI(skillPath, adapterconfig.SkillManifestFile), "frontmatter": frontmatter, "resources": resources,
	})
	if err != nil {
		// Only a frontmatter that is not JSON can fail, and it was encoded as JSON.
		panic("render: encode a skill's manifest: " + err.Error())
	}
	return entry
}

// sourceConfigMap finds a ConfigMap the content names, or says why it cannot be read.
func sourceConfigMap(in ContentInputs, name, what string) (*corev1.ConfigMap, *ContentProblem) {
	if cm := in.ConfigMaps[name]; cm != nil {
		return cm, nil
	}
	if in.Unlabelled[name] {
		return nil, &ContentProblem{cantusv1alpha1.ReasonContentMissing, fmt.Sprintf(
			"%s: ConfigMap %s exists but does not carry the label %s=true, which the operator watches content ConfigMaps by: add it (kubectl label configmap %s %s=true)",
			what, name, cantusv1alpha1.ContentLabel, name, cantusv1alpha1.ContentLabel)}
	}
	return nil, &ContentProblem{cantusv1alpha1.ReasonContentMissing, fmt.Sprintf("%s: ConfigMap %s not found: create it, labelled %s=true", what, name, cantusv1alpha1.ContentLabel)}
}

// skillSourceFile is one file of a skill as its ConfigMap maps it.
type skillSourceFile struct {
	key, path string
	data      []byte
	binary    bool
}

func renderSkill(spec *cantusv1alpha1.AgentSkill, in ContentInputs) (adapterconfig.AgentSkill, map[string][]byte, []ContentProblem) {
	what := fmt.Sprintf("agent skill %s", spec.SkillPath())
	cm, p := sourceConfigMap(in, spec.ConfigMap.Name, what)
	if p != nil {
		return adapterconfig.AgentSkill{}, nil, []ContentProblem{*p}
	}
	where := fmt.Sprintf("%s (ConfigMap %s)", what, cm.Name)
	sources, problems := skillSourceFiles(spec.ConfigMap, cm, where)
	skill := adapterconfig.AgentSkill{Path: spec.SkillPath()}
	files := map[string][]byte{}
	for _, f := range sources {
		sum := sha256.Sum256(f.data)
		files[hex.EncodeToString(sum[:])] = f.data
		skill.Files = append(skill.Files, adapterconfig.SkillFile{
			Path: f.path, Digest: adapterconfig.DigestPrefix + hex.EncodeToString(sum[:]), Size: int64(len(f.data)), MimeType: adapterconfig.SkillFileMimeType(f.path, f.binary),
		})
	}
	manifest := slices.IndexFunc(sources, func(f skillSourceFile) bool { return f.path == adapterconfig.SkillManifestFile })
	if manifest < 0 {
		return skill, nil, append(problems, ContentProblem{cantusv1alpha1.ReasonContentMissing, fmt.Sprintf(
			"%s: no file SKILL.md: every agent skill has one at its root (a key SKILL.md, or an item with path SKILL.md)", where)})
	}
	fm, err := adapterconfig.SkillFrontmatter(sources[manifest].data)
	if err != nil {
		return skill, nil, append(problems, invalid("%s: file SKILL.md (key %s): %v", where, sources[manifest].key, err))
	}
	skill.Frontmatter = fm
	slices.SortFunc(skill.Files, func(a, b adapterconfig.SkillFile) int { return strings.Compare(a.Path, b.Path) })
	return skill, files, append(problems, contractProblems(skill, where)...)
}

// contractProblems runs the contract's own validation on one skill: the Agent Skills
// rules (name, description, paths, file count and size) are checked where the adapter
// checks them, and reported with the ConfigMap they come from.
func contractProblems(skill adapterconfig.AgentSkill, where string) []ContentProblem {
	cfg := &adapterconfig.Config{Transport: adapterconfig.TransportStreamableHTTP, ContentDir: ContentMountPath, AgentSkills: []adapterconfig.AgentSkill{skill}}
	err := adapterconfig.Validate(cfg)
	if err == nil {
		return nil
	}
	var problems []ContentProblem
	for _, line := range strings.Split(err.Error(), "\n") {
		// Drop the contract's "agentSkills[0] "path": " prefix: where names the skill.
		if _, rest, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(line, "agentSkills[") {
			line = rest
		}
		problems = append(problems, invalid("%s: %s", where, line))
	}
	return problems
}

// skillSourceFiles maps the ConfigMap's keys to files as a ConfigMap volume does.
func skillSourceFiles(src *cantusv1alpha1.SkillConfigMapSource, cm *corev1.ConfigMap, where string) ([]skillSourceFile, []ContentProblem) {
	if len(src.Items) == 0 {
		files := make([]skillSourceFile, 0, len(cm.Data)+len(cm.BinaryData))
		for k, v := range cm.Data {
			files = append(files, skillSourceFile{key: k, path: k, data: []byte(v)})
		}
		for k, v := range cm.BinaryData {
			files = append(files, skillSourceFile{key: k, path: k, data: v, binary: true})
		}
		slices.SortFunc(files, func(a, b skillSourceFile) int { return strings.Compare(a.path, b.path) })
		return files, nil
	}
	var problems []ContentProblem
	files := make([]skillSourceFile, 0, len(src.Items))
	seen := map[string]bool{}
	for _, item := range src.Items {
		if seen[item.Path] {
			problems = append(problems, invalid("%s: two items give the path %s: each file needs its own", where, item.Path))
			continue
		}
		seen[item.Path] = true
		if v, ok := cm.Data[item.Key]; ok {
			files = append(files, skillSourceFile{key: item.Key, path: item.Path, data: []byte(v)})
		} else if b, ok := cm.BinaryData[item.Key]; ok {
			files = append(files, skillSourceFile{key: item.Key, path: item.Path, data: b, binary: true})
		} else {
			problems = append(problems, ContentProblem{cantusv1alpha1.ReasonContentMissing, fmt.Sprintf("%s: key %s (for file %s) is in neither data nor binaryData", where, item.Key, item.Path)})
		}
	}
	return files, problems
}

func invalid(format string, args ...any) ContentProblem {
	return ContentProblem{cantusv1alpha1.ReasonInvalidContent, fmt.Sprintf(format, args...)}
}

func renderResource(spec *cantusv1alpha1.ServedResource, in ContentInputs) (adapterconfig.Resource, []byte, *ContentProblem) {
	r := adapterconfig.Resource{
		URI: spec.URI, Name: spec.Name, Title: spec.Title, Description: spec.Description, MimeType: spec.MimeType,
		Annotations: resourceAnnotations(spec.Annotations),
	}
	if spec.Text != nil {
		text := *spec.Text
		r.Text = &text
		return r, nil, nil
	}
	ref := spec.ConfigMapKeyRef
	what := fmt.Sprintf("resource %s", adapterconfig.ClipName(spec.URI))
	cm, p := sourceConfigMap(in, ref.Name, what)
	if p != nil {
		return r, nil, p
	}
	var data []byte
	binary := false
	if v, ok := cm.Data[ref.Key]; ok {
		data = []byte(v)
	} else if b, ok := cm.BinaryData[ref.Key]; ok {
		data, binary = b, true
	} else {
		return r, nil, &ContentProblem{cantusv1alpha1.ReasonContentMissing, fmt.Sprintf("%s: key %s is in neither data nor binaryData of ConfigMap %s", what, ref.Key, ref.Name)}
	}
	sum := sha256.Sum256(data)
	r.Content = &adapterconfig.ContentRef{Digest: adapterconfig.DigestPrefix + hex.EncodeToString(sum[:]), Size: int64(len(data)), Binary: binary}
	if r.MimeType == "" {
		r.MimeType = adapterconfig.SkillFileMimeType(ref.Key, binary)
	}
	return r, data, nil
}

func resourceAnnotations(in *cantusv1alpha1.ResourceAnnotations) *adapterconfig.ResourceAnnotations {
	if in == nil {
		return nil
	}
	out := &adapterconfig.ResourceAnnotations{}
	for _, a := range in.Audience {
		out.Audience = append(out.Audience, string(a))
	}
	if in.Priority != "" {
		// The API's pattern admits only decimals from 0 to 1; an unparsable value (an
		// object stored before the pattern) is left out rather than guessed.
		if p, err := strconv.ParseFloat(in.Priority, 64); err == nil {
			out.Priority = &p
		}
	}
	return out
}

func resourceTemplate(spec *cantusv1alpha1.ServedResourceTemplate) adapterconfig.ResourceTemplate {
	t := adapterconfig.ResourceTemplate{
		URITemplate: spec.URITemplate, Name: spec.Name, Title: spec.Title, Description: spec.Description, MimeType: spec.MimeType,
	}
	t.Template, t.HTTP = backend(spec.Template, spec.HTTP)
	return t
}

func prompt(spec *cantusv1alpha1.ServedPrompt) adapterconfig.Prompt {
	p := adapterconfig.Prompt{Name: spec.Name, Title: spec.Title, Description: spec.Description}
	for _, a := range spec.Arguments {
		p.Arguments = append(p.Arguments, adapterconfig.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
	}
	for _, m := range spec.Messages {
		p.Messages = append(p.Messages, adapterconfig.PromptMessage{Role: string(m.Role), Content: promptContent(m.Content)})
	}
	if spec.HTTP != nil {
		p.HTTP = httpBackend(spec.HTTP)
	}
	return p
}

func promptContent(in cantusv1alpha1.PromptContent) adapterconfig.PromptContent {
	out := adapterconfig.PromptContent{Type: string(in.Type), Text: in.Text, Data: in.Data, MimeType: in.MimeType}
	if r := in.Resource; r != nil {
		out.Resource = &adapterconfig.PromptResource{URI: r.URI, MimeType: r.MimeType, Text: r.Text, Blob: r.Blob}
	}
	return out
}

// withoutContent is cfg without what the adapter reloads in place (skills, resources,
// templates, prompts and the files they name), for the rollout hash: a content edit
// reaches running pods without rolling them.
func withoutContent(cfg *adapterconfig.Config) {
	cfg.ContentDir, cfg.AgentSkills, cfg.Resources, cfg.ResourceTemplates, cfg.Prompts = "", nil, nil, nil, nil
	cfg.Imported = nil
}

// validContent runs the contract's validation on the content alone (the rest of the
// config is validated once per generation): a prompt or resource template that cannot
// work is a spec problem.
func validContent(cfg *adapterconfig.Config) error {
	if len(cfg.AgentSkills)+len(cfg.Resources)+len(cfg.ResourceTemplates)+len(cfg.Prompts) == 0 {
		return nil
	}
	return adapterconfig.Validate(&adapterconfig.Config{
		Transport: cfg.Transport, ContentDir: cfg.ContentDir,
		AgentSkills: cfg.AgentSkills, Resources: cfg.Resources, ResourceTemplates: cfg.ResourceTemplates, Prompts: cfg.Prompts,
	})
}
