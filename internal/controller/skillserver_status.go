package controller

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// The setters below are pure: they change only the status they are given, so the
// reconciler computes the whole status in memory and writes it once.

// skillServerStatus gives writeStatus a SkillServer's status.
func skillServerStatus(obj conditioned) statusParts {
	ss := obj.(*cantusv1alpha1.SkillServer)
	return statusParts{observedGeneration: &ss.Status.ObservedGeneration, requests: &ss.Status.ReconcileRequestStatus, status: &ss.Status}
}

// setStalled records a spec that cannot work; summarizeReady then gives Ready the same
// message so that `kubectl get` and `kubectl wait` show why.
func setStalled(ss *cantusv1alpha1.SkillServer, err error) {
	msg := fmt.Sprintf("the spec cannot be served, fix it and re-apply: %v", err)
	setCondition(ss, cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonInvalidSpec, msg)
}

func clearStalled(ss *cantusv1alpha1.SkillServer) {
	removeCondition(ss, cantusv1alpha1.ConditionStalled)
}

// setSchemaPortable warns about schema keys strict clients reject; the schemas are
// served unchanged either way.
func setSchemaPortable(ss *cantusv1alpha1.SkillServer, nonPortable []string) {
	if len(nonPortable) == 0 {
		setCondition(ss, cantusv1alpha1.ConditionSchemaPortable, metav1.ConditionTrue, cantusv1alpha1.ReasonPortable,
			"no inputSchema uses keys that strict clients are known to reject")
		return
	}
	setCondition(ss, cantusv1alpha1.ConditionSchemaPortable, metav1.ConditionFalse, cantusv1alpha1.ReasonNonPortableKeys,
		fmt.Sprintf("served unchanged, but strict MCP clients may reject these schema keys: %s; "+
			"drop title/examples and additionalProperties: false if a client refuses the tool", strings.Join(nonPortable, ", ")))
}

// setRendered records what rendering reported and says whether the config can be
// applied: a spec with problems (nothing rendered) or a rendered config the adapter would
// refuse leaves the server Stalled.
func setRendered(ss *cantusv1alpha1.SkillServer, report render.Report, rendered bool) bool {
	if rendered {
		setSchemaPortable(ss, report.NonPortableKeys)
		setImportsResolved(ss, report.Imports)
		setAppViewsCallable(ss, report.Imports.RenamedAppTools)
		setImportedContentServed(ss, report.ImportedContent)
		setGroupsPrefixed(ss, report.Groups)
	}
	if report.Invalid != nil {
		setStalled(ss, report.Invalid)
		return false
	}
	clearStalled(ss)
	setSkippedToolsStalled(ss, report.Imports)
	setAudiencesAllowed(ss, report.Audiences)
	return true
}

// setSkippedToolsStalled makes a gateway that leaves out imported tools it cannot serve
// Stalled (kstatus: Failed), not Reconciling for ever: it serves the rest, but nothing it
// does will serve those tools; the owner excludes them or the remote fixes them (an import
// whose tools change reconciles the gateway again).
func setSkippedToolsStalled(ss *cantusv1alpha1.SkillServer, imports render.Imports) {
	if len(ss.Spec.Imports) == 0 || len(imports.Skipped) == 0 {
		return
	}
	setCondition(ss, cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonToolsSkipped,
		fmt.Sprintf("%d imported tools cannot be served (the others are): %s; exclude them with spec.imports[].exclude, or fix them at the remote",
			len(imports.Skipped), listAtMost(imports.Skipped, 10, "; ")))
}

// nameConflictRetry is how often a SkillServer whose child name is taken looks again.
const nameConflictRetry = time.Minute

// setNameConflict records a child whose name someone else's object holds: nothing was
// written, and only the owner of that object or a rename of the SkillServer can fix it.
func setNameConflict(ss *cantusv1alpha1.SkillServer, conflict *workload.NameConflictError) {
	setCondition(ss, cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonNameConflict, conflict.Error())
	setCondition(ss, cantusv1alpha1.ConditionAvailable, metav1.ConditionFalse, cantusv1alpha1.ReasonNameConflict, conflict.Error())
}

