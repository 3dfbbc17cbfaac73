package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/listing"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// Names alone do not show that pods serve the rendered config: a change of a tool's
// description, schema or annotations, of a prompt's arguments or of a skill's files
// keeps every name. So Verified also compares, item by item, the definitions the pods
// list with those the rendered config makes the adapter list.

// renderedDefinitions are the list entries the pods list when they serve the rendered
// config: tools and prompts by name, skills' manifests (render.SkillManifest) by the
// URI of their SKILL.md. Skills from images are not among them: the operator cannot
// read an image.
type renderedDefinitions struct {
	tools, prompts, skills map[string]json.RawMessage
}

// renderedDefinitionsOf builds the entries from cfg with the adapter's own code
// (internal/listing), so that mcp-go's encoding (it always writes "annotations", for one) and the gateway's
// serving of imported tools as their remotes defined them are the same on both sides.
func renderedDefinitionsOf(cfg *adapterconfig.Config) (renderedDefinitions, error) {
	tools, err := listing.Tools(cfg)
	if err != nil {
		return renderedDefinitions{}, fmt.Errorf("build the rendered tool definitions: %w", err)
	}
	prompts, err := listing.Prompts(cfg)
	if err != nil {
		return renderedDefinitions{}, fmt.Errorf("build the rendered prompt definitions: %w", err)
	}
	skills := make(map[string]json.RawMessage, len(cfg.AgentSkills))
	for _, s := range cfg.AgentSkills {
		skills[adapterconfig.SkillURI(s.Path, adapterconfig.SkillManifestFile)] = render.SkillManifest(s.Path, s.Frontmatter, s.Files)
	}
	return renderedDefinitions{tools: tools, prompts: prompts, skills: skills}, nil
}

// servedToolDefinitions are the tools/list entries as the pods sent them, by name.
func servedToolDefinitions(tools []mcpclient.Tool) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(tools))
	for _, t := range tools {
		entry := t.Raw
		if len(entry) == 0 {
			// A lister that kept no entry: its name, description and inputSchema.
			entry, _ = json.Marshal(t)
		}
		out[t.Name] = entry
	}
	return out
}

// maxNamedDifferences bounds how many differing items a message names.
const maxNamedDifferences = 5

// definitionsMismatchMessage says which items the pods serve with another definition
// than rendered, and which members differ; empty when none does.
func definitionsMismatchMessage(differences []string) string {
	if len(differences) == 0 {
		return ""
	}
	return "the adapter serves definitions other than the ones rendered: " + listAtMost(differences, maxNamedDifferences, "; ") +
		" (pods serve an older config?); pods pick up a new config, and new content as the kubelet refreshes their volumes, within a minute or two"
}

// definitionDifferences compares the definitions of the items that both rendered and
// served name (missing and unexpected items are the names check's) and describes each
// item that differs, sorted by name. Digests are compared first; only an item whose
// digests differ is taken apart member by member.
func definitionDifferences(kind definition.ItemKind, rendered, served map[string]json.RawMessage) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(rendered)) {
		got, ok := served[name]
		if !ok {
			continue
		}
		if d := itemDifference(kind, name, rendered[name], got); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// itemDifference describes how the served definition of one item differs from the
// rendered one, e.g. `tool "search": description differs`; empty when it does not.
func itemDifference(kind definition.ItemKind, name string, rendered, served json.RawMessage) string {
	want, errWant := kind.Digest(rendered)
	got, errGot := kind.Digest(served)
	if errWant == nil && errGot == nil && want == got {
		return ""
	}
	members, err := kind.DifferingMembers(rendered, served)
	if err != nil {
		return fmt.Sprintf("%s %q: %v", kind.Name, name, err)
	}
	described := make([]string, 0, len(members))
	for _, m := range members {
		described = append(described, describeMember(kind, m, rendered, served))
	}
	verb := "differs"
	if len(members) > 1 {
		verb = "differ"
	}
	return fmt.Sprintf("%s %q: %s %s", kind.Name, name, strings.Join(described, ", "), verb)
}

// describeMember names a differing member; a skill's resources also name the files
// that differ, since "resources" alone does not say where to look.
func describeMember(kind definition.ItemKind, member string, rendered, served json.RawMessage) string {
	if kind.Name != definition.SkillKind.Name || member != "resources" {
		return member
	}
	files := differingSkillFiles(rendered, served)
	if len(files) == 0 {
		return member
	}
	return fmt.Sprintf("resources (%s)", listAtMost(files, 3, ", "))
}

// differingSkillFiles are the URIs of the files two skill manifests list with another
// digest or size, or that only one of them lists, sorted.
func differingSkillFiles(rendered, served json.RawMessage) []string {
	want, got := skillResources(rendered), skillResources(served)
	var out []string
	for uri, w := range want {
		if g, ok := got[uri]; !ok || g != w {
			out = append(out, uri)
		}
	}
	for uri := range got {
		if _, ok := want[uri]; !ok {
			out = append(out, uri)
		}
	}
	slices.Sort(out)
	return out
}

// skillResources reads a skill manifest's resources by URI; a manifest that does not
// decode has none (its digest has already told that it differs).
func skillResources(manifest json.RawMessage) map[string]string {
	var m struct {
		Resources []struct {
			URI    string `json:"uri"`
			Digest string `json:"digest"`
			Size   int64  `json:"size"`
		} `json:"resources"`
	}
	out := map[string]string{}
	if json.Unmarshal(manifest, &m) != nil {
		return out
	}
	for _, r := range m.Resources {
		out[r.URI] = fmt.Sprintf("%s/%d", r.Digest, r.Size)
	}
	return out
}
