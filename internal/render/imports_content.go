package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/definition"
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
	// skill is the served key of the skill whose file a resource is, if any.
	skill string
}

// ownContent is what the server's own content takes: its keys by kind, and the
// directories of its skills (ConfigMap and image alike), each skill://<path> and
// everything under it, which no import may serve into: an image skill's files are
// known only when the adapter reads the image, and a file an import added under an
// own skill's directory would be read under that skill's rule.
type ownContent struct {
	keys map[string]map[string]bool
	// skillPaths are the own skills' paths; skillAncestors every folder above one of
	// them ("acme" for "acme/forms").
	skillPaths, skillAncestors map[string]bool
}

func ownContentOf(cfg *adapterconfig.Config) *ownContent {
	own := &ownContent{
		keys: map[string]map[string]bool{
			adapterconfig.ImportedPrompts: {}, adapterconfig.ImportedResources: {}, adapterconfig.ImportedResourceTemplates: {},
			adapterconfig.ImportedSkills: {},
		},
		skillPaths: map[string]bool{}, skillAncestors: map[string]bool{},
	}
	for _, p := range cfg.Prompts {
		own.keys[adapterconfig.ImportedPrompts][p.Name] = true
	}
	for _, r := range cfg.Resources {
		own.keys[adapterconfig.ImportedResources][r.URI] = true
	}
	for _, s := range cfg.AgentSkills {
		own.addSkill(s.Path)
	}
	for _, img := range cfg.ImageSkills {
		own.addSkill(img.Path)
	}
	for _, t := range cfg.ResourceTemplates {
		own.keys[adapterconfig.ImportedResourceTemplates][t.URITemplate] = true
	}
	return own
}

func (o *ownContent) addSkill(path string) {
	o.skillPaths[path] = true
	for dir := range folderPrefixes(path) {
		if dir != path {
			o.skillAncestors[dir] = true
		}
	}
}

// takes says whether the server's own content takes key of kind: the same key, an
// imported skill whose directory holds an own skill's or lies in one, or a resource in
// an own skill's directory (the directory itself included).
func (o *ownContent) takes(kind, key string) bool {
	if o.keys[kind][key] {
		return true
	}
	switch kind {
	case adapterconfig.ImportedSkills:
		path := SkillPathOf(key)
		return path != "" && (o.skillAncestors[path] || o.inOwnSkill(path))
	case adapterconfig.ImportedResources:
		rest, ok := strings.CutPrefix(key, adapterconfig.SkillURIScheme)
		return ok && o.inOwnSkill(rest)
	}
	return false
}

// inOwnSkill says whether path ("acme/forms/ref.md") is an own skill's path or lies
// under one.
func (o *ownContent) inOwnSkill(path string) bool {
	for dir := range folderPrefixes(path) {
		if o.skillPaths[dir] {
			return true
		}
	}
	return false
}

// folderPrefixes yields path cut at each "/" and then path itself: "a", "a/b", "a/b/c"
// for "a/b/c".
func folderPrefixes(path string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for i := 0; i < len(path); i++ {
			if path[i] == '/' && !yield(path[:i]) {
				return
			}
		}
		yield(path)
	}
}

