package workload

import (
	"context"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
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
	secret := ownedSecret{
		owner: ss, ownerKind: "SkillServer", labels: Labels(ss), what: "the caller-keys Secret",
		key: types.NamespacedName{Namespace: ss.Namespace, Name: render.CallerKeysSecretName(ss.Name)},
	}
	count := strconv.Itoa(len(data))
	return secret.ensure(ctx, c, func(s *corev1.Secret) (bool, error) {
		if maps.EqualFunc(s.Data, data, func(a, b []byte) bool { return string(a) == string(b) }) && s.Annotations[AnnotationCallerKeys] == count {
			return false, nil
		}
		s.Data = data
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[AnnotationCallerKeys] = count
		return true, nil
	})
}
