package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// dependsOnPolicyMode says whether a server's rendering depends on the mode of the
// ToolSourcePolicies covering its namespace: refusals that came with a version (the
// OIDC groups prefix, audiences) warn in Audit mode and refuse in Enforce.
func dependsOnPolicyMode(ss *cantusv1alpha1.SkillServer) bool {
	auth := ss.Spec.Auth
	return auth != nil && (auth.OIDC != nil || (auth.ServiceAccountTokens != nil && len(auth.ServiceAccountTokens.Audiences) > 0))
}

// auditPolicyFor names the Audit-mode ToolSourcePolicy when only such policies cover the
// server's namespace, for the servers whose rendering depends on it.
func (r *SkillServerReconciler) auditPolicyFor(ctx context.Context, ss *cantusv1alpha1.SkillServer) (string, error) {
	if !dependsOnPolicyMode(ss) {
		return "", nil
	}
	checker, err := policyCheckerFor(ctx, r.Client, ss.Namespace, nil)
	if err != nil {
		return "", err
	}
	return checker.AuditOnly(), nil
}

// setGroupsPrefixed says how the rules meet OIDC groups: True when every rule group is
// prefixed or a Kubernetes group; False when some are not, saying that they match no
// OIDC token (Enforce) or that an Audit policy keeps OIDC groups unprefixed until they
// move. The server serves either way.
func setGroupsPrefixed(ss *cantusv1alpha1.SkillServer, groups *render.GroupsReport) {
	if groups == nil {
		removeCondition(ss, cantusv1alpha1.ConditionGroupsPrefixed)
		return
	}
	if len(groups.Unprefixed) == 0 {
		setCondition(ss, cantusv1alpha1.ConditionGroupsPrefixed, metav1.ConditionTrue, cantusv1alpha1.ReasonGroupsPrefixed,
			fmt.Sprintf("OIDC groups are matched as %q+group; groups beginning with system: are never taken from an OIDC token", groups.Prefix))
		return
	}
	old := listAtMost(groups.Unprefixed, 8, ", ")
	move := fmt.Sprintf("write them as %q (e.g. %q), or set spec.auth.oidc.groupsPrefix to keep another prefix",
		cantusv1alpha1.DefaultOIDCGroupsPrefix+"<group>", cantusv1alpha1.DefaultOIDCGroupsPrefix+groups.Unprefixed[0])
	if groups.AuditPolicy != "" {
		setCondition(ss, cantusv1alpha1.ConditionGroupsPrefixed, metav1.ConditionFalse, cantusv1alpha1.ReasonUnprefixedGroupsAudited,
			fmt.Sprintf("rules name groups without the OIDC prefix (%s); ToolSourcePolicy %s is in Audit mode, so OIDC groups are still matched unprefixed, and under Enforce these rules would match no OIDC token: %s",
				old, groups.AuditPolicy, move))
		return
	}
	setCondition(ss, cantusv1alpha1.ConditionGroupsPrefixed, metav1.ConditionFalse, cantusv1alpha1.ReasonUnprefixedGroups,
		fmt.Sprintf("rules name groups without the OIDC prefix (%s), which no OIDC token matches: OIDC groups are matched as %q+group; %s",
			old, groups.Prefix, move))
}

// warningConditions are conditions that warn without making the server un-Ready; a
// change of one to False is recorded as a Warning event, so that `kubectl events` shows
// it where the Ready transitions are.
var warningConditions = []string{cantusv1alpha1.ConditionGroupsPrefixed, cantusv1alpha1.ConditionAudiencesAllowed, cantusv1alpha1.ConditionAppViewsCallable}

// kubernetesAudiences are the audiences API servers are commonly configured with
// (--api-audiences defaults to the issuer, which is often the in-cluster URL).
var kubernetesAudiences = []string{
	"https://kubernetes.default.svc", "https://kubernetes.default.svc.cluster.local",
	"kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
}

// reservedAudiences are audiences no tenant's server may accept: the cluster issuer's
// URL (the API server's default audience), the usual in-cluster ones, and those the
// operator was told of (--api-audiences).
func (r *SkillServerReconciler) reservedAudiences(cluster adapterconfig.Issuer) []string {
	reserved := slices.Concat(kubernetesAudiences, r.APIAudiences)
	if cluster.URL != "" {
		reserved = append(reserved, cluster.URL)
	}
	return reserved
}

// setAudiencesAllowed says whether the service-account and OIDC audiences are the
// server's to accept. Under Enforce (or with no policy) a forbidden one was left out of
// the config and the server is Stalled naming it, so that kubectl wait fails with the
// reason; an Audit-mode policy lets it be accepted for now, with a warning.
func setAudiencesAllowed(ss *cantusv1alpha1.SkillServer, audiences *render.AudiencesReport) {
	switch {
	case audiences == nil:
		removeCondition(ss, cantusv1alpha1.ConditionAudiencesAllowed)
	case !audiences.Refused():
		setCondition(ss, cantusv1alpha1.ConditionAudiencesAllowed, metav1.ConditionTrue, cantusv1alpha1.ReasonAudiencesAllowed,
			"no audience is the API server's, the catalog's or another SkillServer's")
	case audiences.AuditPolicy != "":
		setCondition(ss, cantusv1alpha1.ConditionAudiencesAllowed, metav1.ConditionFalse, cantusv1alpha1.ReasonForbiddenAudienceAudited,
			fmt.Sprintf("%s, the API server's, the catalog's or another SkillServer's audience: a token for it works elsewhere. "+
				"ToolSourcePolicy %s is in Audit mode, so it is accepted for now; Enforce refuses it. Remove it and let agents ask for this server's own audience %s",
				forbiddenAudiencesNamed(audiences), audiences.AuditPolicy, render.DefaultServiceAccountAudience(ss)))
	default:
		msg := fmt.Sprintf("%s, the API server's, the catalog's or another SkillServer's audience: a token for it works elsewhere, "+
			"so it is not accepted; remove it and let agents ask for this server's own audience %s",
			forbiddenAudiencesNamed(audiences), render.DefaultServiceAccountAudience(ss))
		setCondition(ss, cantusv1alpha1.ConditionAudiencesAllowed, metav1.ConditionFalse, cantusv1alpha1.ReasonForbiddenAudience, msg)
		setCondition(ss, cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonForbiddenAudience, msg)
	}
}

// forbiddenAudiencesNamed says which field names which forbidden audiences.
func forbiddenAudiencesNamed(audiences *render.AudiencesReport) string {
	var parts []string
	if len(audiences.Forbidden) > 0 {
		parts = append(parts, "spec.auth.serviceAccountTokens.audiences names "+listAtMost(audiences.Forbidden, 4, ", "))
	}
	if len(audiences.OIDCForbidden) > 0 {
		parts = append(parts, "spec.auth.oidc.audiences names "+listAtMost(audiences.OIDCForbidden, 4, ", "))
	}
	return strings.Join(parts, "; ")
}

// recordWarnings records a Warning event for each warning condition that became False
// or changed its reason or message while False.
func (r *SkillServerReconciler) recordWarnings(before, after *cantusv1alpha1.SkillServer) {
	if r.Recorder == nil {
		return
	}
	for _, t := range warningConditions {
		now := apimeta.FindStatusCondition(after.Status.Conditions, t)
		if now == nil || now.Status != metav1.ConditionFalse {
			continue
		}
		if was := apimeta.FindStatusCondition(before.Status.Conditions, t); was != nil && was.Status == now.Status &&
			was.Reason == now.Reason && was.Message == now.Message {
			continue
		}
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, now.Reason, "Reconcile", "%s", now.Message)
	}
}
