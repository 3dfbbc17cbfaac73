package render

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A gateway re-exports its imports' prompts, resources and resource templates beside
// their tools. spec.imports[] applies to prompts as to tools (include, exclude, prefix,
// renames, by name); resources and templates keep their URIs, so two imports (or an
// import and the server itself) serving one URI is a collision: neither import's is
// served, and the report says so. Agent Skills are selected by skill path and a prefix
// moves them, their files with them, under skill://<prefix>/… (the prefix without its
// trailing "_", "-" or "."), so that two imports' skills of one path need not collide.

// ContentReport says what became of the imports' content.
type ContentReport struct {
	// Prompts, Resources, ResourceTemplates and Skills count what is served.
	Prompts, Resources, ResourceTemplates, Skills int
	// Collisions name the items left out because their served name or URI was taken.
	Collisions []string
	// Skipped name the items left out because they cannot be served as the remote
	// listed them (a definition the import's status left out, a URI template that does
	// not parse).
	Skipped []string
	// Withheld name the items left out because their new or changed definitions wait
	// for approval at their import.
	Withheld []string
}

// contentCandidate is one import's item for a served key.
type contentCandidate struct {
	item   adapterconfig.ImportedItem
	from   string // "import NAME"
	remote string // the remote's key, when the served one differs
}

// ownContentKeys are the keys the server's own content takes, by kind.
func ownContentKeys(cfg *adapterconfig.Config) map[string]map[string]bool {
	own := map[string]map[string]bool{
		adapterconfig.ImportedPrompts: {}, adapterconfig.ImportedResources: {}, adapterconfig.ImportedResourceTemplates: {},
		adapterconfig.ImportedSkills: {},
	}
	for _, p := range cfg.Prompts {
		own[adapterconfig.ImportedPrompts][p.Name] = true
	}
	for _, r := range cfg.Resources {
		own[adapterconfig.ImportedResources][r.URI] = true
	}
	for _, s := range cfg.AgentSkills {
		own[adapterconfig.ImportedSkills][adapterconfig.SkillURI(s.Path, adapterconfig.SkillManifestFile)] = true
		for _, f := range s.Files {
			own[adapterconfig.ImportedResources][adapterconfig.SkillURI(s.Path, f.Path)] = true
		}
	}
	for _, t := range cfg.ResourceTemplates {
		own[adapterconfig.ImportedResourceTemplates][t.URITemplate] = true
	}
	return own
}

