package workload

import (
	"k8s.io/apimachinery/pkg/labels"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// Label keys follow the Kubernetes recommended labels, plus one of ours that names the
// owning SkillServer so that `kubectl get pods -l cantus.dev/skillserver=NAME` works.
const (
	LabelName        = "app.kubernetes.io/name"
	LabelInstance    = "app.kubernetes.io/instance"
	LabelComponent   = "app.kubernetes.io/component"
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	LabelSkillServer = "cantus.dev/skillserver"

	// AnnotationConfigHash on the pod template rolls the pods when the config changes.
	AnnotationConfigHash = "cantus.dev/config-hash"

	// OperatorName is the app.kubernetes.io/name of the operator's own pods (config/manager).
	OperatorName = "cantus-operator"
	// FieldOwner is the server-side apply field manager of everything the operator writes.
	FieldOwner = OperatorName

	adapterName = "cantus-adapter"
)

// SelectorLabels select the adapter pods of a SkillServer. They never change, because a
// Deployment's selector is immutable.
func SelectorLabels(ss *cantusv1alpha1.SkillServer) map[string]string {
	return map[string]string{
		LabelName:     adapterName,
		LabelInstance: ss.Name,
	}
}

// Labels are put on every child object.
func Labels(ss *cantusv1alpha1.SkillServer) map[string]string {
	l := SelectorLabels(ss)
	l[LabelComponent] = "skill-server"
	l[LabelManagedBy] = FieldOwner
	l[LabelSkillServer] = ss.Name
	return l
}

// Selector is the pod selector as a string, for the scale subresource.
func Selector(ss *cantusv1alpha1.SkillServer) string {
	return labels.SelectorFromSet(SelectorLabels(ss)).String()
}
