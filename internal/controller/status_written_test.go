package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

func TestWrittenStatusesHoldOnlyWhatWasWritten(t *testing.T) {
	server := func(uid types.UID, generation int64, reason string, at time.Time) *cantusv1alpha1.SkillServer {
		ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "books", UID: uid, Generation: generation}}
		ss.Status.ObservedGeneration = generation
		ss.Status.Conditions = []metav1.Condition{{Type: cantusv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: reason, Message: "0 of 1 adapter pods ready", ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(at)}}
		return ss
	}
	now := time.Now().Truncate(time.Second)
	var w writtenStatuses
	written := server("uid-1", 2, cantusv1alpha1.ReasonProgressing, now)
	if w.holds(written, &written.Status) {
		t.Fatal("nothing written yet, but holds says the status is there")
	}
	w.remember(written, &written.Status)

	tests := []struct {
		name string
		obj  *cantusv1alpha1.SkillServer
		want bool
	}{
		{"the same status", server("uid-1", 2, cantusv1alpha1.ReasonProgressing, now), true},
		{"the same status computed a second later from a stale object", server("uid-1", 2, cantusv1alpha1.ReasonProgressing, now.Add(time.Second)), true},
		{"another reason", server("uid-1", 2, cantusv1alpha1.ReasonDeploymentNotReady, now), false},
		{"a newer generation", server("uid-1", 3, cantusv1alpha1.ReasonProgressing, now), false},
		{"an object of the same name created again", server("uid-2", 2, cantusv1alpha1.ReasonProgressing, now), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.obj.Status.Conditions[0].LastTransitionTime
			if got := w.holds(tt.obj, &tt.obj.Status); got != tt.want {
				t.Errorf("holds = %v, want %v", got, tt.want)
			}
			if tt.obj.Status.Conditions[0].LastTransitionTime != before {
				t.Error("holds changed the object's transition time")
			}
		})
	}

	w.forget(types.NamespacedName{Namespace: "ns", Name: "books"})
	if w.holds(written, &written.Status) {
		t.Error("a forgotten object's status is still held")
	}
	var none *writtenStatuses
	if none.holds(written, &written.Status) {
		t.Error("a nil memory holds a status")
	}
}
