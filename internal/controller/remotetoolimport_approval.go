package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// Approval of definitions (spec.approval). In Manual mode an import serves the items
// of an approved definitions digest; new and changed items are Pending, and gateways
// withhold them. The approved items are recorded in status with their item digests,
// so the approved set survives the remote's changes and the owner's filter edits: an
// item stays approved while its digest is unchanged, whatever else the remote serves.

const (
	// maxListedChanges bounds status.approval.changes; changeCount counts them all.
	maxListedChanges = 64
	// maxChangeTextBytes clips the old and new text of a changed member.
	maxChangeTextBytes = 256
	// approvedByFirstSeen is status.approval.approvedBy for trust on first use.
	approvedByFirstSeen = "spec.approval.approveFirstSeen"
	approvedBySpec      = "spec.approval.digest"
	itemKindTool        = "tool"
)

// approvingDigests maps each digest approved for the import to who approved it:
// spec.approval.digest and the DefinitionApprovals that name the import.
func (r *RemoteToolImportReconciler) approvingDigests(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) (map[string]string, error) {
	out := map[string]string{}
	if imp.Spec.Approval.ModeOrDefault() != cantusv1alpha1.ApprovalManual {
		return out, nil
	}
	list := &cantusv1alpha1.DefinitionApprovalList{}
	if err := r.List(ctx, list, client.InNamespace(imp.Namespace)); err != nil {
		return nil, fmt.Errorf("list DefinitionApprovals: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for _, a := range list.Items {
		if a.Spec.ImportName == imp.Name {
			if _, seen := out[a.Spec.Digest]; !seen {
				out[a.Spec.Digest] = "DefinitionApproval/" + a.Name
			}
		}
	}
	if d := imp.Spec.Approval.Digest; d != "" {
		out[d] = approvedBySpec
	}
	return out, nil
}

// servedItem is one item the import's status lists, as approval sees it: where its
// approval state goes, its definition's member digests and texts.
type servedItem struct {
	approved cantusv1alpha1.ApprovedItem
	texts    map[string]string
	state    *cantusv1alpha1.ItemApproval
}

// itemKey names an item among every kind.
func itemKey(kind, name string) string { return kind + "\x00" + name }

// eraKey names an item's definition in era among every item: itemKey for the main
// definition (era "").
func eraKey(kind, name, era string) string {
	if era == "" {
		return itemKey(kind, name)
	}
	return itemKey(kind, name) + "\x00" + era
}

// approvedKey names a recorded item.
func approvedKey(it cantusv1alpha1.ApprovedItem) string { return eraKey(it.Kind, it.Name, it.Era) }

// definitionsSeen are the items a handshake found, by kind and name, as approval
// compares them.
type definitionsSeen struct {
	items  []servedItem
	byKey  map[string]servedItem
	digest string
}

// seenDefinitions gathers every item the status lists: the tools (their digests from
// the remote's full definitions) and the prompts, resources, resource templates and
// Agent Skills (their digests as the status records them, of the full definitions too).
func seenDefinitions(imp *cantusv1alpha1.RemoteToolImport, tools []mcpclient.Tool) definitionsSeen {
	full := make(map[string]mcpclient.Tool, len(tools))
	for _, t := range tools {
		full[t.Name] = t
	}
	seen := definitionsSeen{byKey: map[string]servedItem{}}
	add := func(it servedItem) {
		seen.items = append(seen.items, it)
		seen.byKey[approvedKey(it.approved)] = it
	}
	for i := range imp.Status.Tools {
		d := &imp.Status.Tools[i]
		t, ok := full[d.Name]
		if !ok {
			continue
		}
		d.Digest = t.Digest()
		add(servedItem{approved: cantusv1alpha1.ApprovedItem{Kind: itemKindTool, Name: d.Name, Digest: t.Digest(), Members: t.MemberDigests()},
			texts: t.MemberTexts(), state: &d.Approval})
		for _, e := range eraItems(d) {
			add(e)
		}
	}
	for _, c := range contentItems(imp) {
		add(c)
	}
	refs := make([]definition.ItemDigest, 0, len(seen.items))
	for _, it := range seen.items {
		refs = append(refs, definition.ItemDigest{Kind: it.approved.Kind, Name: it.approved.Name, Digest: it.approved.Digest, Era: it.approved.Era})
	}
	seen.digest = definition.DefinitionsDigest(refs)
	return seen
}

// eraItems are the definitions a tool of the status has in other eras, as approval
// sees them: each approved on its own (a gateway serves the tool in an era whose
// definition is pending to nobody).
func eraItems(d *cantusv1alpha1.DiscoveredTool) []servedItem {
	out := make([]servedItem, 0, len(d.EraDefinitions))
	for i := range d.EraDefinitions {
		e := &d.EraDefinitions[i]
		it := servedItem{approved: cantusv1alpha1.ApprovedItem{Kind: itemKindTool, Name: d.Name, Digest: e.Digest, Era: e.Era}, state: &e.Approval}
		if e.Definition != nil {
			t := mcpclient.Tool{Name: d.Name, Raw: e.Definition.Raw}
			it.approved.Members, it.texts = t.MemberDigests(), t.MemberTexts()
		}
		out = append(out, it)
	}
	return out
}

// contentItems are the prompts, resources, resource templates and skills of the
// status, keyed as gateways serve them.
func contentItems(imp *cantusv1alpha1.RemoteToolImport) []servedItem {
	var out []servedItem
	add := func(kind definition.ItemKind, key string, c *cantusv1alpha1.DiscoveredContent) {
		item := servedItem{approved: cantusv1alpha1.ApprovedItem{Kind: kind.Name, Name: key, Digest: c.Digest}, state: &c.Approval}
		if c.Definition != nil {
			item.approved.Members = kind.MemberDigests(c.Definition.Raw)
			item.texts = kind.MemberTexts(c.Definition.Raw)
		}
		out = append(out, item)
	}
	for i := range imp.Status.Prompts {
		add(definition.PromptKind, imp.Status.Prompts[i].Name, &imp.Status.Prompts[i].DiscoveredContent)
	}
	for i := range imp.Status.Resources {
		add(definition.ResourceKind, imp.Status.Resources[i].URI, &imp.Status.Resources[i].DiscoveredContent)
	}
	for i := range imp.Status.ResourceTemplates {
		add(definition.ResourceTemplateKind, imp.Status.ResourceTemplates[i].URITemplate, &imp.Status.ResourceTemplates[i].DiscoveredContent)
	}
	for i := range imp.Status.Skills {
		add(definition.SkillKind, imp.Status.Skills[i].URI, &imp.Status.Skills[i].DiscoveredContent)
	}
	return out
}

// digestOfApproved recomputes the definitions digest of recorded items, so that a
// record that does not match its digest is never taken as approved.
func digestOfApproved(items []cantusv1alpha1.ApprovedItem) string {
	refs := make([]definition.ItemDigest, 0, len(items))
	for _, it := range items {
		refs = append(refs, definition.ItemDigest{Kind: it.Kind, Name: it.Name, Digest: it.Digest, Era: it.Era})
	}
	return definition.DefinitionsDigest(refs)
}

// approvalOutcome is what applyApproval tells the reconcile to announce.
type approvalOutcome struct {
	// newlyPending says the pending digest is new, for the DefinitionsChanged event.
	newlyPending bool
	// migration is what moving an approval record to the current digest version did,
	// for the DigestMigrated event; nil when no record was moved.
	migration *digestMigration
}

// applyApproval decides which of the items the status lists are served and records
// it: each item's approval, status.approval and DefinitionsApproved. before is the
// status as it was, for the approved record and the old text of changed members.
func applyApproval(imp *cantusv1alpha1.RemoteToolImport, before *cantusv1alpha1.RemoteToolImportStatus, tools []mcpclient.Tool, approving map[string]string) approvalOutcome {
	seen := seenDefinitions(imp, tools)
	if imp.Spec.Approval.ModeOrDefault() != cantusv1alpha1.ApprovalManual {
		setAutomaticApproval(imp, seen)
		return approvalOutcome{}
	}
	prev := before.Approval
	if prev == nil || prev.Mode != cantusv1alpha1.ApprovalManual {
		prev = &cantusv1alpha1.ApprovalStatus{}
	}
	var out approvalOutcome
	prev, out.migration = migrateApprovalDigests(prev, before, &imp.Status, tools, seen)
	approvingNow := approving
	if prev.MigratedFrom != "" && approving[prev.MigratedFrom] != "" && approving[prev.ApprovedDigest] == "" {
		// The record was migrated from an approved digest: it stands for that digest.
		approvingNow = maps.Clone(approving)
		approvingNow[prev.ApprovedDigest] = approving[prev.MigratedFrom]
	}
	next := &cantusv1alpha1.ApprovalStatus{Mode: cantusv1alpha1.ApprovalManual, FirstSeenDigest: prev.FirstSeenDigest, DigestVersion: digestVersion}
	if next.FirstSeenDigest == "" {
		next.FirstSeenDigest = seen.digest
	}
	next.Approved, next.ApprovedDigest, next.ApprovedBy = approvedSet(imp.Spec.Approval, prev, seen, next.FirstSeenDigest, approvingNow)
	if next.ApprovedDigest != "" && approving[next.ApprovedDigest] == "" && approvingNow[next.ApprovedDigest] != "" {
		next.MigratedFrom = prev.MigratedFrom
	}
	approvedByKey := map[string]cantusv1alpha1.ApprovedItem{}
	for _, it := range next.Approved {
		approvedByKey[approvedKey(it)] = it
	}
	for _, it := range seen.items {
		*it.state = cantusv1alpha1.ItemPending
		if a, ok := approvedByKey[approvedKey(it.approved)]; ok && a.Digest == it.approved.Digest {
			*it.state = cantusv1alpha1.ItemApproved
		}
	}
	changes := definitionChanges(seen, approvedByKey, oldTexts(before, prev, approvedByKey))
	next.ChangeCount = int32(len(changes))
	next.Changes = changes[:min(len(changes), maxListedChanges)]
	if pendingCount(changes) > 0 {
		next.PendingDigest = seen.digest
	}
	imp.Status.Approval = next
	setApprovalCondition(imp, len(seen.items), changes, out.migration)
	out.newlyPending = next.PendingDigest != "" && next.PendingDigest != prev.PendingDigest
	return out
}

// approvedSet is the set of approved items: the definitions seen now when their digest
// is approved (or they are the first seen and the owner trusts those), otherwise the
// recorded set when its digest is still approved, otherwise nothing.
func approvedSet(spec *cantusv1alpha1.ImportApproval, prev *cantusv1alpha1.ApprovalStatus, seen definitionsSeen, firstSeen string, approving map[string]string) ([]cantusv1alpha1.ApprovedItem, string, string) {
	recordedDigest := ""
	if len(prev.Approved) > 0 && digestOfApproved(prev.Approved) == prev.ApprovedDigest {
		recordedDigest = prev.ApprovedDigest
	}
	trustsFirstSeen := spec != nil && spec.ApproveFirstSeen
	switch {
	case approving[seen.digest] != "":
		return seen.approvedItems(), seen.digest, approving[seen.digest]
	case recordedDigest != "" && approving[recordedDigest] != "":
		return prev.Approved, recordedDigest, approving[recordedDigest]
	case trustsFirstSeen && seen.digest == firstSeen:
		return seen.approvedItems(), seen.digest, approvedByFirstSeen
	case trustsFirstSeen && recordedDigest == firstSeen:
		return prev.Approved, recordedDigest, approvedByFirstSeen
	}
	return nil, "", ""
}

// approvedItems are the records of the items seen, for status.approval.approved.
func (seen definitionsSeen) approvedItems() []cantusv1alpha1.ApprovedItem {
	out := make([]cantusv1alpha1.ApprovedItem, 0, len(seen.items))
	for _, it := range seen.items {
		out = append(out, it.approved)
	}
	return out
}

// setAutomaticApproval marks every item served without approval.
func setAutomaticApproval(imp *cantusv1alpha1.RemoteToolImport, seen definitionsSeen) {
	for _, it := range seen.items {
		*it.state = cantusv1alpha1.ItemAutomatic
	}
	imp.Status.Approval = &cantusv1alpha1.ApprovalStatus{Mode: cantusv1alpha1.ApprovalAutomatic, DigestVersion: digestVersion}
	setCondition(imp, cantusv1alpha1.ConditionDefinitionsApproved, metav1.ConditionTrue, cantusv1alpha1.ReasonAutomaticApproval,
		"spec.approval.mode is Automatic: the remote's definitions are served as they change; set it to Manual to hold changes until approved")
}

// oldTexts are the approved texts of the members of each item, by item key: from the
// items of before whose digest is the approved one, else from the changes recorded
// before (the text they showed as old is still the approved text).
func oldTexts(before *cantusv1alpha1.RemoteToolImportStatus, prev *cantusv1alpha1.ApprovalStatus, approved map[string]cantusv1alpha1.ApprovedItem) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, c := range prev.Changes {
		texts := map[string]string{}
		for _, m := range c.Members {
			texts[m.Member] = m.Old
		}
		out[eraKey(c.Kind, c.Name, c.Era)] = texts
	}
	isApproved := func(kind, name, digest string) bool {
		a, ok := approved[itemKey(kind, name)]
		return ok && digest != "" && digest == a.Digest
	}
	for _, d := range before.Tools {
		if isApproved(itemKindTool, d.Name, d.Digest) {
			out[itemKey(itemKindTool, d.Name)] = discoveredMemberTexts(d)
		}
		for _, e := range eraItems(&d) {
			if a, ok := approved[approvedKey(e.approved)]; ok && e.texts != nil && a.Digest == e.approved.Digest {
				out[approvedKey(e.approved)] = e.texts
			}
		}
	}
	old := &cantusv1alpha1.RemoteToolImport{Status: *before.DeepCopy()}
	for _, it := range contentItems(old) {
		if it.texts != nil && isApproved(it.approved.Kind, it.approved.Name, it.approved.Digest) {
			out[itemKey(it.approved.Kind, it.approved.Name)] = it.texts
		}
	}
	return out
}