// relayReach is what ImportedToolsServable adds for a stateless server of more than
// one replica whose imports relay requests: a caller of 2025-11-25 or older answers
// such a request with a POST of its own, which could reach another replica than the one
// that asked, so only callers of 2026-07-28 (which answer with input-required retries)
// are asked; "" otherwise.
func relayReach(ss *cantusv1alpha1.SkillServer) string {
	replicas := ptr.Deref(ss.Spec.Replicas, cantusv1alpha1.DefaultReplicas)
	if !ss.Spec.StatelessOrDefault() || replicas <= 1 {
		return ""
	}
	var relaying []string
	for _, imp := range ss.Spec.Imports {
		if len(imp.Relay) > 0 {
			relaying = append(relaying, imp.Name)
		}
	}
	if len(relaying) == 0 {
		return ""
	}
	return fmt.Sprintf("; what the remotes of %s ask a caller reaches only callers of protocol 2026-07-28: this server is stateless with %d replicas, "+
		"so a caller of 2025-11-25 or older, whose answer could reach another replica, is refused it (run one replica, or set spec.stateless: false with one replica, to ask those callers too)",
		listAtMost(relaying, 10, ", "), replicas)
}

// setApplyFailed records a failure to run the workload; the reconciler retries it.
func setApplyFailed(ss *cantusv1alpha1.SkillServer, err error) {
	msg := fmt.Sprintf("could not apply the adapter workload: %v", err)
	setCondition(ss, cantusv1alpha1.ConditionAvailable, metav1.ConditionFalse, cantusv1alpha1.ReasonApplyFailed, msg)
}

// setImportsResolved says which imports are served; the tools of the others are not,
// and neither are imported tools whose names were taken.
func setImportsResolved(ss *cantusv1alpha1.SkillServer, imports render.Imports) {
	if len(ss.Spec.Imports) == 0 {
		removeCondition(ss, cantusv1alpha1.ConditionImportsResolved)
		removeCondition(ss, cantusv1alpha1.ConditionToolNamesUnique)
		removeCondition(ss, cantusv1alpha1.ConditionImportedToolsServable)
		return
	}
	relayNote := relayReach(ss)
	switch {
	case len(imports.Skipped) == 0 && len(imports.NotRelayed) > 0:
		// True: the server serves every imported tool it can; the owner chose not to
		// relay what the others need, so they are named, not a failure.
		setCondition(ss, cantusv1alpha1.ConditionImportedToolsServable, metav1.ConditionTrue, cantusv1alpha1.ReasonCapabilitiesNotRelayed,
			fmt.Sprintf("every imported tool that can be served is; %d are left out because their remotes list them only to clients with capabilities that spec.imports[].relay does not relay: %s; relay those to serve them%s",
				len(imports.NotRelayed), listAtMost(imports.NotRelayed, 10, "; "), relayNote))
	case len(imports.Skipped) == 0:
		setCondition(ss, cantusv1alpha1.ConditionImportedToolsServable, metav1.ConditionTrue, cantusv1alpha1.ReasonAllServable,
			"every imported tool is served as its remote defined it"+relayNote)
	default:
		setCondition(ss, cantusv1alpha1.ConditionImportedToolsServable, metav1.ConditionFalse, cantusv1alpha1.ReasonToolsSkipped,
			fmt.Sprintf("%d imported tools left out because they cannot be served (the others are): %s%s",
				len(imports.Skipped), listAtMost(imports.Skipped, 10, "; "), relayNote))
	}
	if len(imports.Unresolved) == 0 {
		setCondition(ss, cantusv1alpha1.ConditionImportsResolved, metav1.ConditionTrue, cantusv1alpha1.ReasonAllResolved,
			fmt.Sprintf("all %d imports are Ready and served%s", len(ss.Spec.Imports), withheldNote(imports.Withheld)))
	} else {
		setCondition(ss, cantusv1alpha1.ConditionImportsResolved, metav1.ConditionFalse, cantusv1alpha1.ReasonImportsNotReady,
			"not served: "+strings.Join(imports.Unresolved, "; "))
	}
	if len(imports.Collisions) == 0 {
		setCondition(ss, cantusv1alpha1.ConditionToolNamesUnique, metav1.ConditionTrue, cantusv1alpha1.ReasonNoCollisions, "every served tool has its own name")
	} else {
		setCondition(ss, cantusv1alpha1.ConditionToolNamesUnique, metav1.ConditionFalse, cantusv1alpha1.ReasonNameCollision,
			"imported tools left out because their names collide (use spec.imports[].prefix or renames): "+strings.Join(imports.Collisions, "; "))
	}
}

