package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// ContentLister lists what an MCP server serves besides tools; a Verifier that
// implements it also has the pods' skills and prompts checked.
type ContentLister interface {
	ListContent(ctx context.Context, target VerifyTarget) (ServedContent, error)
}

// ServedContent is what a server lists besides tools.
type ServedContent struct {
	// SkillDigests are the manifest digests (render.SkillManifestDigest) of the skills
	// skills/list lists, by the URI of their SKILL.md.
	SkillDigests map[string]string
	// SkillFrontmatter are the listed skills' frontmatter, by the URI of their SKILL.md.
	SkillFrontmatter map[string]json.RawMessage
	// SkillManifests are the listed skills' manifests (render.SkillManifest), by the
	// URI of their SKILL.md, to tell which part of a skill differs.
	SkillManifests map[string]json.RawMessage
	// Prompts are the names prompts/list lists.
	Prompts []string
	// PromptDefinitions are the prompts/list entries as sent, by name.
	PromptDefinitions map[string]json.RawMessage
}

// maxListedEntries bounds one verification's listings: the spec allows 64 skills and
// 128 prompts.
const maxListedEntries = 1024

// ListContent lists the server's skills (when asked for) and prompts, every page.
func (v *MCPVerifier) ListContent(ctx context.Context, target VerifyTarget) (ServedContent, error) {
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = DefaultVerifyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := mcpclient.New(mcpclient.ClientOptions{URL: target.URL, Transport: target.Transport, Headers: target.Headers, ConnectTimeout: timeout, Dial: v.Dial})
	if err != nil {
		return ServedContent{}, err
	}
	s, err := c.Connect(ctx)
	if err != nil {
		return ServedContent{}, err
	}
	defer s.Close()
	out := ServedContent{SkillDigests: map[string]string{}, SkillFrontmatter: map[string]json.RawMessage{}, SkillManifests: map[string]json.RawMessage{}, PromptDefinitions: map[string]json.RawMessage{}}
	if target.Skills {
		skills, err := s.ListSkills(ctx, maxListedEntries)
		if err != nil {
			return out, err
		}
		for _, raw := range skills {
			manifest, err := skillEntryManifest(raw)
			if err != nil {
				return out, err
			}
			out.SkillDigests[manifest.uri], out.SkillFrontmatter[manifest.uri], out.SkillManifests[manifest.uri] = manifest.digest, manifest.frontmatter, manifest.manifest
		}
	}
	if target.Prompts {
		prompts, err := s.ListPrompts(ctx, maxListedEntries)
		if err != nil {
			return out, err
		}
		for _, raw := range prompts {
			var p struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				return out, fmt.Errorf("a prompts/list entry is not an object with a name: %w", err)
			}
			out.Prompts = append(out.Prompts, p.Name)
			out.PromptDefinitions[p.Name] = raw
		}
	}
	return out, nil
}

// servedSkill is what the verification reads of a skills/list entry.
type servedSkill struct {
	// uri is its SKILL.md's.
	uri string
	// manifest is render.SkillManifest of the entry, and digest its digest, computed as
	// the operator computes it for the status.
	manifest    json.RawMessage
	digest      string
	frontmatter json.RawMessage
}

