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

// definitionsSeen are the items a handshake found, by name, as approval compares them.
type definitionsSeen struct {
	items  []cantusv1alpha1.ApprovedItem
	byName map[string]cantusv1alpha1.ApprovedItem
	texts  map[string]map[string]string // member texts by tool name
	digest string
}

func seenDefinitions(tools []mcpclient.Tool) definitionsSeen {
	seen := definitionsSeen{byName: map[string]cantusv1alpha1.ApprovedItem{}, texts: map[string]map[string]string{}}
	refs := make([]mcpclient.ItemDigest, 0, len(tools))
	for _, t := range tools {
		item := cantusv1alpha1.ApprovedItem{Kind: itemKindTool, Name: t.Name, Digest: t.Digest(), Members: t.MemberDigests()}
		seen.items = append(seen.items, item)
		seen.byName[t.Name] = item
		seen.texts[t.Name] = t.MemberTexts()
		refs = append(refs, mcpclient.ItemDigest{Kind: item.Kind, Name: item.Name, Digest: item.Digest})
	}
	seen.digest = mcpclient.DefinitionsDigest(refs)
	return seen
}

// digestOfApproved recomputes the definitions digest of recorded items, so that a
// record that does not match its digest is never taken as approved.
func digestOfApproved(items []cantusv1alpha1.ApprovedItem) string {
	refs := make([]mcpclient.ItemDigest, 0, len(items))
	for _, it := range items {
		refs = append(refs, mcpclient.ItemDigest{Kind: it.Kind, Name: it.Name, Digest: it.Digest})
	}
	return mcpclient.DefinitionsDigest(refs)
}

// applyApproval decides which of the handshake's tools are served and records it:
// each status tool's approval, status.approval and DefinitionsApproved. before is the
// status as it was, for the approved record and the old text of changed members.
// It returns the pending digest when it is new, for the Warning event.
func applyApproval(imp *cantusv1alpha1.RemoteToolImport, before *cantusv1alpha1.RemoteToolImportStatus, tools []mcpclient.Tool, approving map[string]string) (newlyPending bool) {
	if imp.Spec.Approval.ModeOrDefault() != cantusv1alpha1.ApprovalManual {
		setAutomaticApproval(imp, tools)
		return false
	}
	seen := seenDefinitions(tools)
	prev := before.Approval
	if prev == nil || prev.Mode != cantusv1alpha1.ApprovalManual {
		prev = &cantusv1alpha1.ApprovalStatus{}
	}
	next := &cantusv1alpha1.ApprovalStatus{Mode: cantusv1alpha1.ApprovalManual, FirstSeenDigest: prev.FirstSeenDigest}
	if next.FirstSeenDigest == "" {
		next.FirstSeenDigest = seen.digest
	}
	next.Approved, next.ApprovedDigest, next.ApprovedBy = approvedSet(imp.Spec.Approval, prev, seen, next.FirstSeenDigest, approving)
	approvedByName := map[string]cantusv1alpha1.ApprovedItem{}
	for _, it := range next.Approved {
		approvedByName[it.Name] = it
	}
	for i := range imp.Status.Tools {
		t := &imp.Status.Tools[i]
		t.Digest = seen.byName[t.Name].Digest
		t.Approval = cantusv1alpha1.ItemPending
		if a, ok := approvedByName[t.Name]; ok && a.Digest == t.Digest {
			t.Approval = cantusv1alpha1.ItemApproved
		}
	}
	changes := definitionChanges(seen, approvedByName, oldTexts(before, prev, approvedByName))
	next.ChangeCount = int32(len(changes))
	next.Changes = changes[:min(len(changes), maxListedChanges)]
	if pendingCount(changes) > 0 {
		next.PendingDigest = seen.digest
	}
	imp.Status.Approval = next
	setApprovalCondition(imp, changes)
	return next.PendingDigest != "" && next.PendingDigest != prev.PendingDigest
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
		return seen.items, seen.digest, approving[seen.digest]
	case recordedDigest != "" && approving[recordedDigest] != "":
		return prev.Approved, recordedDigest, approving[recordedDigest]
	case trustsFirstSeen && seen.digest == firstSeen:
		return seen.items, seen.digest, approvedByFirstSeen
	case trustsFirstSeen && recordedDigest == firstSeen:
		return prev.Approved, recordedDigest, approvedByFirstSeen
	}
	return nil, "", ""
}

// setAutomaticApproval marks every tool served without approval.
func setAutomaticApproval(imp *cantusv1alpha1.RemoteToolImport, tools []mcpclient.Tool) {
	digests := make(map[string]string, len(tools))
	for _, t := range tools {
		digests[t.Name] = t.Digest()
	}
	for i := range imp.Status.Tools {
		imp.Status.Tools[i].Digest = digests[imp.Status.Tools[i].Name]
		imp.Status.Tools[i].Approval = cantusv1alpha1.ItemAutomatic
	}
	imp.Status.Approval = &cantusv1alpha1.ApprovalStatus{Mode: cantusv1alpha1.ApprovalAutomatic}
	setCondition(imp, cantusv1alpha1.ConditionDefinitionsApproved, metav1.ConditionTrue, cantusv1alpha1.ReasonAutomaticApproval,
		"spec.approval.mode is Automatic: the remote's definitions are served as they change; set it to Manual to hold changes until approved")
}

