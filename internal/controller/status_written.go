package controller

import (
	"crypto/sha256"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// writtenStatuses remembers the status this process last wrote to each object. A child's
// event often starts a reconcile before the cache has seen the status the previous one
// wrote; that reconcile computes the same status from the stale object, and patching it
// fails on the optimistic lock, costs a write, and comes back 500 ms later. At 1,000 new
// SkillServers that was one reconcile in six. When the object read is the very version
// the last write was made from (the cache has not caught up with it) and the status
// computed equals the one written then, the API server holds it already. Any other
// version, someone else's write included, is patched as before.
//
// The zero value is ready; it belongs to one reconciler and is safe for its workers.
type writtenStatuses struct {
	last remembered[writtenStatus]
}

type writtenStatus struct {
	uid types.UID
	// from is the resourceVersion of the object the status was computed from.
	from        string
	generation  int64
	fingerprint [sha256.Size]byte
}

// statusWritten is what a write of status to obj, computed from read, records; ok is
// false when the status does not encode. Condition transition times are left out: a
// stale object gives a condition that did not change a transition time of its own.
func statusWritten(read, obj conditioned, status any) (writtenStatus, bool) {
	fingerprint, ok := statusFingerprint(obj, status)
	return writtenStatus{uid: obj.GetUID(), from: read.GetResourceVersion(), generation: obj.GetGeneration(), fingerprint: fingerprint}, ok
}

// holds says whether s is what was last written to the object: the same status,
// computed from the same version of the same object at the same generation.
func (w *writtenStatuses) holds(key types.NamespacedName, s writtenStatus) bool {
	if w == nil {
		return false
	}
	last, found := w.last.load(key)
	return found && last == s
}

// remember records s as the status just written to the object.
func (w *writtenStatuses) remember(key types.NamespacedName, s writtenStatus) {
	if w == nil {
		return
	}
	w.last.store(key, s)
}

// forget drops what was written to an object that is gone.
func (w *writtenStatuses) forget(key types.NamespacedName) {
	if w == nil {
		return
	}
	w.last.forget(key)
}

func keyOf(obj conditioned) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// statusFingerprint hashes status (which holds obj's conditions) with the conditions'
// transition times left out.
func statusFingerprint(obj conditioned, status any) ([sha256.Size]byte, bool) {
	conditions := obj.GetConditions()
	timeless := make([]metav1.Condition, len(conditions))
	for i, c := range conditions {
		c.LastTransitionTime = metav1.Time{}
		timeless[i] = c
	}
	obj.SetConditions(timeless)
	data, err := json.Marshal(status)
	obj.SetConditions(conditions)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256(data), true
}
