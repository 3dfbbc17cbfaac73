package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// CacheOptions keep the manager's cache to what the operator owns: the children it
// applies carry app.kubernetes.io/managed-by=cantus-operator, and only those are
// watched and held in memory. On a big cluster that is a small fraction of its
// ConfigMaps, Services and Deployments, and a compromised manager process holds no copy
// of anyone else's. Managed fields are dropped before an object enters the cache: the
// operator never reads them, and on a Deployment they are often a third of its bytes,
// which at thousands of SkillServers is most of what the cache would hold for nothing.
func CacheOptions() cache.Options {
	owned := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{workload.LabelManagedBy: workload.FieldOwner})}
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}:             owned,
		&corev1.Service{}:               owned,
		&corev1.PersistentVolumeClaim{}: owned,
		&appsv1.Deployment{}:            owned,
		&networkingv1.NetworkPolicy{}:   owned,
	}}
}

// ClientOptions make the manager's client read Secrets and ConfigMaps from the API
// server, not from a cache: the operator reads a few of them (an import's header values
// and CA bundle) when it needs them, and must not keep every Secret of the cluster in
// memory to do so. Changes to Secrets are watched by metadata only (see the
// RemoteToolImport controller), which holds no values.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}
}

// CacheNamespaces are the namespaces a cache holds: all of them when namespaces is empty
// (nil), else only those, as the manager's --watch-namespaces asks. Cluster-scoped kinds
// (ToolSourcePolicies, Namespaces) are cached whole either way.
func CacheNamespaces(namespaces []string) map[string]cache.Config {
	if len(namespaces) == 0 {
		return nil
	}
	out := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		out[ns] = cache.Config{}
	}
	return out
}