// setObserved copies what the runtime observed into the status.
func setObserved(ss *cantusv1alpha1.SkillServer, obs workload.Observation, configHash string, imported []cantusv1alpha1.ServedTool) {
	ss.Status.URL = obs.URL
	ss.Status.Selector = obs.Selector
	ss.Status.Replicas = obs.Replicas
	ss.Status.ReadyReplicas = obs.ReadyReplicas
	ss.Status.ConfigHash = configHash
	ss.Status.Tools = append(servedTools(ss), imported...)
	ss.Status.ToolCount = int32(len(ss.Status.Tools))
	status := metav1.ConditionFalse
	if obs.Available {
		status = metav1.ConditionTrue
	}
	setCondition(ss, cantusv1alpha1.ConditionAvailable, status, obs.Reason, obs.Message)
}

// skillServerReadyPrerequisites are the conditions that must not be False for a
// SkillServer to be Ready, in the order their reason is reported; Available must also be
// set. A gateway that leaves out some of what it was asked to serve is not Ready, even
// though it serves the rest: `kubectl wait` should not pass on half a spec.
var skillServerReadyPrerequisites = []readyPrerequisite{
	{condType: cantusv1alpha1.ConditionPodAllowed},
	{condType: cantusv1alpha1.ConditionContentValid},
	// Before Available and ImportsResolved: a gateway that cannot act for its callers
	// says so, not that an import is unresolved.
	{condType: cantusv1alpha1.ConditionCallerCredentialsReady},
	{condType: cantusv1alpha1.ConditionAvailable, unsetMessage: "waiting for the workload"},
	{condType: cantusv1alpha1.ConditionImportsResolved},
	{condType: cantusv1alpha1.ConditionToolNamesUnique},
	{condType: cantusv1alpha1.ConditionImportedToolsServable},
	{condType: cantusv1alpha1.ConditionVerified},
}

func summarizeSkillServerReady(ss *cantusv1alpha1.SkillServer) {
	summarizeReady(ss, skillServerReadyPrerequisites, cantusv1alpha1.ReasonReconciled,
		fmt.Sprintf("%d tools%s served at %s", ss.Status.ToolCount, contentSummary(ss), ss.Status.URL))
}

// listAtMost joins the first n items with sep and says how many more there are, so
// that a remote with thousands of bad tools cannot make a message huge.
func listAtMost(items []string, n int, sep string) string {
	if len(items) <= n {
		return strings.Join(items, sep)
	}
	return fmt.Sprintf("%s%sand %d more", strings.Join(items[:n], sep), sep, len(items)-n)
}

func servedTools(ss *cantusv1alpha1.SkillServer) []cantusv1alpha1.ServedTool {
	tools := make([]cantusv1alpha1.ServedTool, 0, len(ss.Spec.Skills))
	for _, s := range ss.Spec.Skills {
		tools = append(tools, cantusv1alpha1.ServedTool{Name: s.Name, Source: "skill"})
	}
	if m := ss.Spec.Memory; m != nil {
		tools = append(tools, cantusv1alpha1.ServedTool{Name: m.ToolNameOrDefault(), Source: "memory"})
	}
	return tools
}

// withheldNote says which imported tools wait for approval at their imports: a held
// change is not a failure of the gateway, which serves the approved tools.
func withheldNote(withheld []string) string {
	if len(withheld) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d imported tools are withheld until their imports' owners approve their new or changed definitions (see the imports' DefinitionsApproved): %s",
		len(withheld), listAtMost(withheld, 10, ", "))
}

// setAppViewsCallable warns when imported tools that open an MCP App view are served
// under new names: a view calls its tools by the names its remote gave them, which the
// server does not serve.
func setAppViewsCallable(ss *cantusv1alpha1.SkillServer, renamed []string) {
	if len(ss.Spec.Imports) == 0 {
		removeCondition(ss, cantusv1alpha1.ConditionAppViewsCallable)
		return
	}
	if len(renamed) == 0 {
		setCondition(ss, cantusv1alpha1.ConditionAppViewsCallable, metav1.ConditionTrue, cantusv1alpha1.ReasonAppToolsKeepTheirNames,
			"every imported tool that opens an MCP App view is served under its remote's name")
		return
	}
	setCondition(ss, cantusv1alpha1.ConditionAppViewsCallable, metav1.ConditionFalse, cantusv1alpha1.ReasonAppToolsRenamed,
		fmt.Sprintf("served, but calls made by their MCP App views will fail, because a view calls tools by the names its remote gave them: %s; "+
			"re-export the import without a prefix or rename for its views to work", listAtMost(renamed, 10, "; ")))
}
