package workload

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// A request state Secret keeps its key until a rotation is asked for; a rotation puts
// a new key first and the current one second until RequestStateKeyOverlap has passed,
// then the new key alone remains; an emptied Secret gets a new key.
func TestNextRequestStateKeys_RotatesAndDropsThePreviousKeyInTime(t *testing.T) {
	now := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	secret := func(keys string, annotations map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Data: map[string][]byte{render.RequestStateKeysKey: []byte(keys)}}
	}
	until := now.Add(time.Minute).Format(time.RFC3339)
	for name, tc := range map[string]struct {
		live          *corev1.Secret
		unchanged     bool
		keys          []string // "" stands for a new key
		requeue       time.Duration
		previousUntil time.Time
	}{
		"one key": {live: secret("current\n", nil), unchanged: true},
		"emptied": {live: secret("\n", nil), keys: []string{""}},
		"rotation asked": {live: secret("current\n", map[string]string{cantusv1alpha1.AnnotationRotateRequestStateKey: "now"}),
			keys: []string{"", "current"}, requeue: RequestStateKeyOverlap, previousUntil: now.Add(RequestStateKeyOverlap)},
		"rotation handled, previous still due": {live: secret("new\ncurrent\n", map[string]string{cantusv1alpha1.AnnotationRotateRequestStateKey: "now",
			annotationRotationHandled: "now", annotationPreviousKeyUntil: until}), unchanged: true, requeue: time.Minute},
		"previous past due": {live: secret("new\ncurrent\n", map[string]string{cantusv1alpha1.AnnotationRotateRequestStateKey: "now",
			annotationRotationHandled: "now", annotationPreviousKeyUntil: now.Add(-time.Second).Format(time.RFC3339)}), keys: []string{"new"}},
	} {
		got := nextRequestStateKeys(tc.live, now)
		if got.unchanged != tc.unchanged || got.requeue != tc.requeue || !got.previousUntil.Equal(tc.previousUntil) || len(got.keys) != len(tc.keys) {
			t.Errorf("%s: got %+v, want unchanged=%v keys=%d requeue=%v until=%v", name, got, tc.unchanged, len(tc.keys), tc.requeue, tc.previousUntil)
			continue
		}
		for i, want := range tc.keys {
			if want == "" && len(got.keys[i]) < 32 || want != "" && string(got.keys[i]) != want {
				t.Errorf("%s: key %d is %q, want %q (\"\": a new key)", name, i, got.keys[i], want)
			}
		}
	}
}