// skillEntryManifest reads a skills/list entry.
func skillEntryManifest(raw json.RawMessage) (servedSkill, error) {
	var entry struct {
		URI         string          `json:"uri"`
		Frontmatter json.RawMessage `json:"frontmatter"`
		Resources   []struct {
			URI    string `json:"uri"`
			Digest string `json:"digest"`
			Size   int64  `json:"size"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(raw, &entry); err != nil {
		return servedSkill{}, fmt.Errorf("a skills/list entry does not list its resources: %w", err)
	}
	root := strings.TrimSuffix(entry.URI, adapterconfig.SkillManifestFile)
	files := make([]adapterconfig.SkillFile, 0, len(entry.Resources))
	for _, r := range entry.Resources {
		files = append(files, adapterconfig.SkillFile{Path: strings.TrimPrefix(r.URI, root), Digest: r.Digest, Size: r.Size})
	}
	skillPath := strings.TrimSuffix(strings.TrimPrefix(root, adapterconfig.SkillURIScheme), "/")
	return servedSkill{
		uri:         entry.URI,
		manifest:    render.SkillManifest(skillPath, entry.Frontmatter, files),
		digest:      render.SkillManifestDigest(skillPath, entry.Frontmatter, files),
		frontmatter: entry.Frontmatter,
	}, nil
}

// contentMismatch compares the skills and prompts the pods serve with those the status
// says were rendered, by name, and says which are missing or not expected; empty when
// they match. Their definitions are compared by definitionDifferences. Skills from
// images (images, by URI) are not rendered by the operator: recordImageSkills checks them.
func contentMismatch(ss *cantusv1alpha1.SkillServer, served ServedContent, images map[string]string) string {
	var parts []string
	want := map[string]bool{}
	for _, s := range ss.Status.AgentSkills {
		if _, fromImage := images[s.URI]; !fromImage {
			want[s.URI] = true
		}
	}
	var missing, extra []string
	for uri := range want {
		if _, ok := served.SkillDigests[uri]; !ok {
			missing = append(missing, uri)
		}
	}
	for uri := range served.SkillDigests {
		if _, fromImage := images[uri]; fromImage {
			continue
		}
		if _, ok := want[uri]; !ok {
			extra = append(extra, uri)
		}
	}
	wantPrompts, gotPrompts := sets.New(ss.Status.Prompts...), sets.New(served.Prompts...)
	missing = append(missing, sets.List(wantPrompts.Difference(gotPrompts))...)
	extra = append(extra, sets.List(gotPrompts.Difference(wantPrompts))...)
	for _, l := range []struct {
		what  string
		items []string
	}{{"missing", missing}, {"not expected", extra}} {
		if len(l.items) > 0 {
			parts = append(parts, l.what+": "+listAtMost(sets.List(sets.New(l.items...)), 10, ", "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "the adapter serves skills or prompts that are not the ones rendered (" + strings.Join(parts, "; ") +
		"); pods pick up new content within a minute or two, as the kubelet refreshes their volumes"
}

// verifyContent checks the pods' skills and prompts, when the verifier can list them
// and the server serves some: by name, then their definitions against rendered. It
// returns the reason and message of a failed check and false, or what the passed check
// adds to Verified's message and true.
func (r *SkillServerReconciler) verifyContent(ctx context.Context, ss *cantusv1alpha1.SkillServer, target VerifyTarget, rendered renderedDefinitions) (string, string, bool) {
	lister, ok := r.Verifier.(ContentLister)
	images := imageSkillURIs(ss)
	renderedSkills := len(ss.Status.AgentSkills) - len(imageSkillEntries(ss, ss.Status.AgentSkills))
	if !ok || (renderedSkills == 0 && len(images) == 0 && len(ss.Status.Prompts) == 0) {
		return "", "", true
	}
	target.Skills, target.Prompts = renderedSkills > 0 || len(images) > 0, len(ss.Status.Prompts) > 0
	served, err := lister.ListContent(ctx, target)
	if err != nil {
		return cantusv1alpha1.ReasonNotAnswering, fmt.Sprintf("the adapter at %s did not list its skills and prompts: %v", target.URL, err), false
	}
	if msg := contentMismatch(ss, served, images); msg != "" {
		return cantusv1alpha1.ReasonContentMismatch, msg, false
	}
	differences := slices.Concat(
		definitionDifferences(definition.SkillKind, rendered.skills, served.SkillManifests),
		definitionDifferences(definition.PromptKind, rendered.prompts, served.PromptDefinitions))
	if msg := definitionsMismatchMessage(differences); msg != "" {
		return cantusv1alpha1.ReasonDefinitionsMismatch, msg, false
	}
	if msg := recordImageSkills(ss, served, images); msg != "" {
		return cantusv1alpha1.ReasonImageSkillsLeftOut, msg, false
	}
	fromImages := ""
	if len(images) > 0 {
		fromImages = fmt.Sprintf("; %d of them from images, as the pods list them", len(images))
	}
	return "", fmt.Sprintf(", and skills/list and prompts/list with the %d skills (by manifest digest%s) and %d prompts rendered, defined as rendered",
		len(ss.Status.AgentSkills), fromImages, len(ss.Status.Prompts)), true
}

// recordImageSkills puts the pods' entries of the skills from images into the status
// (the operator cannot read an image, so what the pods serve is what there is to show),
// and says which of them the pods do not serve; empty when they serve every one.
func recordImageSkills(ss *cantusv1alpha1.SkillServer, served ServedContent, images map[string]string) string {
	if len(images) == 0 {
		return ""
	}
	entries := slices.DeleteFunc(slices.Clone(ss.Status.AgentSkills), func(s cantusv1alpha1.ServedAgentSkill) bool {
		_, fromImage := images[s.URI]
		return fromImage
	})
	var leftOut []string
	for uri, name := range images {
		digest, ok := served.SkillDigests[uri]
		if !ok {
			leftOut = append(leftOut, uri)
			continue
		}
		entries = append(entries, render.ServedSkillEntry(name, uri, digest, served.SkillFrontmatter[uri]))
	}
	setAgentSkills(ss, entries)
	if len(leftOut) == 0 {
		return ""
	}
	slices.Sort(leftOut)
	return fmt.Sprintf("the pods do not serve %d skill(s) from images: %s. The adapter checks a skill from an image when it loads it and leaves out one that breaks an Agent Skills rule or limit: "+
		"the adapter's log says which rule, and its metric cantus_adapter_image_skills_left_out counts them; pods of an older template may also still answer",
		len(leftOut), listAtMost(leftOut, 10, ", "))
}