// oldTexts are the approved texts of the members of each tool, by tool name: from the
// status tools of before whose digest is the approved one, else from the changes
// recorded before (the text they showed as old is still the approved text).
func oldTexts(before *cantusv1alpha1.RemoteToolImportStatus, prev *cantusv1alpha1.ApprovalStatus, approved map[string]cantusv1alpha1.ApprovedItem) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, c := range prev.Changes {
		texts := map[string]string{}
		for _, m := range c.Members {
			texts[m.Member] = m.Old
		}
		out[c.Name] = texts
	}
	for _, d := range before.Tools {
		if a, ok := approved[d.Name]; ok && d.Digest != "" && d.Digest == a.Digest {
			out[d.Name] = discoveredMemberTexts(d)
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

// definitionChanges lists how the tools seen differ from the approved ones, sorted by
// name: added and changed ones (pending) and removed ones.
func definitionChanges(seen definitionsSeen, approved map[string]cantusv1alpha1.ApprovedItem, old map[string]map[string]string) []cantusv1alpha1.DefinitionChange {
	var out []cantusv1alpha1.DefinitionChange
	for _, it := range seen.items {
		a, ok := approved[it.Name]
		switch {
		case !ok:
			out = append(out, cantusv1alpha1.DefinitionChange{Kind: it.Kind, Name: clip(it.Name, maxRemoteNameBytes), Change: cantusv1alpha1.DefinitionAdded})
		case a.Digest != it.Digest:
			out = append(out, cantusv1alpha1.DefinitionChange{Kind: it.Kind, Name: clip(it.Name, maxRemoteNameBytes), Change: cantusv1alpha1.DefinitionChanged,
				Members: changedMembers(a, it, old[it.Name], seen.texts[it.Name])})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(approved)) {
		if _, ok := seen.byName[name]; !ok {
			out = append(out, cantusv1alpha1.DefinitionChange{Kind: approved[name].Kind, Name: clip(name, maxRemoteNameBytes), Change: cantusv1alpha1.DefinitionRemoved})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
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
		out = append(out, cantusv1alpha1.MemberChange{Member: m, Old: clip(oldText[m], maxChangeTextBytes), New: clip(newText[m], maxChangeTextBytes)})
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
// is held and how to approve it.
func setApprovalCondition(imp *cantusv1alpha1.RemoteToolImport, changes []cantusv1alpha1.DefinitionChange) {
	a := imp.Status.Approval
	if pendingCount(changes) == 0 {
		msg := fmt.Sprintf("the %d tools the remote serves are the approved definitions %s (approved by %s)", len(imp.Status.Tools), shortDigest(a.ApprovedDigest), a.ApprovedBy)
		if removed := len(changes); removed > 0 {
			msg += fmt.Sprintf("; %d approved tools are no longer served by the remote", removed)
		}
		setCondition(imp, cantusv1alpha1.ConditionDefinitionsApproved, metav1.ConditionTrue, cantusv1alpha1.ReasonAllApproved, msg)
		return
	}
	reason := cantusv1alpha1.ReasonChangePending
	if d := imp.Spec.Approval.Digest; d != "" && a.ApprovedDigest == "" {
		reason = cantusv1alpha1.ReasonUnknownDigest
	}
	setCondition(imp, cantusv1alpha1.ConditionDefinitionsApproved, metav1.ConditionFalse, reason, pendingMessage(imp, changes))
}

// pendingMessage names what is held (at most ten items), and the command that approves it.
func pendingMessage(imp *cantusv1alpha1.RemoteToolImport, changes []cantusv1alpha1.DefinitionChange) string {
	var held []string
	for _, c := range changes {
		switch c.Change {
		case cantusv1alpha1.DefinitionAdded:
			held = append(held, fmt.Sprintf("%s (new)", clip(c.Name, 64)))
		case cantusv1alpha1.DefinitionChanged:
			members := make([]string, 0, len(c.Members))
			for _, m := range c.Members {
				members = append(members, m.Member)
			}
			held = append(held, fmt.Sprintf("%s (%s changed)", clip(c.Name, 64), strings.Join(members, ", ")))
		}
	}
	a := imp.Status.Approval
	prefix := ""
	if imp.Spec.Approval.Digest != "" && a.ApprovedDigest == "" {
		prefix = "spec.approval.digest matches neither the definitions the remote serves nor the approved ones recorded in status, so none are served; "
	}
	return fmt.Sprintf("%s%d tools are withheld by gateways until approved: %s; status.approval.changes shows what changed. Approve with: kubectl patch remotetoolimport %s -n %s --type merge -p '{\"spec\":{\"approval\":{\"digest\":\"%s\"}}}' (or a DefinitionApproval naming this import and that digest)",
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