// reexportContent puts the content of the imports in spec.imports into cfg.Imported
// (nil when there is none) and reports it. Imports that are not ready are reported by
// reexport with their tools.
func reexportContent(ss *cantusv1alpha1.SkillServer, imports map[string]*cantusv1alpha1.RemoteToolImport, cfg *adapterconfig.Config, reserved ...string) ContentReport {
	var report ContentReport
	own := ownContentOf(cfg)
	kinds := map[string]*contentKindCandidates{}
	for _, kind := range []string{adapterconfig.ImportedPrompts, adapterconfig.ImportedResources, adapterconfig.ImportedResourceTemplates, adapterconfig.ImportedSkills} {
		kinds[kind] = &contentKindCandidates{byKey: map[string][]contentCandidate{}}
	}
	for _, spec := range ss.Spec.Imports {
		imp, why := readyImport(imports, spec.Name)
		if why != "" {
			continue
		}
		if reason, _ := refuseCallerCredentials(ss, imp, reserved); reason != "" {
			continue // reported by reexport with its tools
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
			b.RemoteName, b.Eras = name, itemEras(p.Eras, backend.RemoteEras)
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
			b := readable
			b.Eras = itemEras(r.Eras, readable.RemoteEras)
			c := contentCandidate{item: adapterconfig.ImportedItem{Key: uri, Definition: def, Remote: b}, from: from}
			if skills.listed && strings.HasPrefix(uri, adapterconfig.SkillURIScheme) {
				// A skill's file goes with its skill: moved under the prefix, or not
				// served when its skill is not selected (or, below, left out).
				skill, ok := skills.skillOf(uri)
				if !ok {
					continue
				}
				c.skill = skill
				if served := skills.move(uri); served != uri {
					c.item.Key, c.item.RemoteKey, c.item.Definition = served, uri, withMember(def, "uri", served)
				}
			}
			kinds[adapterconfig.ImportedResources].add(c)
		}
		for _, t := range imp.Status.ResourceTemplates {
			if tmpl, def, ok := definitionOf(t.DiscoveredContent, "uriTemplate", "resource template", t.URITemplate, from, &report); ok {
				b := readable
				b.Eras = itemEras(t.Eras, readable.RemoteEras)
				kinds[adapterconfig.ImportedResourceTemplates].add(contentCandidate{item: adapterconfig.ImportedItem{Key: tmpl, Definition: def, Remote: b}, from: from})
			}
		}
	}
	out := &adapterconfig.ImportedContent{}
	kinds[adapterconfig.ImportedSkills].dropNestedSkills(own, &report)
	out.Skills = kinds[adapterconfig.ImportedSkills].served(adapterconfig.ImportedSkills, "skill", own, &report)
	skillsByPath := map[string]contentCandidate{}
	for _, s := range out.Skills {
		skillsByPath[SkillPathOf(s.Key)] = kinds[adapterconfig.ImportedSkills].byKey[s.Key][0]
	}
	kinds[adapterconfig.ImportedResources].keepSkillDirectories(skillsByPath, &report)
	out.Prompts = kinds[adapterconfig.ImportedPrompts].served(adapterconfig.ImportedPrompts, "prompt", own, &report)
	out.Resources = kinds[adapterconfig.ImportedResources].served(adapterconfig.ImportedResources, "resource", own, &report)
	out.ResourceTemplates = kinds[adapterconfig.ImportedResourceTemplates].served(adapterconfig.ImportedResourceTemplates, "resource template", own, &report)
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
		slices.Contains(imp.Status.ServerInfo.Capabilities, definition.CapabilityResourcesSubscribe)
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

// drop removes the candidates gone says are gone.
func (k *contentKindCandidates) drop(gone func(contentCandidate) bool) {
	order := k.order[:0]
	for _, key := range k.order {
		kept := slices.DeleteFunc(k.byKey[key], gone)
		if len(kept) == 0 {
			delete(k.byKey, key)
			continue
		}
		k.byKey[key] = kept
		order = append(order, key)
	}
	k.order = order
}

// dropNestedSkills reports and removes the skills whose directory lies in the directory
// of another import's skill, and that skill: a file there would be both imports'. Those
// the server's own skills take are left to served, which says so.
func (k *contentKindCandidates) dropNestedSkills(own *ownContent, report *ContentReport) {
	byPath := map[string][]contentCandidate{}
	for _, key := range k.order {
		if !own.takes(adapterconfig.ImportedSkills, key) {
			byPath[SkillPathOf(key)] = k.byKey[key]
		}
	}
	gone := map[string]bool{}
	for _, key := range k.order {
		path := SkillPathOf(key)
		if byPath[path] == nil {
			continue
		}
		for dir := range folderPrefixes(path) {
			if dir == path {
				break
			}
			for _, outer := range byPath[dir] {
				for _, inner := range k.byKey[key] {
					if outer.from == inner.from {
						continue // a remote may nest its own skills
					}
					report.Collisions = append(report.Collisions, fmt.Sprintf("skill %q from %s lies in the directory of skill %q from %s",
						adapterconfig.ClipName(key), inner.from, adapterconfig.ClipName(outer.item.Key), outer.from))
					gone[key], gone[outer.item.Key] = true, true
				}
			}
		}
	}
	k.drop(func(c contentCandidate) bool { return gone[c.item.Key] })
}

// keepSkillDirectories drops the files of a skill left out (a collision, a check it
// failed: they go with it), and reports and removes the resources another import serves
// in the directory of a served skill (by path), so that no import serves bytes as
// another's skill's file.
func (k *contentKindCandidates) keepSkillDirectories(skills map[string]contentCandidate, report *ContentReport) {
	k.drop(func(c contentCandidate) bool {
		if _, served := skills[SkillPathOf(c.skill)]; c.skill != "" && !served {
			return true
		}
		holder, ok := skillHolding(c.item.Key, skills)
		if !ok || holder.from == c.from {
			return false
		}
		report.Collisions = append(report.Collisions, fmt.Sprintf("resource %q from %s lies in the directory of skill %q from %s",
			adapterconfig.ClipName(c.item.Key), c.from, adapterconfig.ClipName(holder.item.Key), holder.from))
		return true
	})
}

// skillHolding is the skill (of skills, by path) of the deepest directory that holds
// uri, or is uri.
func skillHolding(uri string, skills map[string]contentCandidate) (contentCandidate, bool) {
	var holder contentCandidate
	found := false
	if rest, ok := strings.CutPrefix(uri, adapterconfig.SkillURIScheme); ok {
		for dir := range folderPrefixes(rest) {
			if c, ok := skills[dir]; ok {
				holder, found = c, true
			}
		}
	}
	return holder, found
}

// served are the items whose key exactly one import serves and the server itself does
// not take, each checked as the adapter will; the others are reported.
func (k *contentKindCandidates) served(kind, label string, own *ownContent, report *ContentReport) []adapterconfig.ImportedItem {
	var out []adapterconfig.ImportedItem
	for _, key := range k.order {
		cands := k.byKey[key]
		if ownToo := own.takes(kind, key); ownToo || len(cands) > 1 {
			report.Collisions = append(report.Collisions, describeContentCollision(label, key, ownToo, cands))
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
// at all, the selected skills, and the prefix that moves them.
type importSkills struct {
	listed bool
	skills []importedSkillDir
	prefix string
}

// importedSkillDir is a selected skill's directory at the remote (skill://<path>/) and
// the key it is served as.
type importedSkillDir struct {
	dir, key string
}

// skillOf is the served key of the selected skill whose file uri is: the skill of the
// deepest directory holding it.
func (s importSkills) skillOf(uri string) (string, bool) {
	best := importedSkillDir{}
	for _, sk := range s.skills {
		if strings.HasPrefix(uri, sk.dir) && len(sk.dir) > len(best.dir) {
			best = sk
		}
	}
	return best.key, best.key != ""
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
		entry, foreign, err := out.servedEntry(def, path)
		if err != nil {
			report.Skipped = append(report.Skipped, fmt.Sprintf("skill %q from %s: %v", adapterconfig.ClipName(uri), from, err))
			continue
		}
		if len(foreign) > 0 {
			report.Skipped = append(report.Skipped, fmt.Sprintf("skill %q from %s: its entry lists as its files %s, not under %s; they are left out of it",
				adapterconfig.ClipName(uri), from, quotedAtMost(foreign, maxNamedForeignFiles), adapterconfig.SkillURIScheme+path+"/"))
		}
		key := out.move(uri)
		out.skills = append(out.skills, importedSkillDir{dir: adapterconfig.SkillURIScheme + path + "/", key: key})
		cands.add(contentCandidate{item: adapterconfig.ImportedItem{Key: key, Definition: entry, Remote: backend}, from: from})
	}
	return out
}

// maxNamedForeignFiles bounds the URIs a report names of one skill's foreign files.
const maxNamedForeignFiles = 3

// quotedAtMost is the first n of items, quoted and clipped, and how many more there are.
func quotedAtMost(items []string, n int) string {
	var out []string
	for _, it := range items[:min(n, len(items))] {
		out = append(out, fmt.Sprintf("%q", adapterconfig.ClipName(it)))
	}
	if len(items) > n {
		out = append(out, fmt.Sprintf("and %d more", len(items)-n))
	}
	return strings.Join(out, ", ")
}

// servedEntry is a skills/list entry of the skill at path as served: its resources only
// those under its own skill://<path>/, moved under the prefix with its uri; digests and
// sizes are the remote's, as the bytes are. The adapter governs every file an entry
// lists by the skill's rule, so an entry naming another URI (another import's
// resource, the server's own) would put it under that rule: such files are left out
// and returned. An entry whose resources are not a list of files with a uri is an
// error. An entry that needs no change is def itself.
func (s importSkills) servedEntry(def json.RawMessage, path string) (json.RawMessage, []string, error) {
	var entry map[string]json.RawMessage
	if json.Unmarshal(def, &entry) != nil || entry == nil {
		return nil, nil, errors.New("its entry is not a JSON object")
	}
	var resources []map[string]json.RawMessage
	if raw, ok := entry["resources"]; ok && json.Unmarshal(raw, &resources) != nil {
		return nil, nil, errors.New("its entry's resources are not a list of files")
	}
	dir := adapterconfig.SkillURIScheme + path + "/"
	var kept []map[string]json.RawMessage
	var foreign []string
	for _, r := range resources {
		var fileURI string
		if r == nil || json.Unmarshal(r["uri"], &fileURI) != nil {
			return nil, nil, errors.New("its entry's resources are not a list of files with a uri")
		}
		if !strings.HasPrefix(fileURI, dir) {
			foreign = append(foreign, fileURI)
			continue
		}
		if s.prefix != "" {
			r["uri"], _ = json.Marshal(s.move(fileURI))
		}
		kept = append(kept, r)
	}
	if s.prefix == "" && len(foreign) == 0 {
		return def, nil, nil
	}
	var uri string
	if s.prefix != "" && json.Unmarshal(entry["uri"], &uri) == nil {
		entry["uri"], _ = json.Marshal(s.move(uri))
	}
	if resources != nil {
		if kept == nil {
			kept = []map[string]json.RawMessage{}
		}
		entry["resources"], _ = json.Marshal(kept)
	}
	out, err := json.Marshal(entry)
	if err != nil {
		return nil, nil, fmt.Errorf("encode its entry: %w", err)
	}
	return out, foreign, nil
}
