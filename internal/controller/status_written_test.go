package controller

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

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
	readAt := func(resourceVersion string) *cantusv1alpha1.SkillServer {
		return &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "books", ResourceVersion: resourceVersion}}
	}
	now := time.Now().Truncate(time.Second)
	var w writtenStatuses
	written := server("uid-1", 2, cantusv1alpha1.ReasonProgressing, now)
	key := types.NamespacedName{Namespace: "ns", Name: "books"}
	holds := func(read, obj *cantusv1alpha1.SkillServer) bool {
		t.Helper()
		s, ok := statusWritten(read, obj, &obj.Status)
		if !ok {
			t.Fatal("the status does not encode")
		}
		return w.holds(key, s)
	}
	if holds(readAt("10"), written) {
		t.Fatal("nothing written yet, but holds says the status is there")
	}
	entry, _ := statusWritten(readAt("10"), written, &written.Status)
	w.remember(key, entry)

	tests := []struct {
		name string
		read *cantusv1alpha1.SkillServer
		obj  *cantusv1alpha1.SkillServer
		want bool
	}{
		{"the same status from the same stale version", readAt("10"), server("uid-1", 2, cantusv1alpha1.ReasonProgressing, now), true},
		{"the same status computed a second later from that version", readAt("10"), server("uid-1", 2, cantusv1alpha1.ReasonProgressing, now.Add(time.Second)), true},
		{"a version written since, by anyone", readAt("12"), server("uid-1", 2, cantusv1alpha1.ReasonProgressing, now), false},
		{"another reason", readAt("10"), server("uid-1", 2, cantusv1alpha1.ReasonDeploymentNotReady, now), false},
		{"a newer generation", readAt("10"), server("uid-1", 3, cantusv1alpha1.ReasonProgressing, now), false},
		{"an object of the same name created again", readAt("10"), server("uid-2", 2, cantusv1alpha1.ReasonProgressing, now), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.obj.Status.Conditions[0].LastTransitionTime
			if got := holds(tt.read, tt.obj); got != tt.want {
				t.Errorf("holds = %v, want %v", got, tt.want)
			}
			if tt.obj.Status.Conditions[0].LastTransitionTime != before {
				t.Error("statusWritten changed the object's transition time")
			}
		})
	}

	w.forget(key)
	if holds(readAt("10"), written) {
		t.Error("a forgotten object's status is still held")
	}
	var none *writtenStatuses
	if none.holds(key, entry) {
		t.Error("a nil memory holds a status")
	}
}

// A new object's first status on its way to Ready makes no event; a failure, becoming
// Ready, and falling back to Progressing later do.
func TestTransitionEventsLeaveOutTheFirstSteps(t *testing.T) {
	condition := func(status metav1.ConditionStatus, reason string) *cantusv1alpha1.SkillServer {
		ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "books"}}
		if reason != "" {
			ss.Status.Conditions = []metav1.Condition{{Type: cantusv1alpha1.ConditionReady, Status: status, Reason: reason}}
		}
		return ss
	}
	none := condition("", "")
	tests := []struct {
		name          string
		before, after *cantusv1alpha1.SkillServer
		want          string
	}{
		{"new and progressing", none, condition(metav1.ConditionFalse, cantusv1alpha1.ReasonProgressing), ""},
		{"new and failing", none, condition(metav1.ConditionFalse, cantusv1alpha1.ReasonDeploymentNotReady), "Warning " + cantusv1alpha1.ReasonDeploymentNotReady},
		{"ready", condition(metav1.ConditionFalse, cantusv1alpha1.ReasonProgressing), condition(metav1.ConditionTrue, cantusv1alpha1.ReasonAvailable), "Normal " + cantusv1alpha1.ReasonAvailable},
		{"progressing again after ready", condition(metav1.ConditionTrue, cantusv1alpha1.ReasonAvailable), condition(metav1.ConditionFalse, cantusv1alpha1.ReasonProgressing), "Warning " + cantusv1alpha1.ReasonProgressing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recorder := events.NewFakeRecorder(1)
			statusWriter{recorder: recorder, announced: cantusv1alpha1.ConditionReady, action: "Reconcile"}.recordTransition(tt.before, tt.after)
			var got string
			select {
			case e := <-recorder.Events:
				got = strings.Join(strings.Fields(e)[:2], " ")
			default:
			}
			if got != tt.want {
				t.Errorf("event %q, want %q", got, tt.want)
			}
		})
	}
}