// reexportContent puts the content of the imports in spec.imports into cfg.Imported
// (nil when there is none) and reports it. Imports that are not ready are reported by
// reexport with their tools.
func reexportContent(ss *cantusv1alpha1.SkillServer, imports map[string]*cantusv1alpha1.RemoteToolImport, cfg *adapterconfig.Config) ContentReport {
	var report ContentReport
	own := ownContentKeys(cfg)
	kinds := map[string]*contentKindCandidates{}
	for _, kind := range []string{adapterconfig.ImportedPrompts, adapterconfig.ImportedResources, adapterconfig.ImportedResourceTemplates, adapterconfig.ImportedSkills} {
		kinds[kind] = &contentKindCandidates{byKey: map[string][]contentCandidate{}}
	}
	for _, spec := range ss.Spec.Imports {
		imp, why := readyImport(imports, spec.Name)
		if why != "" {
			continue
		}
		backend, _ := remoteBackend(imp)
		from := "import " + spec.Name
		readable := backend // resources and templates: subscriptions are relayed when the remote offers them
		readable.Subscribe = offersSubscriptions(imp)
		for _, p := range imp.Status.Prompts {
			name, def, ok := definitionOf(p.DiscoveredContent, "name", "prompt", p.Name, from, &report)
			if !ok || !selected(spec, name) {
				continue
			}
			served := servedName(spec, name)
			b := backend
			b.RemoteName = name
			c := contentCandidate{item: adapterconfig.ImportedItem{Key: served, Definition: withMember(def, "name", served), Remote: b}, from: from}
			if served != name {
				c.remote = name
			}
			kinds[adapterconfig.ImportedPrompts].add(c)
		}
		skills := reexportSkills(spec, imp, backend, from, kinds[adapterconfig.ImportedSkills], &report)
		for _, r := range imp.Status.Resources {
			uri, def, ok := definitionOf(r.DiscoveredContent, "uri", "resource", r.URI, from, &report)
			if !ok {
				continue
			}
			item := adapterconfig.ImportedItem{Key: uri, Definition: def, Remote: readable}
			if skills.listed && strings.HasPrefix(uri, adapterconfig.SkillURIScheme) {
				// A skill's file goes with its skill: moved under the prefix, or not
				// served when its skill is not.
				if !skills.selected(uri) {
					continue
				}
				if served := skills.move(uri); served != uri {
					item.Key, item.RemoteKey, item.Definition = served, uri, withMember(def, "uri", served)
				}
			}
			kinds[adapterconfig.ImportedResources].add(contentCandidate{item: item, from: from})
		}
		for _, t := range imp.Status.ResourceTemplates {
			if tmpl, def, ok := definitionOf(t.DiscoveredContent, "uriTemplate", "resource template", t.URITemplate, from, &report); ok {
				kinds[adapterconfig.ImportedResourceTemplates].add(contentCandidate{item: adapterconfig.ImportedItem{Key: tmpl, Definition: def, Remote: readable}, from: from})
			}
		}
	}
	out := &adapterconfig.ImportedContent{}
	out.Prompts = kinds[adapterconfig.ImportedPrompts].served(adapterconfig.ImportedPrompts, "prompt", own, &report)
	out.Resources = kinds[adapterconfig.ImportedResources].served(adapterconfig.ImportedResources, "resource", own, &report)
	out.ResourceTemplates = kinds[adapterconfig.ImportedResourceTemplates].served(adapterconfig.ImportedResourceTemplates, "resource template", own, &report)
	out.Skills = kinds[adapterconfig.ImportedSkills].served(adapterconfig.ImportedSkills, "skill", own, &report)
	report.Prompts, report.Resources, report.ResourceTemplates = len(out.Prompts), len(out.Resources), len(out.ResourceTemplates)
	report.Skills = len(out.Skills)
	if !out.Empty() {
		cfg.Imported = out
	}
	return report
}

// offersSubscriptions says whether the gateway can relay resource subscriptions to the
// import's remote: it declared resources.subscribe at its last handshake, and it is
// reached directly (the stdio bridge passes no notifications outside a request on).
func offersSubscriptions(imp *cantusv1alpha1.RemoteToolImport) bool {
	return imp.Spec.Transport != cantusv1alpha1.ImportTransportStdio && imp.Status.ServerInfo != nil &&
		slices.Contains(imp.Status.ServerInfo.Capabilities, mcpclient.CapabilityResourcesSubscribe)
}

// contentKindCandidates are the candidates of one kind, by served key, in the order
// the keys were first seen.
type contentKindCandidates struct {
	order []string
	byKey map[string][]contentCandidate
}

func (k *contentKindCandidates) add(c contentCandidate) {
	if _, seen := k.byKey[c.item.Key]; !seen {
		k.order = append(k.order, c.item.Key)
	}
	k.byKey[c.item.Key] = append(k.byKey[c.item.Key], c)
}

// served are the items whose key exactly one import serves and the server itself does
// not, each checked as the adapter will; the others are reported.
func (k *contentKindCandidates) served(kind, label string, own map[string]map[string]bool, report *ContentReport) []adapterconfig.ImportedItem {
	var out []adapterconfig.ImportedItem
	for _, key := range k.order {
		cands := k.byKey[key]
		if own[kind][key] || len(cands) > 1 {
			report.Collisions = append(report.Collisions, describeContentCollision(label, key, own[kind][key], cands))
			continue
		}
		c := cands[0]
		if err := adapterconfig.CheckImportedItem(kind, c.item); err != nil {
			report.Skipped = append(report.Skipped, fmt.Sprintf("%s %q from %s: %v", label, adapterconfig.ClipName(key), c.from, err))
			continue
		}
		out = append(out, c.item)
	}
	return out
}

