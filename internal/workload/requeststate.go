package workload

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// Annotations the operator keeps on a gateway's request state Secret.
const (
	// annotationRotationHandled is the value of AnnotationRotateRequestStateKey last
	// acted on: a different one asks for a new key.
	annotationRotationHandled = "cantus.dev/request-state-rotation-handled"
	// annotationPreviousKeyUntil is when the key rotated away last stops opening
	// states (RFC 3339); the operator then drops it.
	annotationPreviousKeyUntil = "cantus.dev/request-state-previous-key-until"
)

// RequestStateKeyOverlap is how long a key rotated away keeps opening states: their
// expiry, and the kubelet's delay in bringing a changed Secret to every pod.
const RequestStateKeyOverlap = adapterconfig.RequestStateTTL + 2*time.Minute

// EnsureRequestStateKeys makes the gateway's request state Secret
// (render.RequestStateSecretName), controlled by the SkillServer, hold its keys, one
// per line, the first sealing: a new random key when there is none; on a rotation asked
// for with AnnotationRotateRequestStateKey, a new key first and the current one after
// it for RequestStateKeyOverlap; then the current key alone. It returns how long until
// a previous key is due to go (0: none is held). A Secret of that name the server does
// not control is a NameConflictError, neither read further nor adopted. Keys are never
// logged nor put in an error.
func EnsureRequestStateKeys(ctx context.Context, c client.Client, ss *cantusv1alpha1.SkillServer, now time.Time) (time.Duration, error) {
	key := types.NamespacedName{Namespace: ss.Namespace, Name: render.RequestStateSecretName(ss.Name)}
	live := &corev1.Secret{}
	err := c.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: key.Namespace, Name: key.Name, Labels: Labels(ss),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ss, cantusv1alpha1.GroupVersion.WithKind("SkillServer"))},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{render.RequestStateKeysKey: joinKeys(newRequestStateKey())},
		}
		if err := c.Create(ctx, secret); err != nil {
			return 0, fmt.Errorf("create the request state Secret %s: %w", key.Name, err)
		}
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("get the request state Secret %s: %w", key.Name, err)
	}
	if err := refuseForeign("Secret", live, ss.UID); err != nil {
		return 0, err
	}
	next := nextRequestStateKeys(live, now)
	if next.unchanged {
		return next.requeue, nil
	}
	live.Data = map[string][]byte{render.RequestStateKeysKey: joinKeys(next.keys...)}
	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	live.Annotations[annotationRotationHandled] = live.Annotations[cantusv1alpha1.AnnotationRotateRequestStateKey]
	if next.previousUntil.IsZero() {
		delete(live.Annotations, annotationPreviousKeyUntil)
	} else {
		live.Annotations[annotationPreviousKeyUntil] = next.previousUntil.UTC().Format(time.RFC3339)
	}
	if err := c.Update(ctx, live); err != nil {
		return 0, fmt.Errorf("update the request state Secret %s: %w", key.Name, err)
	}
	return next.requeue, nil
}

// requestStateKeys is what a request state Secret is to hold next.
type requestStateKeys struct {
	unchanged     bool
	keys          [][]byte
	previousUntil time.Time
	requeue       time.Duration
}

// nextRequestStateKeys decides the keys of live at now: a new one when it holds none
// (emptied by hand), a rotation when one was asked for, the previous key dropped when
// its time is up; unchanged otherwise.
func nextRequestStateKeys(live *corev1.Secret, now time.Time) requestStateKeys {
	keys := splitKeys(live.Data[render.RequestStateKeysKey])
	asked := live.Annotations[cantusv1alpha1.AnnotationRotateRequestStateKey]
	until, _ := time.Parse(time.RFC3339, live.Annotations[annotationPreviousKeyUntil])
	switch {
	case len(keys) == 0:
		return requestStateKeys{keys: [][]byte{newRequestStateKey()}}
	case asked != live.Annotations[annotationRotationHandled]:
		until = now.Add(RequestStateKeyOverlap)
		return requestStateKeys{keys: [][]byte{newRequestStateKey(), keys[0]}, previousUntil: until, requeue: until.Sub(now)}
	case len(keys) > 1 && !now.Before(until):
		return requestStateKeys{keys: keys[:1]}
	case len(keys) > 1:
		return requestStateKeys{unchanged: true, requeue: until.Sub(now)}
	}
	return requestStateKeys{unchanged: true}
}

// newRequestStateKey is 256 random bits, as text: the key file holds one key a line.
func newRequestStateKey() []byte {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return []byte(base64.RawURLEncoding.EncodeToString(b[:]))
}

func joinKeys(keys ...[]byte) []byte { return append(bytes.Join(keys, []byte("\n")), '\n') }

func splitKeys(data []byte) [][]byte {
	var keys [][]byte
	for line := range bytes.Lines(data) {
		if key := bytes.TrimSpace(line); len(key) > 0 {
			keys = append(keys, key)
		}
	}
	return keys
}
