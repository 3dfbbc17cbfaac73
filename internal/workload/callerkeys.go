package workload

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// AnnotationCallerKeys counts the keys of a caller-keys Secret: the manager's cache
// holds Secrets by metadata only, and this tells it, without reading the values, that a
// Secret no longer needed still holds keys to clear.
const AnnotationCallerKeys = "cantus.dev/caller-keys"

// EnsureCallerKeys makes the gateway's caller-keys Secret (render.CallerKeysSecretName),
// controlled by the SkillServer, hold exactly data. The pods mount it whole, so the
// kubelet brings a change within its sync period without a change of the pod template;
// the local runtime reads it back. Nothing is written when it already holds data. A
// Secret of that name the server does not control is a NameConflictError, neither read
// further nor adopted. Values are never logged nor put in an error.
func EnsureCallerKeys(ctx context.Context, c client.Client, ss *cantusv1alpha1.SkillServer, data map[string][]byte) error {
	key := types.NamespacedName{Namespace: ss.Namespace, Name: render.CallerKeysSecretName(ss.Name)}
	live := &corev1.Secret{}
	err := c.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: key.Namespace, Name: key.Name, Labels: Labels(ss),
				Annotations:     map[string]string{AnnotationCallerKeys: strconv.Itoa(len(data))},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ss, cantusv1alpha1.GroupVersion.WithKind("SkillServer"))},
			},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		if err := c.Create(ctx, secret); err != nil {
			return fmt.Errorf("create the caller-keys Secret %s: %w", key.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get the caller-keys Secret %s: %w", key.Name, err)
	}
	if err := refuseForeign("Secret", live, ss.UID); err != nil {
		return err
	}
	count := strconv.Itoa(len(data))
	if maps.EqualFunc(live.Data, data, func(a, b []byte) bool { return string(a) == string(b) }) && live.Annotations[AnnotationCallerKeys] == count {
		return nil
	}
	live.Data = data
	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	live.Annotations[AnnotationCallerKeys] = count
	if err := c.Update(ctx, live); err != nil {
		return fmt.Errorf("update the caller-keys Secret %s: %w", key.Name, err)
	}
	return nil
}
