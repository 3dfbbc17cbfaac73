package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// Both reconcilers compute a whole status in memory, set its conditions with
// setCondition, and end with writeStatus.

// conditioned is a kind of this group: its status has conditions and records the
// reconcile request it handled last.
type conditioned interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}

// setCondition sets one condition for the object's current generation. It is pure: it
// changes only the status in memory, which the reconciler writes once.
func setCondition(obj conditioned, condType string, status metav1.ConditionStatus, reason, message string) {
	conditions := obj.GetConditions()
	apimeta.SetStatusCondition(&conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: obj.GetGeneration(),
	})
	obj.SetConditions(conditions)
}

// removeCondition drops a condition that no longer applies.
func removeCondition(obj conditioned, condType string) {
	conditions := obj.GetConditions()
	apimeta.RemoveStatusCondition(&conditions, condType)
	obj.SetConditions(conditions)
}

// statusWriter ends every reconcile of one kind the same way.
type statusWriter struct {
	client   client.Client
	recorder events.EventRecorder
	// announced is the condition whose transitions are recorded as events, and action
	// the events' action: Ready for a SkillServer, the handshake for an import.
	announced, action string
	// settle, when set, adjusts the finished status before it is compared with the
	// stored one (an import keeps its probe times when nothing else changed).
	settle func(before, after conditioned)
	// written, when set, skips a patch of the very status this process last wrote.
	written *writtenStatuses
}

// finish ends a reconcile whose status was computed in memory from before into after:
// it writes the status, then turns a stale status into a prompt retry and an object
// newly Stalled into a terminal error.
func (w statusWriter) finish(ctx context.Context, before, after conditioned, parts func(conditioned) statusParts, result ctrl.Result, reconcileErr error) (ctrl.Result, error) {
	err := w.write(ctx, before, after, parts, reconcileErr)
	result, err = requeueIfStale(ctx, result, err)
	return result, stalledAsTerminal(before, after, result, err)
}

// write finishes the status computed in memory (observedGeneration, Reconciling, the
// reconcile request handled), patches it when it changed, and then records an event when
// the announced condition changed status or reason.
func (w statusWriter) write(ctx context.Context, before, after conditioned, parts func(conditioned) statusParts, reconcileErr error) error {
	common := parts(after)
	finishStatus(after, common.observedGeneration, reconcileErr)
	if value, pending := common.requests.ReconcileRequested(after.GetAnnotations()); pending && reconcileErr == nil {
		common.requests.LastHandledReconcileAt = value
	}
	if w.settle != nil {
		w.settle(before, after)
	}
	changed := !sameJSON(parts(before).status, common.status)
	var entry writtenStatus
	recordable := false
	if changed && w.written != nil {
		entry, recordable = statusWritten(before, after, common.status)
	}
	if recordable && w.written.holds(keyOf(after), entry) {
		// Computed from the version the last write was made from: the cache is behind.
		return reconcileErr
	}
	written, err := patchStatusIfChanged(ctx, w.client, before, after, changed)
	switch {
	case written && recordable:
		w.written.remember(keyOf(after), entry)
	case written:
		w.written.forget(keyOf(after))
	}
	if err != nil {
		if reconcileErr == nil && apierrors.IsConflict(err) {
			return fmt.Errorf("%w: %w", errStaleStatus, err)
		}
		return errors.Join(reconcileErr, err)
	}
	if written {
		w.recordTransition(before, after)
	}
	return reconcileErr
}

// errStaleStatus says the status was computed from an object older than the stored one
// (the cache had not yet seen the last reconcile's own status write when a child's
// event started this one): nothing failed, the reconcile only needs to run again.
var errStaleStatus = errors.New("the status was computed from a stale object")

// staleStatusRetry is how soon a reconcile whose status was stale runs again: long
// enough for the cache to catch up, and outside the controller's error backoff, whose
// shared bucket (10 a second) throttled thousands of such retries at scale.
const staleStatusRetry = 500 * time.Millisecond