// discoveredMemberTexts are the member texts of a tool as the status recorded it.
func discoveredMemberTexts(d cantusv1alpha1.DiscoveredTool) map[string]string {
	out := map[string]string{"name": d.Name}
	set := func(member, text string) {
		if text != "" {
			out[member] = text
		}
	}
	set("title", d.Title)
	set("description", d.Description)
	for member, raw := range map[string][]byte{"inputSchema": rawOf(d.InputSchema), "outputSchema": rawOf(d.OutputSchema), "annotations": rawOf(d.Annotations)} {
		set(member, compactJSON(raw))
	}
	var others map[string]json.RawMessage
	if json.Unmarshal(rawOf(d.OtherFields), &others) == nil {
		for _, member := range definition.ToolKind.Members {
			if raw, ok := others[member]; ok {
				set(member, compactJSON(raw))
			}
		}
	}
	return out
}

func compactJSON(raw []byte) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	data, _ := json.Marshal(v)
	return string(data)
}

// definitionChanges lists how the items seen differ from the approved ones, sorted by
// kind and name: added and changed ones (pending) and removed ones.
func definitionChanges(seen definitionsSeen, approved map[string]cantusv1alpha1.ApprovedItem, old map[string]map[string]string) []cantusv1alpha1.DefinitionChange {
	var out []cantusv1alpha1.DefinitionChange
	for _, it := range seen.items {
		key := approvedKey(it.approved)
		a, ok := approved[key]
		change := cantusv1alpha1.DefinitionChange{Kind: it.approved.Kind, Name: clip.Bytes(it.approved.Name, maxRemoteNameBytes), Era: it.approved.Era}
		switch {
		case !ok:
			change.Change = cantusv1alpha1.DefinitionAdded
		case a.Digest != it.approved.Digest:
			change.Change = cantusv1alpha1.DefinitionChanged
			change.Members = changedMembers(a, it.approved, old[key], it.texts)
		default:
			continue
		}
		out = append(out, change)
	}
	for _, key := range slices.Sorted(maps.Keys(approved)) {
		if _, ok := seen.byKey[key]; !ok {
			a := approved[key]
			out = append(out, cantusv1alpha1.DefinitionChange{Kind: a.Kind, Name: clip.Bytes(a.Name, maxRemoteNameBytes), Era: a.Era, Change: cantusv1alpha1.DefinitionRemoved})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind > out[j].Kind // tools first
		}
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Era < out[j].Era
	})
	return out
}

