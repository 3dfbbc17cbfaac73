package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
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
// ConfigMaps enter it without their data (cacheTransform).
func CacheOptions() cache.Options {
	owned := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{workload.LabelManagedBy: workload.FieldOwner})}
	return cache.Options{DefaultTransform: cacheTransform, ByObject: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}:             owned,
		&corev1.Service{}:               owned,
		&corev1.PersistentVolumeClaim{}: owned,
		&appsv1.Deployment{}:            owned,
		&networkingv1.NetworkPolicy{}:   owned,
	}}
}

// cacheTransform drops managed fields, and the data of ConfigMaps, before an object
// enters a cache of the manager. A label selects the ConfigMaps it caches, and any
// tenant can put that label on its own: with their data, a few ConfigMaps of 1 MiB per
// tenant would be the manager's memory, held for as long as they exist, and a manager
// killed for it would fill its cache again on start. The operator's own content shards
// hold up to 64 MiB per SkillServer too. What a cache keeps instead is a digest of the
// data (workload.AnnotationCachedDataDigest): enough to tell that a shard holds what
// the operator would write; the bodies are read from the API server when needed.
//
// A transform rather than metadata-only watches: every typed ConfigMap read of the
// cache goes through it, so no Get or Owns of a *corev1.ConfigMap can start a second,
// full informer unnoticed, and the digest of the dropped data is the digest of the
// bytes the API server holds, not an annotation anyone could edit. The bodies still
// reach the manager, one at a time: client-go streams the initial list (WatchListClient)
// and applies the transform before an object is stored.
func cacheTransform(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if err != nil {
		return nil, err
	}
	return workload.WithoutConfigMapData(obj)
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

// ChildClient is the client the kubernetes runtime applies and reads its children with:
// the manager's, except that it reads ConfigMaps from the manager's cache, which holds
// the operator's labelled ones without their data (ClientOptions sends the manager's
// ConfigMap reads to the API server, for the tenants' ConfigMaps the cache does not
// hold). The runtime reads
// only its own children: their adapter config and content shards would otherwise be read
// from the API server on every reconcile of every SkillServer, 404s included for the
// shards a server does not have (issue 26). A name the cache does not know is still
// looked up on the API server before it is written (workload.Kubernetes.APIReader).
func ChildClient(mgr ctrl.Manager) client.Client {
	return childClient{Client: mgr.GetClient(), cache: mgr.GetCache()}
}

type childClient struct {
	client.Client
	cache client.Reader
}

func (c childClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		return c.cache.Get(ctx, key, obj, opts...)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}
