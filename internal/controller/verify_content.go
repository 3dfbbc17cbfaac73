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
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// ReasonContentMismatch says that the pods answer, but their skills (by manifest digest) or
// prompts are not the ones the operator rendered: they serve stale content.
const ReasonContentMismatch = "ContentMismatch"

// ReasonImageSkillsLeftOut says that the pods do not serve a skill from an image: the
// adapter checks it when it loads and leaves out one that breaks a rule.
const ReasonImageSkillsLeftOut = "ImageSkillsLeftOut"

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
	// Prompts are the names prompts/list lists.
	Prompts []string
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
	out := ServedContent{SkillDigests: map[string]string{}, SkillFrontmatter: map[string]json.RawMessage{}}
	if target.Skills {
		skills, err := s.ListSkills(ctx, maxListedEntries)
		if err != nil {
			return out, err
		}
		for _, raw := range skills {
			uri, digest, frontmatter, err := skillEntryDigest(raw)
			if err != nil {
				return out, err
			}
			out.SkillDigests[uri], out.SkillFrontmatter[uri] = digest, frontmatter
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
		}
	}
	return out, nil
}

// skillEntryDigest reads a skills/list entry into its SKILL.md URI and the digest of
// its manifest, computed as the operator computes it for the status, and its frontmatter.
func skillEntryDigest(raw json.RawMessage) (string, string, json.RawMessage, error) {
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
		return "", "", nil, fmt.Errorf("a skills/list entry does not list its resources: %w", err)
	}
	root := strings.TrimSuffix(entry.URI, adapterconfig.SkillManifestFile)
	files := make([]adapterconfig.SkillFile, 0, len(entry.Resources))
	for _, r := range entry.Resources {
		files = append(files, adapterconfig.SkillFile{Path: strings.TrimPrefix(r.URI, root), Digest: r.Digest, Size: r.Size})
	}
	skillPath := strings.TrimSuffix(strings.TrimPrefix(root, adapterconfig.SkillURIScheme), "/")
	return entry.URI, render.SkillManifestDigest(skillPath, entry.Frontmatter, files), entry.Frontmatter, nil
}

// contentMismatch compares what the pods serve with what the status says was rendered,
// and says what differs; empty when they match. Skills from images (images, by URI) are
// not rendered by the operator: verifyImageSkills checks them.
func contentMismatch(ss *cantusv1alpha1.SkillServer, served ServedContent, images map[string]string) string {
	var parts []string
	want := map[string]string{}
	for _, s := range ss.Status.AgentSkills {
		if _, fromImage := images[s.URI]; !fromImage {
			want[s.URI] = s.Digest
		}
	}
	var stale, missing, extra []string
	for uri, digest := range want {
		got, ok := served.SkillDigests[uri]
		switch {
		case !ok:
			missing = append(missing, uri)
		case got != digest:
			stale = append(stale, uri)
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
	}{{"skills with other files than rendered", stale}, {"missing", missing}, {"not expected", extra}} {
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
// and the server serves some. It returns the reason and message of a failed check and
// false, or what the passed check adds to Verified's message and true.
func (r *SkillServerReconciler) verifyContent(ctx context.Context, ss *cantusv1alpha1.SkillServer, target VerifyTarget) (string, string, bool) {
	lister, ok := r.Verifier.(ContentLister)
	images := imageSkillURIs(ss)
	rendered := len(ss.Status.AgentSkills) - len(imageSkillEntries(ss, ss.Status.AgentSkills))
	if !ok || (rendered == 0 && len(images) == 0 && len(ss.Status.Prompts) == 0) {
		return "", "", true
	}
	target.Skills, target.Prompts = rendered > 0 || len(images) > 0, len(ss.Status.Prompts) > 0
	served, err := lister.ListContent(ctx, target)
	if err != nil {
		return cantusv1alpha1.ReasonNotAnswering, fmt.Sprintf("the adapter at %s did not list its skills and prompts: %v", target.URL, err), false
	}
	if msg := contentMismatch(ss, served, images); msg != "" {
		return ReasonContentMismatch, msg, false
	}
	if msg := recordImageSkills(ss, served, images); msg != "" {
		return ReasonImageSkillsLeftOut, msg, false
	}
	fromImages := ""
	if len(images) > 0 {
		fromImages = fmt.Sprintf("; %d of them from images, as the pods list them", len(images))
	}
	return "", fmt.Sprintf(", and skills/list and prompts/list with the %d skills (by manifest digest%s) and %d prompts rendered",
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