// changedMembers names the members whose digests differ, with old and new text clipped.
func changedMembers(approved, now cantusv1alpha1.ApprovedItem, oldText, newText map[string]string) []cantusv1alpha1.MemberChange {
	members := map[string]bool{}
	for m := range approved.Members {
		members[m] = true
	}
	for m := range now.Members {
		members[m] = true
	}
	var out []cantusv1alpha1.MemberChange
	for _, m := range slices.Sorted(maps.Keys(members)) {
		if approved.Members[m] == now.Members[m] {
			continue
		}
		out = append(out, cantusv1alpha1.MemberChange{Member: m, Old: clip.Bytes(oldText[m], maxChangeTextBytes), New: clip.Bytes(newText[m], maxChangeTextBytes)})
	}
	return out
}

func pendingCount(changes []cantusv1alpha1.DefinitionChange) int {
	n := 0
	for _, c := range changes {
		if c.Change != cantusv1alpha1.DefinitionRemoved {
			n++
		}
	}
	return n
}

// setApprovalCondition says whether everything served is approved and, when not, what
// is held and how to approve it, and why a migration of the digests held items.
func setApprovalCondition(imp *cantusv1alpha1.RemoteToolImport, items int, changes []cantusv1alpha1.DefinitionChange, migration *digestMigration) {
	a := imp.Status.Approval
	if pendingCount(changes) == 0 {
		msg := fmt.Sprintf("the %d items the remote serves (tools, prompts, resources, skills) are the approved definitions %s (approved by %s)", items, shortDigest(a.ApprovedDigest), a.ApprovedBy)
		if removed := len(changes); removed > 0 {
			msg += fmt.Sprintf("; %d approved items are no longer served by the remote", removed)
		}
		setCondition(imp, cantusv1alpha1.ConditionDefinitionsApproved, metav1.ConditionTrue, cantusv1alpha1.ReasonAllApproved, msg)
		return
	}
	reason := cantusv1alpha1.ReasonChangePending
	if d := imp.Spec.Approval.Digest; d != "" && a.ApprovedDigest == "" {
		reason = cantusv1alpha1.ReasonUnknownDigest
	}
	msg := pendingMessage(imp, changes)
	if migration != nil && len(migration.held) > 0 {
		msg = fmt.Sprintf("at the upgrade to approval digests version %d, %s. %s", digestVersion, migration.heldText(), msg)
	}
	setCondition(imp, cantusv1alpha1.ConditionDefinitionsApproved, metav1.ConditionFalse, reason, msg)
}