func describeContentCollision(label, key string, ownToo bool, cands []contentCandidate) string {
	var from []string
	if ownToo {
		from = append(from, "this server")
	}
	for _, c := range cands {
		if c.remote != "" {
			from = append(from, fmt.Sprintf("%s (remote %s %s)", c.from, label, adapterconfig.ClipName(c.remote)))
		} else {
			from = append(from, c.from)
		}
	}
	return fmt.Sprintf("%s %q from %s", label, adapterconfig.ClipName(key), strings.Join(from, " and "))
}

// definitionOf is the exact key member and the definition of an item the import's
// status lists; an item whose definition the status left out is reported as skipped
// (its clipped key cannot be served faithfully).
func definitionOf(d cantusv1alpha1.DiscoveredContent, keyMember, label, statusKey, from string, report *ContentReport) (string, json.RawMessage, bool) {
	if d.Approval == cantusv1alpha1.ItemPending {
		// New or changed at the remote and not approved yet (spec.approval.mode Manual).
		report.Withheld = append(report.Withheld, fmt.Sprintf("%s %q from %s", label, adapterconfig.ClipName(statusKey), from))
		return "", nil, false
	}
	if d.Definition == nil || len(d.Definition.Raw) == 0 {
		report.Skipped = append(report.Skipped, fmt.Sprintf("%s %q from %s: the import's status holds no definition of it (too large)", label, adapterconfig.ClipName(statusKey), from))
		return "", nil, false
	}
	var members map[string]json.RawMessage
	var key string
	if json.Unmarshal(d.Definition.Raw, &members) != nil || json.Unmarshal(members[keyMember], &key) != nil || key == "" {
		report.Skipped = append(report.Skipped, fmt.Sprintf("%s %q from %s: its definition has no %s", label, adapterconfig.ClipName(statusKey), from, keyMember))
		return "", nil, false
	}
	if d.Approval == cantusv1alpha1.ItemApproved {
		return key, approvedDefinition(label, d.Definition.Raw), true
	}
	return key, d.Definition.Raw, true
}

// withMember is the JSON object def with member set to value.
func withMember(def json.RawMessage, member, value string) json.RawMessage {
	var members map[string]json.RawMessage
	if json.Unmarshal(def, &members) != nil || members == nil {
		return def
	}
	members[member], _ = json.Marshal(value)
	out, err := json.Marshal(members)
	if err != nil {
		return def
	}
	return out
}

// importedEndpoints are the remote endpoints imported content reaches, for the rollout
// hash (as the imported tools' are).
func importedEndpoints(cfg *adapterconfig.Config) []string {
	if cfg.Imported.Empty() {
		return nil
	}
	var out []string
	if len(cfg.Imported.Skills) > 0 {
		// The Skills extension is declared when the adapter starts.
		out = append(out, "serves imported skills")
	}
	if len(cfg.Imported.Prompts)+len(cfg.Imported.ResourceTemplates) > 0 {
		// So is the completions capability.
		out = append(out, "serves completions")
	}
	if adapterconfig.RelaysSubscriptions(cfg) {
		// And resources.subscribe.
		out = append(out, "relays resource subscriptions")
	}
	for _, items := range [][]adapterconfig.ImportedItem{cfg.Imported.Prompts, cfg.Imported.Resources, cfg.Imported.ResourceTemplates} {
		for _, it := range items {
			out = append(out, it.Remote.URL+" "+it.Remote.CAFile+" "+fmt.Sprint(sortedHeaderFiles(it.Remote.HeaderFiles)))
		}
	}
	return out
}

