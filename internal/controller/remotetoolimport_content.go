package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// What a remote serves besides tools (prompts, resources, resource templates) goes into
// the import's status beside the tools, bounded as cantusv1alpha1.RemoteContentStatus
// states: the remote is not trusted, and a remote listing a thousand resources with
// long descriptions must not make the status patch fail.
const (
	maxRemoteURIBytes = 2 << 10
	// maxContentDefinitionBytes: a larger list entry is recorded without its definition.
	maxContentDefinitionBytes = 16 << 10
	// maxSkillDefinitionBytes: a skill's entry lists every file (up to 512), so it may be
	// larger.
	maxSkillDefinitionBytes = 64 << 10
	// maxStatusContentBytes bounds the three lists with definitions; past it, entries
	// are recorded without them.
	maxStatusContentBytes = 256 << 10
	// maxStatusContentListBytes bounds the three lists even without definitions; past
	// it, entries are left out.
	maxStatusContentListBytes = 384 << 10
)

// contentKind is one kind of content an import lists.
type contentKind struct {
	method string // its list method, as mcpclient.Content.Failed names it
	label  string // plural, for messages: "prompts"
	key    string // the member that names an entry
	item   definition.ItemKind
	// maxDefinition bounds the definition the status keeps.
	maxDefinition int
	// described is the member holding name and description: "" for the entry itself.
	described string
}

var (
	promptContent           = contentKind{method: "prompts/list", label: "prompts", key: "name", item: definition.PromptKind, maxDefinition: maxContentDefinitionBytes}
	resourceContent         = contentKind{method: "resources/list", label: "resources", key: "uri", item: definition.ResourceKind, maxDefinition: maxContentDefinitionBytes}
	resourceTemplateContent = contentKind{method: "resources/templates/list", label: "resource templates", key: "uriTemplate", item: definition.ResourceTemplateKind, maxDefinition: maxContentDefinitionBytes}
	skillContent            = contentKind{method: "skills/list", label: "skills", key: "uri", item: definition.SkillKind, maxDefinition: maxSkillDefinitionBytes, described: "frontmatter"}
)

// contentEntry is one entry of a kind as the status records it.
type contentEntry struct {
	key     string // clipped
	content cantusv1alpha1.DiscoveredContent
}

// announcesContent says whether the remote announced prompts or resources.
func announcesContent(res *mcpclient.Result) bool {
	return slices.Contains(res.Capabilities, "prompts") || slices.Contains(res.Capabilities, "resources") ||
		slices.Contains(res.Extensions, definition.SkillsExtension)
}

// setContentDiscovered records what the remote serves besides tools after a successful
// handshake, sets catalogDigest over it and the tools, and returns a note naming what
// changed since the last handshake ("" when nothing did). A kind whose listing failed
// keeps its earlier entries, and the condition says why.
func setContentDiscovered(imp *cantusv1alpha1.RemoteToolImport, res *mcpclient.Result, tools []mcpclient.Tool) string {
	before := contentEntriesOf(&imp.Status.RemoteContentStatus)
	everyEra, eras := contentOfEveryEra(res)
	listed := filterContent(everyEra, imp.Spec.ContentFilters)
	for _, k := range []struct {
		kind contentKind
		into *[]json.RawMessage
	}{
		{promptContent, &listed.Prompts}, {resourceContent, &listed.Resources}, {resourceTemplateContent, &listed.ResourceTemplates},
		{skillContent, &listed.Skills},
	} {
		if _, failed := res.Content.Failed[k.kind.method]; failed {
			*k.into = keptDefinitions(before[k.kind.label])
		}
	}
	prompts, resources, templates, skills, truncated := statusContent(listed)
	eras.annotate(promptContent, prompts)
	eras.annotate(resourceContent, resources)
	eras.annotate(resourceTemplateContent, templates)
	eras.annotate(skillContent, skills)
	status := &imp.Status.RemoteContentStatus
	status.Prompts = asStatus(prompts, func(e contentEntry) cantusv1alpha1.DiscoveredPrompt {
		return cantusv1alpha1.DiscoveredPrompt{DiscoveredContent: e.content}
	})
	status.Resources = asStatus(resources, func(e contentEntry) cantusv1alpha1.DiscoveredResource {
		return cantusv1alpha1.DiscoveredResource{URI: e.key, DiscoveredContent: e.content}
	})
	status.ResourceTemplates = asStatus(templates, func(e contentEntry) cantusv1alpha1.DiscoveredResourceTemplate {
		return cantusv1alpha1.DiscoveredResourceTemplate{URITemplate: e.key, DiscoveredContent: e.content}
	})
	status.Skills = asStatus(skills, func(e contentEntry) cantusv1alpha1.DiscoveredSkill {
		return cantusv1alpha1.DiscoveredSkill{URI: e.key, DiscoveredContent: e.content}
	})
	status.PromptCount, status.ResourceCount, status.ResourceTemplateCount = int32(len(listed.Prompts)), int32(len(listed.Resources)), int32(len(listed.ResourceTemplates))
	status.SkillCount = int32(len(listed.Skills))
	status.ContentTruncated = truncated
	imp.Status.CatalogDigest = mcpclient.CatalogDigest(tools, listed)
	setContentCondition(imp, res)
	return describeContentChange(before, contentEntriesOf(status))
}

