package workload

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// A request state Secret keeps its key until a rotation is asked for. A rotation adds
// a new key second (opening only) until every pod has it, then puts it first and keeps
// the previous one second until its states have expired, then drops it. A rotation
// asked for while one is under way waits for it; an emptied Secret gets a new key.
func TestNextRequestStateKeys_RotatesInStepsThatNoReplicaRefuses(t *testing.T) {
	now := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	secret := func(keys string, annotations map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Data: map[string][]byte{render.RequestStateKeysKey: []byte(keys)}}
	}
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	const rotate, handled = cantusv1alpha1.AnnotationRotateRequestStateKey, annotationRotationHandled
	for name, tc := range map[string]struct {
		live                   *corev1.Secret
		unchanged, markHandled bool
		keys                   []string // "" stands for a new key
		requeue                time.Duration
		sealsAt, until         time.Time
	}{
		"one key": {live: secret("current\n", nil), unchanged: true},
		"emptied": {live: secret("\n", nil), keys: []string{""}, markHandled: true},
		"rotation asked": {live: secret("current\n", map[string]string{rotate: "now"}), markHandled: true,
			keys: []string{"current", ""}, requeue: RequestStateKeyPropagation, sealsAt: now.Add(RequestStateKeyPropagation)},
		"new key not everywhere yet": {live: secret("current\nnew\n", map[string]string{rotate: "now", handled: "now", annotationNewKeySealsAt: at(time.Minute)}),
			unchanged: true, requeue: time.Minute},
		"new key everywhere": {live: secret("current\nnew\n", map[string]string{rotate: "now", handled: "now", annotationNewKeySealsAt: at(-time.Second)}),
			keys: []string{"new", "current"}, requeue: RequestStateKeyOverlap, until: now.Add(RequestStateKeyOverlap)},
		"previous still due": {live: secret("new\ncurrent\n", map[string]string{rotate: "now", handled: "now", annotationPreviousKeyUntil: at(time.Minute)}),
			unchanged: true, requeue: time.Minute},
		"another rotation waits": {live: secret("new\ncurrent\n", map[string]string{rotate: "again", handled: "now", annotationPreviousKeyUntil: at(time.Minute)}),
			unchanged: true, requeue: time.Minute},
		"previous past due": {live: secret("new\ncurrent\n", map[string]string{rotate: "now", handled: "now", annotationPreviousKeyUntil: at(-time.Second)}),
			keys: []string{"new"}},
	} {
		got := nextRequestStateKeys(tc.live, now)
		if got.unchanged != tc.unchanged || got.handled != tc.markHandled || got.requeue != tc.requeue ||
			!got.newKeySealsAt.Equal(tc.sealsAt) || !got.previousUntil.Equal(tc.until) || len(got.keys) != len(tc.keys) {
			t.Errorf("%s: got %+v, want unchanged=%v handled=%v keys=%d requeue=%v sealsAt=%v until=%v",
				name, got, tc.unchanged, tc.markHandled, len(tc.keys), tc.requeue, tc.sealsAt, tc.until)
			continue
		}
		for i, want := range tc.keys {
			if want == "" && len(got.keys[i]) < 32 || want != "" && string(got.keys[i]) != want {
				t.Errorf("%s: key %d is %q, want %q (\"\": a new key)", name, i, got.keys[i], want)
			}
		}
	}
}