// requeueIfStale turns a stale status into a prompt retry instead of a reconcile error.
func requeueIfStale(ctx context.Context, result ctrl.Result, err error) (ctrl.Result, error) {
	if !errors.Is(err, errStaleStatus) {
		return result, err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("status computed from a stale object; reconciling again", "after", staleStatusRetry)
	if result.RequeueAfter == 0 || result.RequeueAfter > staleStatusRetry {
		result.RequeueAfter = staleStatusRetry
	}
	return result, nil
}

// stalledAsTerminal turns a reconcile that has just found its object Stalled into a
// reconcile.TerminalError: controller-runtime logs it once at error level and does not
// retry it, since only a change of the spec (or of what the spec names, whose watches
// start a new reconcile) can help. An object already Stalled for the same reason and
// message gives nil, so that one generation is not logged as an error again at every
// event. A result that asks to run again (a recheck of what is not watched) is kept.
func stalledAsTerminal(before, after conditioned, result ctrl.Result, err error) error {
	if err != nil || result.RequeueAfter > 0 {
		return err
	}
	now := apimeta.FindStatusCondition(after.GetConditions(), cantusv1alpha1.ConditionStalled)
	if now == nil || now.Status != metav1.ConditionTrue {
		return nil
	}
	was := apimeta.FindStatusCondition(before.GetConditions(), cantusv1alpha1.ConditionStalled)
	if was != nil && was.Status == metav1.ConditionTrue && was.Reason == now.Reason && was.Message == now.Message {
		return nil
	}
	return reconcile.TerminalError(fmt.Errorf("stalled (%s): %s", now.Reason, now.Message))
}

// statusParts are what every status of this group has, by address, and the whole
// status, compared to decide whether to write.
type statusParts struct {
	observedGeneration *int64
	requests           *cantusv1alpha1.ReconcileRequestStatus
	status             any
}

// recordTransition records an event when the announced condition changed status or
// reason: Normal when it became True, Warning when False, with its reason and message.
func (w statusWriter) recordTransition(before, after conditioned) {
	was := apimeta.FindStatusCondition(before.GetConditions(), w.announced)
	now := apimeta.FindStatusCondition(after.GetConditions(), w.announced)
	if w.recorder == nil || now == nil || now.Status == metav1.ConditionUnknown ||
		(was != nil && was.Status == now.Status && was.Reason == now.Reason) || firstSteps(was, now) {
		return
	}
	eventType := corev1.EventTypeNormal
	if now.Status != metav1.ConditionTrue {
		eventType = corev1.EventTypeWarning
	}
	w.recorder.Eventf(after, nil, eventType, now.Reason, w.action, "%s", now.Message)
}

// firstSteps says whether an object's first status only says it is on its way: not a
// warning for whoever watches Warning events, and at a thousand new servers a thousand
// writes the API server need not take. Its conditions say it all the same.
func firstSteps(was, now *metav1.Condition) bool {
	return was == nil && now.Status == metav1.ConditionFalse && now.Reason == cantusv1alpha1.ReasonProgressing
}

// sameJSON says whether two statuses would be stored the same: a nil and an empty list,
// or two encodings of one value, are no change worth a write.
func sameJSON(a, b any) bool {
	if equality.Semantic.DeepEqual(a, b) {
		return true
	}
	var va, vb any
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil || json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// reconcileRequested lets through an update that only changed the cantus.dev/requestedAt
// annotation: the generation does not move, and the request must still be handled.
var reconcileRequested = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return false
		}
		value, ok := e.ObjectNew.GetAnnotations()[cantusv1alpha1.ReconcileRequestAnnotation]
		return ok && value != e.ObjectOld.GetAnnotations()[cantusv1alpha1.ReconcileRequestAnnotation]
	},
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// specOrRequestChanged is the predicate of both kinds: a new generation, or a new
// reconcile request.
var specOrRequestChanged = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, reconcileRequested)

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
func summarizeReady(obj conditioned, prerequisites []readyPrerequisite, readyReason, readyMessage string) {
	setReady := func(status metav1.ConditionStatus, reason, message string) {
		setCondition(obj, cantusv1alpha1.ConditionReady, status, reason, message)
	}
	conditions := obj.GetConditions()
	if c := apimeta.FindStatusCondition(conditions, cantusv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		setReady(metav1.ConditionFalse, c.Reason, c.Message)
		return
	}
	for _, p := range prerequisites {
		c := apimeta.FindStatusCondition(conditions, p.condType)
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
func finishStatus(obj conditioned, observedGeneration *int64, reconcileErr error) {
	if reconcileErr == nil {
		*observedGeneration = obj.GetGeneration()
	}
	ready := apimeta.FindStatusCondition(obj.GetConditions(), cantusv1alpha1.ConditionReady)
	stalled := apimeta.FindStatusCondition(obj.GetConditions(), cantusv1alpha1.ConditionStalled)
	if (ready != nil && ready.Status == metav1.ConditionTrue) || (stalled != nil && stalled.Status == metav1.ConditionTrue) {
		removeCondition(obj, cantusv1alpha1.ConditionReconciling)
		return
	}
	reason, message := cantusv1alpha1.ReasonProgressing, "reconciling"
	if ready != nil {
		reason, message = ready.Reason, ready.Message
	}
	setCondition(obj, cantusv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, message)
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
