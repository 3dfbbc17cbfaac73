package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// Item digests have versions. Version 2 covers every member a gateway serves (a tool's
// _meta, icons and execution; a prompt's, resource's and template's icons and _meta; a
// skill's _meta), where version 1 left them out, so every item that has one of those
// members has another digest under version 2. An approval recorded under version 1
// must not be lost at an upgrade, nor may the upgrade approve what nobody approved: an
// approved item keeps its approval under its new digest only when the members version 1
// covered are still the approved ones and nothing it serves changed since the last
// probe, which served it under that approval. Otherwise it goes Pending, and the
// DigestMigrated event and the DefinitionsApproved condition say why.

// digestVersion is the version of the item digests mcpclient computes.
const digestVersion = 2

// digestsV1 are the item kinds as version 1 digested them, by kind name.
var digestsV1 = map[string]definition.ItemKind{
	itemKindTool:               {Name: itemKindTool, Members: []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}},
	definition.PromptKind.Name: {Name: definition.PromptKind.Name, Members: []string{"name", "title", "description", "arguments"}},
	definition.ResourceKind.Name: {Name: definition.ResourceKind.Name,
		Members: []string{"uri", "name", "title", "description", "mimeType", "annotations"}},
	definition.ResourceTemplateKind.Name: {Name: definition.ResourceTemplateKind.Name,
		Members: []string{"uriTemplate", "name", "title", "description", "mimeType", "annotations"}},
	definition.SkillKind.Name: {Name: definition.SkillKind.Name, Members: []string{"uri", "frontmatter", "resources"}},
}

// digestMigration is what the migration of one import's approval record did.
type digestMigration struct {
	from, to string
	// moved counts the items whose digest changed and that kept their approval;
	// unchanged those whose digest version 2 did not change.
	moved, unchanged int
	// held are the items that kept no approval, each with why.
	held []string
}

// note is the DigestMigrated event's note.
func (m *digestMigration) note() string {
	msg := fmt.Sprintf("approval digests are now version %d (they cover _meta, icons and execution too): %d approved items kept their approval under their new digests, %d had the same digest",
		digestVersion, m.moved, m.unchanged)
	if m.from != m.to {
		msg += fmt.Sprintf("; the approved digest %s is now %s (status.approval.migratedFrom keeps the old one approved)", shortDigest(m.from), shortDigest(m.to))
	}
	if len(m.held) > 0 {
		msg += "; " + m.heldText()
	}
	return msg
}

func (m *digestMigration) heldText() string {
	return fmt.Sprintf("%d items are Pending because they could not keep their approval: %s", len(m.held), listAtMost(m.held, 10, "; "))
}

// servedView is an item as a status records what a gateway served of it.
type servedView struct {
	approval cantusv1alpha1.ItemApproval
	digest   string
	// definition is the item's whole definition as the status holds it (a content
	// item's list entry; nil for a tool or when it was too large).
	definition json.RawMessage
	// members maps each member served to its canonical JSON.
	members map[string]string
}

// servedViews are the items a status records, by item key.
func servedViews(s *cantusv1alpha1.RemoteToolImportStatus) map[string]servedView {
	out := map[string]servedView{}
	for _, d := range s.Tools {
		members := map[string]string{}
		set := func(name string, raw []byte) {
			if c := canonicalText(raw); c != "" && c != "null" {
				members[name] = c
			}
		}
		for name, text := range map[string]string{"title": d.Title, "description": d.Description} {
			if text != "" {
				members[name], _ = jsonText(text)
			}
		}
		set("inputSchema", rawOf(d.InputSchema))
		set("outputSchema", rawOf(d.OutputSchema))
		set("annotations", rawOf(d.Annotations))
		var others map[string]json.RawMessage
		if json.Unmarshal(rawOf(d.OtherFields), &others) == nil {
			for name, raw := range others {
				set(name, raw)
			}
		}
		if len(d.Clipped) > 0 {
			members["(clipped)"] = strings.Join(d.Clipped, ",")
		}
		out[itemKey(itemKindTool, d.Name)] = servedView{approval: d.Approval, digest: d.Digest, members: members}
	}
	add := func(kind, key string, c cantusv1alpha1.DiscoveredContent) {
		v := servedView{approval: c.Approval, digest: c.Digest, members: map[string]string{}}
		if c.Definition != nil {
			v.definition = c.Definition.Raw
			var members map[string]json.RawMessage
			if json.Unmarshal(c.Definition.Raw, &members) == nil {
				for name, raw := range members {
					v.members[name] = canonicalText(raw)
				}
			}
		}
		out[itemKey(kind, key)] = v
	}
	for _, p := range s.Prompts {
		add(definition.PromptKind.Name, p.Name, p.DiscoveredContent)
	}
	for _, r := range s.Resources {
		add(definition.ResourceKind.Name, r.URI, r.DiscoveredContent)
	}
	for _, t := range s.ResourceTemplates {
		add(definition.ResourceTemplateKind.Name, t.URITemplate, t.DiscoveredContent)
	}
	for _, sk := range s.Skills {
		add(definition.SkillKind.Name, sk.URI, sk.DiscoveredContent)
	}
	return out
}

