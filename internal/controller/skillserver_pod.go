package controller

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/policy"
)

// Pod overrides need the ToolSourcePolicy: whoever may create a SkillServer would
// otherwise run any image, under any service account of the namespace (image pull
// secrets and cloud workload identity work without a mounted token).

// podOverrideChecks are the checks spec.pod asks for, each naming what it checks.
func podOverrideChecks(ss *cantusv1alpha1.SkillServer) []func(*policy.Checker) policy.Decision {
	pod := ss.Spec.Pod
	if pod == nil {
		return nil
	}
	var checks []func(*policy.Checker) policy.Decision
	if pod.Image != "" {
		checks = append(checks, func(c *policy.Checker) policy.Decision { return c.CheckPodImage(pod.Image) })
	}
	if pod.ServiceAccountName != "" {
		checks = append(checks, func(c *policy.Checker) policy.Decision { return c.CheckServiceAccount(pod.ServiceAccountName) })
	}
	return checks
}

// checkPodOverrides sets PodAllowed and says whether the workload may be applied. A
// refusal makes the server Stalled with the policy's message and applies nothing (what
// runs keeps running); a pass only by an Audit policy is applied, with a Warning event.
func (r *SkillServerReconciler) checkPodOverrides(ctx context.Context, ss *cantusv1alpha1.SkillServer) (bool, error) {
	if admitted, err := r.checkAdmission(ctx, ss); !admitted || err != nil {
		return false, err
	}
	checks := podOverrideChecks(ss)
	if len(checks) == 0 {
		removeCondition(ss, cantusv1alpha1.ConditionPodAllowed)
		return true, nil
	}
	checker, err := policyCheckerFor(ctx, r.Client, ss.Namespace, nil)
	if err != nil {
		return false, err
	}
	var refused, audited, allowed []string
	for _, check := range checks {
		switch d := check(checker); {
		case !d.Allowed:
			refused = append(refused, d.Message)
		case d.Reason == cantusv1alpha1.ReasonAllowedByAudit:
			audited = append(audited, d.Message)
		default:
			allowed = append(allowed, d.Message)
		}
	}
	switch {
	case len(refused) > 0:
		msg := "spec.pod is not allowed: " + strings.Join(refused, "; ")
		setCondition(ss, cantusv1alpha1.ConditionPodAllowed, metav1.ConditionFalse, cantusv1alpha1.ReasonPodNotAllowlisted, msg)
		setCondition(ss, cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonPodNotAllowlisted, msg)
		return false, nil
	case len(audited) > 0:
		msg := strings.Join(append(audited, allowed...), "; ")
		r.warnOnce(ss, cantusv1alpha1.ReasonPodAllowedByAudit, msg)
		setCondition(ss, cantusv1alpha1.ConditionPodAllowed, metav1.ConditionTrue, cantusv1alpha1.ReasonPodAllowedByAudit, msg)
	default:
		setCondition(ss, cantusv1alpha1.ConditionPodAllowed, metav1.ConditionTrue, cantusv1alpha1.ReasonPodAllowed, strings.Join(allowed, "; "))
	}
	return true, nil
}

// checkAdmission refuses, before anything is applied, a server whose pods the operator's
// admission policy would refuse (config/admission: its service account is not in the
// parameters' serviceAccounts): applied, its Deployment would be denied on every
// reconcile and its rollout would never end. The ToolSourcePolicy is what a tenant is
// held to; the admission parameters are what the operator is held to, and a server
// needs both.
func (r *SkillServerReconciler) checkAdmission(ctx context.Context, ss *cantusv1alpha1.SkillServer) (bool, error) {
	if r.AdmissionParams == nil {
		return true, nil
	}
	account := "default"
	if ss.Spec.Pod != nil && ss.Spec.Pod.ServiceAccountName != "" {
		account = ss.Spec.Pod.ServiceAccountName
	}
	refusal, err := r.AdmissionParams.CheckServiceAccount(ctx, ss.Namespace, account)
	if err != nil {
		return false, err
	}
	if refusal != nil {
		msg := "spec.pod is not allowed: " + refusal.Message
		setCondition(ss, cantusv1alpha1.ConditionPodAllowed, metav1.ConditionFalse, cantusv1alpha1.ReasonPodNotAdmitted, msg)
		setCondition(ss, cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonPodNotAdmitted, msg)
		return false, nil
	}
	return true, nil
}

// admissionRecheck is how often a server refused by the admission parameters is looked
// at again: the manager does not watch that ConfigMap (its cache holds only its own).
const admissionRecheck = time.Minute

// refusedPodResult requeues a server refused by the admission parameters, which no
// watch reports a change of; a ToolSourcePolicy refusal waits for the watched policy.
func refusedPodResult(ss *cantusv1alpha1.SkillServer) ctrl.Result {
	if c := apimeta.FindStatusCondition(ss.Status.Conditions, cantusv1alpha1.ConditionPodAllowed); c != nil && c.Reason == cantusv1alpha1.ReasonPodNotAdmitted {
		return ctrl.Result{RequeueAfter: admissionRecheck}
	}
	return ctrl.Result{}
}

// warnOnce records a Warning event when PodAllowed is about to change to reason and
// message, so that an audited pass is announced when it starts, not on every reconcile.
func (r *SkillServerReconciler) warnOnce(ss *cantusv1alpha1.SkillServer, reason, message string) {
	prev := apimeta.FindStatusCondition(ss.Status.Conditions, cantusv1alpha1.ConditionPodAllowed)
	if r.Recorder == nil || (prev != nil && prev.Reason == reason && prev.Message == message) {
		return
	}
	r.Recorder.Eventf(ss, nil, corev1.EventTypeWarning, reason, "Reconcile", "spec.pod %s", message)
}

// serversWithPodOverrides are the SkillServers whose pods a policy decides on.
func (r *SkillServerReconciler) serversWithPodOverrides(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.serversWhere(ctx, "with pod overrides", func(ss *cantusv1alpha1.SkillServer) bool {
		return len(podOverrideChecks(ss)) > 0
	})
}
