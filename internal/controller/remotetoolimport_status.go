package controller

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/policy"
)

// importStatus gives writeStatus a RemoteToolImport's status.
func importStatus(obj conditioned) statusParts {
	imp := obj.(*cantusv1alpha1.RemoteToolImport)
	return statusParts{observedGeneration: &imp.Status.ObservedGeneration, requests: &imp.Status.ReconcileRequestStatus, status: &imp.Status}
}

// setSourceAllowed records the policy decision.
func setSourceAllowed(imp *cantusv1alpha1.RemoteToolImport, d policy.Decision) {
	status := metav1.ConditionFalse
	if d.Allowed {
		status = metav1.ConditionTrue
	}
	setCondition(imp, cantusv1alpha1.ConditionSourceAllowed, status, d.Reason, d.Message)
}

// setNotAllowed withdraws the tools of a source the policies refuse: they must not be
// used, so they are not kept as stale either. No connection was attempted.
func setNotAllowed(imp *cantusv1alpha1.RemoteToolImport, d policy.Decision) {
	imp.Status.Tools = nil
	imp.Status.ToolCount = 0
	imp.Status.ToolsTruncated = false
	imp.Status.Stale = false
	imp.Status.CatalogDigest = ""
	imp.Status.ServerInfo = nil
	imp.Status.Addresses = nil
	msg := "no connection attempted: the source is not allowed"
	setCondition(imp, cantusv1alpha1.ConditionHandshakeSucceeded, metav1.ConditionUnknown, cantusv1alpha1.ReasonNotAttempted, msg)
	setCondition(imp, cantusv1alpha1.ConditionToolsDiscovered, metav1.ConditionFalse, cantusv1alpha1.ReasonNotAttempted, msg)
	removeCondition(imp, cantusv1alpha1.ConditionStale)
}

// setImportStalled records a spec that can never work; summarizeImportReady gives Ready the
// same message so that `kubectl get` and `kubectl wait` show why.
func setImportStalled(imp *cantusv1alpha1.RemoteToolImport, problems string) {
	msg := "the spec cannot work, fix it and re-apply: " + problems
	setCondition(imp, cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonInvalidSpec, msg)
}

// setPrerequisiteMissing is for what the import needs before a handshake (a Secret, the
// stdio bridge): the handshake is Unknown for that reason, and the tools of an earlier
// success are kept but marked stale.
func setPrerequisiteMissing(imp *cantusv1alpha1.RemoteToolImport, reason, message string) {
	setCondition(imp, cantusv1alpha1.ConditionHandshakeSucceeded, metav1.ConditionUnknown, reason, message)
	markStaleIfTools(imp, message)
}

// setHandshakeFailed records a failed probe. Earlier tools stay, explicitly stale.
func setHandshakeFailed(imp *cantusv1alpha1.RemoteToolImport, err error, now time.Time) {
	reason, message := handshakeFailure(err)
	imp.Status.ConsecutiveFailures++
	imp.Status.LastProbeTime = &metav1.Time{Time: now}
	setCondition(imp, cantusv1alpha1.ConditionHandshakeSucceeded, metav1.ConditionFalse, reason, message)
	if len(imp.Status.Tools) == 0 {
		setCondition(imp, cantusv1alpha1.ConditionToolsDiscovered, metav1.ConditionFalse, reason, "no handshake has succeeded yet")
	}
	markStaleIfTools(imp, message)
}

func markStaleIfTools(imp *cantusv1alpha1.RemoteToolImport, why string) {
	if len(imp.Status.Tools) == 0 {
		return
	}
	imp.Status.Stale = true
	since := "an earlier handshake"
	if imp.Status.LastSuccessTime != nil {
		since = "the handshake of " + imp.Status.LastSuccessTime.UTC().Format(time.RFC3339)
	}
	setCondition(imp, cantusv1alpha1.ConditionStale, metav1.ConditionTrue, cantusv1alpha1.ReasonLastProbeFailed,
		fmt.Sprintf("the %d tools listed are from %s; the last probe failed: %s", len(imp.Status.Tools), since, why))
}