// clearContent withdraws the content of a source the policies refuse, as its tools.
func clearContent(imp *cantusv1alpha1.RemoteToolImport) {
	imp.Status.RemoteContentStatus = cantusv1alpha1.RemoteContentStatus{}
	removeCondition(imp, cantusv1alpha1.ConditionContentDiscovered)
}

func setContentCondition(imp *cantusv1alpha1.RemoteToolImport, res *mcpclient.Result) {
	if !announcesContent(res) {
		removeCondition(imp, cantusv1alpha1.ConditionContentDiscovered)
		return
	}
	if len(res.Content.Failed) > 0 {
		var failures []string
		for _, method := range slices.Sorted(maps.Keys(res.Content.Failed)) {
			failures = append(failures, method+": "+clip.Bytes(res.Content.Failed[method], 300))
		}
		setCondition(imp, cantusv1alpha1.ConditionContentDiscovered, metav1.ConditionFalse, cantusv1alpha1.ReasonContentListFailed,
			importContentSummary(imp)+"; these listings failed and keep their earlier entries: "+strings.Join(failures, "; "))
		return
	}
	setCondition(imp, cantusv1alpha1.ConditionContentDiscovered, metav1.ConditionTrue, cantusv1alpha1.ReasonContentListed, importContentSummary(imp))
}

// importContentSummary counts the content and says what the status left out.
func importContentSummary(imp *cantusv1alpha1.RemoteToolImport) string {
	s := imp.Status.RemoteContentStatus
	msg := fmt.Sprintf("%d prompts, %d resources, %d resource templates, %d skills", s.PromptCount, s.ResourceCount, s.ResourceTemplateCount, s.SkillCount)
	if s.ContentTruncated {
		msg += "; the status leaves some entries or their definitions out to stay within its size limit, and gateways do not serve those"
	}
	return msg
}

// filterContent keeps the entries that pass f, each kind by its key.
func filterContent(c mcpclient.Content, f cantusv1alpha1.ContentFilters) mcpclient.Content {
	return mcpclient.Content{
		Prompts:           filterEntries(c.Prompts, promptContent.key, f.Prompts),
		Resources:         filterEntries(c.Resources, resourceContent.key, f.Resources),
		ResourceTemplates: filterEntries(c.ResourceTemplates, resourceTemplateContent.key, f.ResourceTemplates),
		Skills:            filterSkills(c.Skills, f.Skills),
	}
}

// filterSkills keeps the skills whose path passes f.
func filterSkills(entries []json.RawMessage, f *cantusv1alpha1.ToolFilter) []json.RawMessage {
	if f == nil {
		return entries
	}
	out := make([]json.RawMessage, 0, len(entries))
	for _, e := range entries {
		if render.GlobSelected(f.Include, f.Exclude, render.SkillPathOf(stringMember(e, "uri"))) {
			out = append(out, e)
		}
	}
	return out
}

func filterEntries(entries []json.RawMessage, key string, f *cantusv1alpha1.ToolFilter) []json.RawMessage {
	if f == nil {
		return entries
	}
	out := make([]json.RawMessage, 0, len(entries))
	for _, e := range entries {
		if render.GlobSelected(f.Include, f.Exclude, stringMember(e, key)) {
			out = append(out, e)
		}
	}
	return out
}

// stringMember is the string member name of a JSON object, "" when there is none.
func stringMember(raw json.RawMessage, name string) string {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return ""
	}
	var s string
	_ = json.Unmarshal(members[name], &s)
	return s
}

// statusContent records the entries of the three kinds within the status's bounds: with
// their definitions while the lists hold at most maxStatusContentBytes, without them
// while they hold at most maxStatusContentListBytes, and not at all past that;
// truncated says something was left out for those bounds.
func statusContent(c mcpclient.Content) (prompts, resources, templates, skills []contentEntry, truncated bool) {
	size := 0
	record := func(kind contentKind, entries []json.RawMessage) []contentEntry {
		out := make([]contentEntry, 0, len(entries))
		for _, raw := range entries {
			e := discoveredEntry(kind, raw)
			entrySize := len(e.key) + len(e.content.Name) + len(e.content.Description) + len(e.content.Digest)
			if e.content.Definition != nil && size+entrySize+len(e.content.Definition.Raw) > maxStatusContentBytes {
				e.content.Definition, truncated = nil, true
			}
			if e.content.Definition != nil {
				entrySize += len(e.content.Definition.Raw)
			}
			if size+entrySize > maxStatusContentListBytes {
				truncated = true
				break
			}
			size += entrySize
			out = append(out, e)
		}
		return out
	}
	prompts = record(promptContent, c.Prompts)
	resources = record(resourceContent, c.Resources)
	templates = record(resourceTemplateContent, c.ResourceTemplates)
	skills = record(skillContent, c.Skills)
	return prompts, resources, templates, skills, truncated
}