// pendingMessage names what is held (at most ten items), and the command that approves it.
func pendingMessage(imp *cantusv1alpha1.RemoteToolImport, changes []cantusv1alpha1.DefinitionChange) string {
	var held []string
	for _, c := range changes {
		label := clip.Bytes(c.Name, 64)
		if c.Kind != itemKindTool {
			label = c.Kind + " " + label
		}
		if c.Era != "" {
			label += " in " + c.Era
		}
		switch c.Change {
		case cantusv1alpha1.DefinitionAdded:
			held = append(held, fmt.Sprintf("%s (new)", label))
		case cantusv1alpha1.DefinitionChanged:
			members := make([]string, 0, len(c.Members))
			for _, m := range c.Members {
				members = append(members, m.Member)
			}
			held = append(held, fmt.Sprintf("%s (%s changed)", label, strings.Join(members, ", ")))
		}
	}
	a := imp.Status.Approval
	prefix := ""
	if imp.Spec.Approval.Digest != "" && a.ApprovedDigest == "" {
		prefix = "spec.approval.digest matches neither the definitions the remote serves nor the approved ones recorded in status, so none are served; "
	}
	return fmt.Sprintf("%s%d items are withheld by gateways until approved: %s; status.approval.changes shows what changed. Approve with: kubectl patch remotetoolimport %s -n %s --type merge -p '{\"spec\":{\"approval\":{\"digest\":\"%s\"}}}' (or a DefinitionApproval naming this import and that digest)",
		prefix, len(held), listAtMost(held, 10, ", "), imp.Name, imp.Namespace, a.PendingDigest)
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// importsApprovedBy maps a DefinitionApproval to the import it names.
func importsApprovedBy(_ context.Context, obj client.Object) []reconcile.Request {
	a, ok := obj.(*cantusv1alpha1.DefinitionApproval)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: a.Namespace, Name: a.Spec.ImportName}}}
}

func rawOf(r *runtime.RawExtension) []byte {
	if r == nil {
		return nil
	}
	return r.Raw
}