func handshakeFailure(err error) (reason, message string) {
	var herr *mcpclient.Error
	if errors.As(err, &herr) {
		return handshakeReason(herr.Reason), herr.Error()
	}
	return cantusv1alpha1.ReasonHandshakeFailed, "mcp_handshake_failed: " + err.Error()
}

// handshakeReasons is the one place where the MCP client's failure codes become the
// API's condition reasons.
var handshakeReasons = map[string]string{
	mcpclient.ReasonTimeout:           cantusv1alpha1.ReasonTimeout,
	mcpclient.ReasonConnectionRefused: cantusv1alpha1.ReasonConnectionRefused,
	mcpclient.ReasonDNSError:          cantusv1alpha1.ReasonDNSError,
	mcpclient.ReasonTLSError:          cantusv1alpha1.ReasonTLSError,
	mcpclient.ReasonUnauthorized:      cantusv1alpha1.ReasonUnauthorized,
	mcpclient.ReasonHTTPError:         cantusv1alpha1.ReasonHTTPError,
	mcpclient.ReasonProtocolError:     cantusv1alpha1.ReasonProtocolError,
	mcpclient.ReasonInitializeFailed:  cantusv1alpha1.ReasonInitializeFailed,
	mcpclient.ReasonToolsListFailed:   cantusv1alpha1.ReasonToolsListFailed,
	mcpclient.ReasonResponseTooLarge:  cantusv1alpha1.ReasonResponseTooLarge,
	mcpclient.ReasonRedirectRefused:   cantusv1alpha1.ReasonRedirectRefused,
	mcpclient.ReasonConnectionDropped: cantusv1alpha1.ReasonConnectionDropped,
	mcpclient.ReasonSessionLost:       cantusv1alpha1.ReasonSessionLost,
	mcpclient.ReasonInvalidConfig:     cantusv1alpha1.ReasonInvalidConfig,
	mcpclient.ReasonContentListFailed: cantusv1alpha1.ReasonContentListFailed,
}

// handshakeReason is the API's reason for a failure code of the MCP client.
func handshakeReason(code string) string {
	if reason, ok := handshakeReasons[code]; ok {
		return reason
	}
	return cantusv1alpha1.ReasonHandshakeFailed
}

// setHandshakeSucceeded records a successful probe and returns the tool names added and
// removed since the last one.
func setHandshakeSucceeded(imp *cantusv1alpha1.RemoteToolImport, res *mcpclient.Result, tools []mcpclient.Tool, now time.Time) (added, removed []string) {
	added, removed = diffToolNames(imp.Status.Tools, tools)
	imp.Status.ServerInfo = remoteServerInfo(res)
	imp.Status.Eras = statusEras(res)
	imp.Status.Tools, imp.Status.ToolsTruncated = statusTools(tools)
	imp.Status.ToolCount = int32(len(tools))
	imp.Status.CatalogDigest = mcpclient.Digest(tools)
	imp.Status.Stale = false
	imp.Status.ConsecutiveFailures = 0
	imp.Status.LastProbeTime = &metav1.Time{Time: now}
	imp.Status.LastSuccessTime = &metav1.Time{Time: now}

	setCondition(imp, cantusv1alpha1.ConditionHandshakeSucceeded, metav1.ConditionTrue, cantusv1alpha1.ReasonHandshakeSucceeded,
		"initialized with "+remoteIdentity(imp.Status.ServerInfo))
	if len(tools) == 0 {
		setCondition(imp, cantusv1alpha1.ConditionToolsDiscovered, metav1.ConditionFalse, cantusv1alpha1.ReasonNoTools, "the server lists no tools that pass spec.tools")
	} else {
		setCondition(imp, cantusv1alpha1.ConditionToolsDiscovered, metav1.ConditionTrue, cantusv1alpha1.ReasonToolsListed, toolsSummary(imp))
	}
	removeCondition(imp, cantusv1alpha1.ConditionStale)
	return added, removed
}