// entryKey is the key the status records raw, an entry of kind, under.
func entryKey(kind contentKind, raw json.RawMessage) string {
	return clippedKey(kind, stringMember(raw, kind.key))
}

// clippedKey is key as the status records it: a name as names are clipped, else as
// URIs are.
func clippedKey(kind contentKind, key string) string {
	if kind.key == "name" {
		return clip.Bytes(key, maxRemoteNameBytes)
	}
	return clip.Bytes(key, maxRemoteURIBytes)
}

// discoveredEntry is raw (a list entry the probe checked names itself by kind.key) as
// the status records it: key, name and description clipped, the digest of the whole
// definition, and the definition when it is at most maxContentDefinitionBytes.
func discoveredEntry(kind contentKind, raw json.RawMessage) contentEntry {
	key := stringMember(raw, kind.key)
	described := raw
	if kind.described != "" {
		described = rawMember(raw, kind.described)
	}
	name := stringMember(described, "name")
	description := stringMember(described, "description")
	e := contentEntry{key: clippedKey(kind, key)}
	e.content.Name = clip.Bytes(name, maxRemoteNameBytes)
	e.content.Description = clip.Bytes(description, maxRemoteDescriptionBytes)
	e.content.Digest, _ = kind.item.Digest(raw) // the probe checked raw is an object
	if e.key != key {
		e.content.Clipped = append(e.content.Clipped, kind.key)
	}
	if kind.key != "name" && e.content.Name != name {
		e.content.Clipped = append(e.content.Clipped, "name")
	}
	if e.content.Description != description {
		e.content.Clipped = append(e.content.Clipped, "description")
	}
	if len(raw) > kind.maxDefinition {
		e.content.Clipped = append(e.content.Clipped, "definition")
	} else {
		e.content.Definition = &runtime.RawExtension{Raw: raw}
	}
	return e
}

// rawMember is the member name of a JSON object as sent, nil when absent.
func rawMember(raw json.RawMessage, name string) json.RawMessage {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return nil
	}
	return members[name]
}

// contentEntriesOf are the entries a status records, by kind label.
func contentEntriesOf(s *cantusv1alpha1.RemoteContentStatus) map[string][]contentEntry {
	out := map[string][]contentEntry{}
	for _, p := range s.Prompts {
		out[promptContent.label] = append(out[promptContent.label], contentEntry{key: p.Name, content: p.DiscoveredContent})
	}
	for _, r := range s.Resources {
		out[resourceContent.label] = append(out[resourceContent.label], contentEntry{key: r.URI, content: r.DiscoveredContent})
	}
	for _, t := range s.ResourceTemplates {
		out[resourceTemplateContent.label] = append(out[resourceTemplateContent.label], contentEntry{key: t.URITemplate, content: t.DiscoveredContent})
	}
	for _, sk := range s.Skills {
		out[skillContent.label] = append(out[skillContent.label], contentEntry{key: sk.URI, content: sk.DiscoveredContent})
	}
	return out
}

// keptDefinitions are the definitions of entries an earlier handshake recorded.
func keptDefinitions(entries []contentEntry) []json.RawMessage {
	var out []json.RawMessage
	for _, e := range entries {
		if e.content.Definition != nil {
			out = append(out, e.content.Definition.Raw)
		}
	}
	return out
}

// describeContentChange is the note of a ContentChanged event: per kind, the entries
// added, removed and changed (another digest), at most ten named of each.
func describeContentChange(before, after map[string][]contentEntry) string {
	var parts []string
	for _, label := range []string{promptContent.label, resourceContent.label, resourceTemplateContent.label, skillContent.label} {
		added, removed, changed := diffEntries(before[label], after[label])
		var kind []string
		if len(added) > 0 {
			kind = append(kind, "added "+clippedNames(added))
		}
		if len(removed) > 0 {
			kind = append(kind, "removed "+clippedNames(removed))
		}
		if len(changed) > 0 {
			kind = append(kind, "changed "+clippedNames(changed))
		}
		if len(kind) > 0 {
			parts = append(parts, label+": "+strings.Join(kind, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

func diffEntries(before, after []contentEntry) (added, removed, changed []string) {
	return diffKeyed(entriesByDigest(before), entriesByDigest(after))
}

func entriesByDigest(entries []contentEntry) []keyed {
	out := make([]keyed, len(entries))
	for i, e := range entries {
		out[i] = keyed{key: e.key, value: e.content.Digest}
	}
	return out
}

// asStatus converts entries to the status list of one kind; no entries give nil, so that an
// empty list is left out of the status rather than written as [].
func asStatus[T any](entries []contentEntry, item func(contentEntry) T) []T {
	if len(entries) == 0 {
		return nil
	}
	out := make([]T, 0, len(entries))
	for _, e := range entries {
		out = append(out, item(e))
	}
	return out
}