// canonicalText is raw with its object keys sorted and numbers kept as written; raw
// itself when it is not JSON.
func canonicalText(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return string(raw)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(data)
}

func jsonText(s string) (string, error) {
	data, err := json.Marshal(s)
	return string(data), err
}

// migrateApprovalDigests moves an approval record of an earlier digest version to the
// current one, and says what it did (nil when there was nothing to migrate). prev is the
// record, before the status of the last probe, now the status of this one (whose tools
// are tools), seen the items seen now. The record it returns holds each approved item
// that may keep its approval (see migrationBlocker) under its new digest, and the
// others under their old digest, so that they are Pending; migratedFrom names the
// approved digest the record's new digest stands for.
func migrateApprovalDigests(prev *cantusv1alpha1.ApprovalStatus, before, now *cantusv1alpha1.RemoteToolImportStatus,
	tools []mcpclient.Tool, seen definitionsSeen) (*cantusv1alpha1.ApprovalStatus, *digestMigration) {
	if prev.DigestVersion >= digestVersion || len(prev.Approved) == 0 || digestOfApproved(prev.Approved) != prev.ApprovedDigest {
		return prev, nil
	}
	full := make(map[string]json.RawMessage, len(tools))
	for _, t := range tools {
		full[itemKey(itemKindTool, t.Name)] = t.Raw
	}
	was, is := servedViews(before), servedViews(now)
	for key, v := range is {
		if v.definition != nil {
			full[key] = v.definition
		}
	}
	m := &digestMigration{from: prev.ApprovedDigest}
	migrated := prev.DeepCopy()
	for i, a := range prev.Approved {
		key := itemKey(a.Kind, a.Name)
		it, ok := seen.byKey[key]
		switch {
		case !ok:
			continue // no longer served: the record keeps it, as Removed
		case it.approved.Digest == a.Digest:
			m.unchanged++
			continue
		}
		if why := migrationBlocker(a, full[key], was[key], is[key]); why != "" {
			m.held = append(m.held, fmt.Sprintf("%s %s (%s)", a.Kind, clip.Bytes(a.Name, 64), why))
			continue
		}
		migrated.Approved[i] = it.approved
		m.moved++
	}
	migrated.ApprovedDigest = digestOfApproved(migrated.Approved)
	m.to = migrated.ApprovedDigest
	if migrated.ApprovedDigest != prev.ApprovedDigest {
		migrated.MigratedFrom = prev.ApprovedDigest
		if prev.FirstSeenDigest == prev.ApprovedDigest {
			migrated.FirstSeenDigest = migrated.ApprovedDigest
		}
	}
	return migrated, m
}

// migrationBlocker says why an item approved under an earlier digest version may not
// keep its approval under its new digest; "" when it may: the members the old digest
// covered are still the approved ones (definition, as sent now, has the approved old
// digest), the last probe served it as approved under that digest, and what it serves
// now is what it served then.
func migrationBlocker(approved cantusv1alpha1.ApprovedItem, definition json.RawMessage, was, is servedView) string {
	old, known := digestsV1[approved.Kind]
	if !known {
		return "an item of a kind version 1 did not digest"
	}
	if definition == nil {
		return "the status holds no definition of it (too large), so it cannot be compared"
	}
	if d, err := old.Digest(definition); err != nil || d != approved.Digest {
		return "it changed since it was approved"
	}
	if was.approval != cantusv1alpha1.ItemApproved || was.digest != approved.Digest {
		return "the last probe did not serve it as approved"
	}
	if changed := differingServedMembers(was.members, is.members); len(changed) > 0 {
		return strings.Join(changed, ", ") + " changed since the last probe, which served it under the old digest"
	}
	return ""
}

// differingServedMembers names, sorted, the members served differently in two views.
func differingServedMembers(a, b map[string]string) []string {
	names := map[string]bool{}
	for name := range a {
		names[name] = true
	}
	for name := range b {
		names[name] = true
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if a[name] != b[name] {
			out = append(out, name)
		}
	}
	return out
}