// importReadyPrerequisites: an import is Ready once its source is allowed and the last
// handshake succeeded (with stale tools it is not).
var importReadyPrerequisites = []readyPrerequisite{
	{condType: cantusv1alpha1.ConditionSourceAllowed, unsetMessage: "checking the source against the ToolSourcePolicies"},
	{condType: cantusv1alpha1.ConditionHandshakeSucceeded, unsetMessage: "waiting for the first handshake"},
}

func summarizeImportReady(imp *cantusv1alpha1.RemoteToolImport) {
	var readyMessage string
	if info := imp.Status.ServerInfo; info != nil {
		readyMessage = toolsSummary(imp) + " from " + remoteIdentity(info)
	}
	summarizeReady(imp, importReadyPrerequisites, cantusv1alpha1.ReasonHandshakeSucceeded, readyMessage)
}

// remoteIdentity names the remote as its initialize answer did.
func remoteIdentity(info *cantusv1alpha1.RemoteServerInfo) string {
	return fmt.Sprintf("%s %s (protocol %s)", info.Name, info.Version, info.ProtocolVersion)
}

// toolsSummary counts the tools and says what the status left out of them.
func toolsSummary(imp *cantusv1alpha1.RemoteToolImport) string {
	msg := fmt.Sprintf("%d tools", imp.Status.ToolCount)
	if imp.Status.ToolsTruncated {
		msg += fmt.Sprintf("; the status holds %d of them, some clipped or without input schemas, to stay within its size limit", len(imp.Status.Tools))
	}
	if n := countClipped(imp.Status.Tools); n > 0 {
		msg += fmt.Sprintf("; %d of them have members cut short or left out for their size (status.tools[].clipped names them)", n)
	}
	return msg
}

func diffToolNames(before []cantusv1alpha1.DiscoveredTool, after []mcpclient.Tool) (added, removed []string) {
	had := make([]keyed, len(before))
	for i, t := range before {
		had[i] = keyed{key: t.Name}
	}
	has := make([]keyed, len(after))
	for i, t := range after {
		has[i] = keyed{key: t.Name}
	}
	added, removed, _ = diffKeyed(had, has)
	return added, removed
}

// keyed is one entry of a list compared by diffKeyed: its key and what it holds.
type keyed struct{ key, value string }

// diffKeyed compares two lists by key: the keys only after holds (added), only before
// holds (removed), and both hold with another value (changed), each sorted.
func diffKeyed(before, after []keyed) (added, removed, changed []string) {
	had := map[string]string{}
	for _, e := range before {
		had[e.key] = e.value
	}
	has := map[string]bool{}
	for _, e := range after {
		has[e.key] = true
		value, ok := had[e.key]
		switch {
		case !ok:
			added = append(added, e.key)
		case value != e.value:
			changed = append(changed, e.key)
		}
	}
	for key := range had {
		if !has[key] {
			removed = append(removed, key)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	sort.Strings(changed)
	return added, removed, changed
}

// describeToolChange is the note of a ToolsChanged event.
func describeToolChange(added, removed []string) string {
	var parts []string
	if len(added) > 0 {
		parts = append(parts, "added "+clippedNames(added))
	}
	if len(removed) > 0 {
		parts = append(parts, "removed "+clippedNames(removed))
	}
	return strings.Join(parts, "; ")
}

// clippedNames lists at most ten remote tool names, each clipped, for an event note.
func clippedNames(names []string) string {
	clipped := make([]string, 0, len(names))
	for _, n := range names {
		clipped = append(clipped, clip.Bytes(n, 64))
	}
	return listAtMost(clipped, 10, ", ")
}

func countClipped(tools []cantusv1alpha1.DiscoveredTool) int {
	n := 0
	for _, t := range tools {
		if len(t.Clipped) > 0 {
			n++
		}
	}
	return n
}
