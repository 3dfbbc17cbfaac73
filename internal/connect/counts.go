package connect

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// Counts are an import's connected accounts, as its status and metrics show them:
// numbers only, never who.
type Counts struct {
	Connected, ReconnectNeeded, FailedRefreshes int32
}

// Counter counts the accounts of imports from the Secrets' metadata (labels: the
// state, and the key each is encrypted with), reading no token.
type Counter struct {
	// Reader lists Secrets' metadata in Namespace (the API server: the operator's
	// namespace may be outside the cache).
	Reader    client.Reader
	Namespace string
	Keys      *Keys
}

// Count counts the accounts of imp and exports them as metrics. An account whose key
// is no longer in the ring (or with no ring at all) needs reconnecting.
func (c *Counter) Count(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) (Counts, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.Reader.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{
		LabelAccount: kindAccount, LabelImportNamespace: imp.Namespace, LabelImport: imp.Name,
	}); err != nil {
		return Counts{}, fmt.Errorf("count the connected accounts: %w", err)
	}
	ring, err := c.Keys.Ring(ctx)
	if err != nil && !errors.Is(err, ErrNoKeys) {
		return Counts{}, err
	}
	var out Counts
	for _, s := range list.Items {
		if s.Labels[LabelState] == StateConnected && ring != nil && ring.Has(s.Labels[LabelKey]) {
			out.Connected++
		} else {
			out.ReconnectNeeded++
		}
	}
	out.FailedRefreshes = failedCounter(imp.Namespace + "/" + imp.Name).Load()
	accountsGauge.WithLabelValues(imp.Namespace, imp.Name, "connected").Set(float64(out.Connected))
	accountsGauge.WithLabelValues(imp.Namespace, imp.Name, "reconnect_needed").Set(float64(out.ReconnectNeeded))
	return out, nil
}

// Forget drops the metrics of a deleted import.
func (c *Counter) Forget(namespace, name string) {
	accountsGauge.DeleteLabelValues(namespace, name, "connected")
	accountsGauge.DeleteLabelValues(namespace, name, "reconnect_needed")
}

// States says whether callers have a usable account, for the catalog.
type States struct {
	Store *Store
}

// State is catalog.ConnectStateConnected, ...NotConnected or ...ReconnectNeeded for
// caller's account for the import, read from its Secret's labels and the key ring.
func (s States) State(ctx context.Context, importRef, caller string) (string, error) {
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := s.Store.Client.Get(ctx, client.ObjectKey{Namespace: s.Store.Namespace, Name: AccountName(importRef, caller)}, secret)
	if apierrors.IsNotFound(err) {
		return "NotConnected", nil
	}
	if err != nil {
		return "", fmt.Errorf("read a connected account: %w", err)
	}
	ring, err := s.Store.Keys.Ring(ctx)
	if err != nil && !errors.Is(err, ErrNoKeys) {
		return "", err
	}
	if secret.Labels[LabelState] != StateConnected || ring == nil || !ring.Has(secret.Labels[LabelKey]) {
		return "ReconnectNeeded", nil
	}
	return "Connected", nil
}
