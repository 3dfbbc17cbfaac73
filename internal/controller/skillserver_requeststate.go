package controller

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// The request state Secret is read and written whole (its keys are the adapter's), and
// watched by metadata only (SetupWithManager), so that the cache holds no key.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update

// applyRequestStateKeys writes the request state Secret of a gateway, whose replicas
// seal and open the requestStates of input requests with its keys. It returns when a
// rotated key is due to be dropped (0: none is held).
func (r *SkillServerReconciler) applyRequestStateKeys(ctx context.Context, ss *cantusv1alpha1.SkillServer) (time.Duration, error) {
	if !render.NeedsRequestStateKeys(ss) {
		// A Secret left from when the server had imports holds keys for nothing, and
		// goes with the server (it controls it).
		return 0, nil
	}
	return workload.EnsureRequestStateKeys(ctx, r.Client, ss, time.Now())
}

// serverOfRequestStateSecret is the server whose request state Secret secret is: a
// rotation asked for on it, or its deletion, is acted on at once.
func serverOfRequestStateSecret(secret client.Object) []reconcile.Request {
	owner := metav1.GetControllerOfNoCopy(secret)
	if owner == nil || owner.Kind != "SkillServer" || secret.GetName() != render.RequestStateSecretName(owner.Name) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: secret.GetNamespace(), Name: owner.Name}}}
}

// sooner is the earlier of two requeue delays, where 0 means none.
func sooner(a, b time.Duration) time.Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}
