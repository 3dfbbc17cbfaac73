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
	// annotationNewKeySealsAt is when the key added by a rotation, second so far (it
	// opens states, and seals none), becomes the first (RFC 3339).
	annotationNewKeySealsAt = "cantus.dev/request-state-new-key-seals-at"
	// annotationPreviousKeyUntil is when the key rotated away last stops opening
	// states (RFC 3339); the operator then drops it.
	annotationPreviousKeyUntil = "cantus.dev/request-state-previous-key-until"
)

// A rotation goes in two steps, so that no replica ever refuses a state another one
// sealed: the new key is added second, opening states only, until every pod has it
// (RequestStateKeyPropagation, the kubelet's delay in bringing a changed Secret to a
// pod); then it is put first, sealing, and the previous key stays second, opening, for
// RequestStateKeyOverlap.
const (
	RequestStateKeyPropagation = 2 * time.Minute
	RequestStateKeyOverlap     = adapterconfig.RequestStateTTL + RequestStateKeyPropagation
)

// EnsureRequestStateKeys makes the gateway's request state Secret
// (render.RequestStateSecretName), controlled by the SkillServer, hold its keys, one
// per line, the first sealing: a new random key when there is none, and the steps of a
// rotation asked for with AnnotationRotateRequestStateKey (nextRequestStateKeys). It
// returns how long until the next step is due (0: none is). A Secret of that name the server does
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
	if next.handled {
		live.Annotations[annotationRotationHandled] = live.Annotations[cantusv1alpha1.AnnotationRotateRequestStateKey]
	}
	setTimeAnnotation(live.Annotations, annotationNewKeySealsAt, next.newKeySealsAt)
	setTimeAnnotation(live.Annotations, annotationPreviousKeyUntil, next.previousUntil)
	if err := c.Update(ctx, live); err != nil {
		return 0, fmt.Errorf("update the request state Secret %s: %w", key.Name, err)
	}
	return next.requeue, nil
}

func setTimeAnnotation(annotations map[string]string, key string, t time.Time) {
	if t.IsZero() {
		delete(annotations, key)
		return
	}
	annotations[key] = t.UTC().Format(time.RFC3339)
}

// requestStateKeys is what a request state Secret is to hold next, and when to look
// again (0: no step is due).
type requestStateKeys struct {
	unchanged bool
	// handled records the rotation asked for as acted on.
	handled       bool
	keys          [][]byte
	newKeySealsAt time.Time
	previousUntil time.Time
	requeue       time.Duration
}

// nextRequestStateKeys decides the keys of live at now: a new one when it holds none
// (emptied by hand); on a rotation asked for, a new key second; once every pod has it,
// the new key first and the previous second; once the previous key's states have
// expired, the new key alone. Unchanged otherwise. A rotation asked for while one is
// under way starts once it is done.
func nextRequestStateKeys(live *corev1.Secret, now time.Time) requestStateKeys {
	keys := splitKeys(live.Data[render.RequestStateKeysKey])
	asked := live.Annotations[cantusv1alpha1.AnnotationRotateRequestStateKey]
	sealsAt, _ := time.Parse(time.RFC3339, live.Annotations[annotationNewKeySealsAt])
	until, _ := time.Parse(time.RFC3339, live.Annotations[annotationPreviousKeyUntil])
	rotating := len(keys) > 1 && (!sealsAt.IsZero() || !until.IsZero())
	switch {
	case len(keys) == 0:
		return requestStateKeys{keys: [][]byte{newRequestStateKey()}, handled: true}
	case !sealsAt.IsZero() && len(keys) > 1 && !now.Before(sealsAt):
		until = now.Add(RequestStateKeyOverlap)
		return requestStateKeys{keys: [][]byte{keys[1], keys[0]}, previousUntil: until, requeue: RequestStateKeyOverlap}
	case !sealsAt.IsZero() && len(keys) > 1:
		return requestStateKeys{unchanged: true, requeue: sealsAt.Sub(now)}
	case !until.IsZero() && len(keys) > 1 && !now.Before(until):
		return requestStateKeys{keys: keys[:1]}
	case rotating:
		return requestStateKeys{unchanged: true, requeue: until.Sub(now)}
	case asked != live.Annotations[annotationRotationHandled]:
		sealsAt = now.Add(RequestStateKeyPropagation)
		return requestStateKeys{keys: [][]byte{keys[0], newRequestStateKey()}, newKeySealsAt: sealsAt, requeue: RequestStateKeyPropagation, handled: true}
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
