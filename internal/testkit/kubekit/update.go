package kubekit

import (
	"context"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Update reads obj again, applies change to it and updates it, and does so again while
// the update conflicts: a controller running beside the test writes the object (its
// status, a finalizer) between the test's read and its update, which a plain Update
// meets as a 409 now and then.
func Update[T client.Object](ctx context.Context, c client.Client, obj T, change func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return c.Update(ctx, obj)
	})
}
