package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// Both reconcilers compute a whole status in memory and end with the same three steps:
// summarizeReady, finishStatus, then patchStatusIfChanged.

// readyPrerequisite is a condition Ready waits for. One with an unsetMessage is required:
// until it is set, Ready is False (Progressing) with that message; one without counts
// only once set.
type readyPrerequisite struct {
	condType     string
	unsetMessage string
}

// summarizeReady is the one rule for Ready, for every kind: Stalled True makes Ready False
// with Stalled's reason and message; otherwise the first prerequisite that is not True
// gives Ready its reason and message; otherwise Ready is True with readyReason and
// readyMessage. Setters record what they observed and never write Ready themselves.
func summarizeReady(conditions *[]metav1.Condition, generation int64, prerequisites []readyPrerequisite, readyReason, readyMessage string) {
	setReady := func(status metav1.ConditionStatus, reason, message string) {
		apimeta.SetStatusCondition(conditions, metav1.Condition{
			Type: cantusv1alpha1.ConditionReady, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
		})
	}
	if c := apimeta.FindStatusCondition(*conditions, cantusv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		setReady(metav1.ConditionFalse, c.Reason, c.Message)
		return
	}
	for _, p := range prerequisites {
		c := apimeta.FindStatusCondition(*conditions, p.condType)
		switch {
		case c == nil && p.unsetMessage != "":
			setReady(metav1.ConditionFalse, cantusv1alpha1.ReasonProgressing, p.unsetMessage)
			return
		case c != nil && c.Status != metav1.ConditionTrue:
			setReady(metav1.ConditionFalse, c.Reason, c.Message)
			return
		}
	}
	setReady(metav1.ConditionTrue, readyReason, readyMessage)
}

// finishStatus sets what every status says the same way: observedGeneration, once the
// reconcile has looked at the whole spec without error, and Reconciling, so that
// kstatus (Flux, Argo CD, `kubectl wait`) tells "working on it" from "stuck" from "done":
// Ready True is Current, Stalled True is Failed, anything else is Reconciling.
func finishStatus(conditions *[]metav1.Condition, observedGeneration *int64, generation int64, reconcileErr error) {
	if reconcileErr == nil {
		*observedGeneration = generation
	}
	ready := apimeta.FindStatusCondition(*conditions, cantusv1alpha1.ConditionReady)
	stalled := apimeta.FindStatusCondition(*conditions, cantusv1alpha1.ConditionStalled)
	if (ready != nil && ready.Status == metav1.ConditionTrue) || (stalled != nil && stalled.Status == metav1.ConditionTrue) {
		apimeta.RemoveStatusCondition(conditions, cantusv1alpha1.ConditionReconciling)
		return
	}
	reason, message := cantusv1alpha1.ReasonProgressing, "reconciling"
	if ready != nil {
		reason, message = ready.Reason, ready.Message
	}
	apimeta.SetStatusCondition(conditions, metav1.Condition{
		Type: cantusv1alpha1.ConditionReconciling, Status: metav1.ConditionTrue,
		Reason: reason, Message: message, ObservedGeneration: generation,
	})
}

// patchStatusIfChanged writes after's status when changed says it differs from before's,
// and reports whether it wrote. The patch carries the resourceVersion the status was
// computed from: a merge patch computed against a stale cached object would otherwise
// keep fields of a newer status it did not change, and mix two reconciles into one
// status. A conflict is retried with the fresh object; an object deleted meanwhile needs
// no status.
func patchStatusIfChanged(ctx context.Context, c client.Client, before, after client.Object, changed bool) (bool, error) {
	if !changed {
		return false, nil
	}
	if err := c.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("patch %s %s status: %w", after.GetObjectKind().GroupVersionKind().Kind, client.ObjectKeyFromObject(after), err)
	}
	return true, nil
}
