// Package v1alpha1 holds the cantus.dev/v1alpha1 API: SkillServer and the kinds that
// build on it.
// +kubebuilder:object:generate=true
// +groupName=cantus.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "cantus.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes are the kinds of this package; the file of each kind adds it in init.
var knownTypes []runtime.Object

func register(objects ...runtime.Object) { knownTypes = append(knownTypes, objects...) }

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
