package v1alpha1

// ReconcileRequestAnnotation asks the operator to look at an object again now, as Flux's
// reconcile.fluxcd.io/requestedAt does: a RemoteToolImport is probed, a SkillServer's
// pods are verified again. Any new value is a new request, a time stamp being the usual:
//
//	kubectl annotate --overwrite skillserver/x cantus.dev/requestedAt="$(date +%s)"
//
// The value handled last is status.lastHandledReconcileAt.
const ReconcileRequestAnnotation = "cantus.dev/requestedAt"

// ReconcileRequestStatus records which reconcile request the operator handled last.
type ReconcileRequestStatus struct {
	// LastHandledReconcileAt is the value of the cantus.dev/requestedAt annotation the
	// operator handled last.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// ReconcileRequested returns the value of the cantus.dev/requestedAt annotation of an
// object's annotations, and whether it is a request not handled yet.
func (s ReconcileRequestStatus) ReconcileRequested(annotations map[string]string) (string, bool) {
	value, ok := annotations[ReconcileRequestAnnotation]
	return value, ok && value != s.LastHandledReconcileAt
}