// SkillPathOf is the skill path of the URI of a skill's SKILL.md
// ("skill://acme/refunds/SKILL.md" → "acme/refunds"); "" for any other URI.
func SkillPathOf(uri string) string {
	rest, ok := strings.CutPrefix(uri, adapterconfig.SkillURIScheme)
	if !ok {
		return ""
	}
	path, ok := strings.CutSuffix(rest, "/"+adapterconfig.SkillManifestFile)
	if !ok {
		return ""
	}
	return path
}

// importSkills is what one import's skills re-export: whether the import lists skills
// at all, the directories (skill://<path>/) of those selected, and the prefix that
// moves them.
type importSkills struct {
	listed bool
	dirs   []string
	prefix string
}

// selected says whether uri is a file of a selected skill.
func (s importSkills) selected(uri string) bool {
	for _, dir := range s.dirs {
		if strings.HasPrefix(uri, dir) {
			return true
		}
	}
	return false
}

// move is uri under the prefix: skill://<prefix>/<rest>.
func (s importSkills) move(uri string) string {
	if s.prefix == "" {
		return uri
	}
	return adapterconfig.SkillURIScheme + s.prefix + "/" + strings.TrimPrefix(uri, adapterconfig.SkillURIScheme)
}

// skillPrefixOf is the skill path segment a spec.imports[] prefix puts before skills:
// the prefix without its trailing separators ("books_" → "books").
func skillPrefixOf(prefix string) string {
	return strings.TrimRight(prefix, "_-.")
}

// reexportSkills adds the import's selected skills (by skill path) to cands, their
// URIs moved under the prefix, and returns what its skill files need.
func reexportSkills(spec cantusv1alpha1.SkillImport, imp *cantusv1alpha1.RemoteToolImport, backend adapterconfig.RemoteBackend,
	from string, cands *contentKindCandidates, report *ContentReport) importSkills {
	out := importSkills{listed: len(imp.Status.Skills) > 0, prefix: skillPrefixOf(spec.Prefix)}
	for _, sk := range imp.Status.Skills {
		uri, def, ok := definitionOf(sk.DiscoveredContent, "uri", "skill", sk.URI, from, report)
		if !ok {
			continue
		}
		path := SkillPathOf(uri)
		if path == "" {
			report.Skipped = append(report.Skipped, fmt.Sprintf("skill %q from %s: not the skill:// URI of a %s", adapterconfig.ClipName(uri), from, adapterconfig.SkillManifestFile))
			continue
		}
		if !selected(spec, path) {
			continue
		}
		out.dirs = append(out.dirs, adapterconfig.SkillURIScheme+path+"/")
		cands.add(contentCandidate{item: adapterconfig.ImportedItem{Key: out.move(uri), Definition: out.movedEntry(def), Remote: backend}, from: from})
	}
	return out
}

// movedEntry is a skills/list entry with its uri and its resources' uris moved under
// the prefix; digests and sizes are the remote's, as the bytes are.
func (s importSkills) movedEntry(def json.RawMessage) json.RawMessage {
	if s.prefix == "" {
		return def
	}
	var entry map[string]json.RawMessage
	if json.Unmarshal(def, &entry) != nil || entry == nil {
		return def
	}
	var uri string
	if json.Unmarshal(entry["uri"], &uri) == nil {
		entry["uri"], _ = json.Marshal(s.move(uri))
	}
	var resources []map[string]json.RawMessage
	if json.Unmarshal(entry["resources"], &resources) == nil && resources != nil {
		for _, r := range resources {
			var fileURI string
			if json.Unmarshal(r["uri"], &fileURI) == nil {
				r["uri"], _ = json.Marshal(s.move(fileURI))
			}
		}
		entry["resources"], _ = json.Marshal(resources)
	}
	out, err := json.Marshal(entry)
	if err != nil {
		return def
	}
	return out
}
