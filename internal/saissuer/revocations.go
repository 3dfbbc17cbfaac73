package saissuer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
)

// The API server refuses a service-account token whose service account or pod is gone.
// Adapters check tokens offline, so the operator watches those deletions and hands the
// UIDs over; a token may live no longer than they are remembered (MaxTokenLifetime).
// +kubebuilder:rbac:groups="",resources=pods;serviceaccounts,verbs=list;watch

// DefaultMaxTokenLifetime is how long deletions are remembered, and so the longest a
// service-account token accepted by an adapter may live: twice the one hour that the
// kubelet's projected tokens and `kubectl create token` default to.
const DefaultMaxTokenLifetime = 2 * time.Hour

// MaxRevocations bounds how many deletions are remembered: the UIDs travel in the config
// of every server that accepts service-account tokens, which must stay well under a
// ConfigMap's 1 MiB however fast a tenant deletes pods. Past it the oldest are dropped
// (their tokens are then accepted until they expire) and a log line says so.
const MaxRevocations = 5000

// Revocations remembers the UIDs of the service accounts and pods deleted within
// MaxTokenLifetime, and says at most once per Every that they changed.
type Revocations struct {
	// Config reaches the API server.
	Config *rest.Config
	// MaxTokenLifetime is how long a deletion is remembered.
	MaxTokenLifetime time.Duration
	// Every bounds how often OnChange is called: a busy cluster deletes pods every
	// second, and each change rewrites the config of every server that accepts
	// service-account tokens.
	Every time.Duration
	// OnChange is called after deletions were seen (or forgotten).
	OnChange func()
	// Namespaces, when set, are the only namespaces whose deletions are watched (the
	// operator's --watch-namespaces, whose Roles let it list pods there only): a token of
	// a pod or service account deleted elsewhere is then accepted until it expires.
	Namespaces []string
	// Recall, when set, returns the UIDs handed over before this operator started (read
	// back from the configs it rendered), remembered again from now: a restarted
	// operator then hands over the same list instead of rewriting every config.
	Recall func(ctx context.Context) ([]string, error)

	loadOnce sync.Once
	loaded   chan struct{} // closed once Recall answered

	mu      sync.Mutex
	deleted map[types.UID]time.Time
	changed bool
	dropped int // since the last tick
	now     func() time.Time
}

// UIDs are the UIDs remembered, sorted; it waits until Start has recalled the earlier
// ones.
func (r *Revocations) UIDs(ctx context.Context) ([]string, error) {
	select {
	case <-r.loadedChan():
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the revoked service accounts and pods: %w", ctx.Err())
	}
	return r.remembered(), nil
}

func (r *Revocations) loadedChan() chan struct{} {
	r.loadOnce.Do(func() { r.loaded = make(chan struct{}) })
	return r.loaded
}

func (r *Revocations) remembered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.deleted))
	for uid := range r.deleted {
		out = append(out, string(uid))
	}
	slices.Sort(out)
	return out
}

// Lifetime is MaxTokenLifetime.
func (r *Revocations) Lifetime() time.Duration { return r.MaxTokenLifetime }

func (r *Revocations) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

func (r *Revocations) remember(uid types.UID) {
	if uid == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deleted == nil {
		r.deleted = map[types.UID]time.Time{}
	}
	if len(r.deleted) >= MaxRevocations {
		r.dropOldestLocked()
	}
	r.deleted[uid] = r.clock()
	r.changed = true
}

func (r *Revocations) dropOldestLocked() {
	var oldest types.UID
	var at time.Time
	for uid, t := range r.deleted {
		if oldest == "" || t.Before(at) {
			oldest, at = uid, t
		}
	}
	delete(r.deleted, oldest)
	r.dropped++
}

// forget drops what was deleted longer ago than MaxTokenLifetime: every token bound to it
// has expired or is refused for its lifetime.
func (r *Revocations) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	cutoff := r.clock().Add(-r.MaxTokenLifetime)
	for uid, at := range r.deleted {
		if at.Before(cutoff) {
			delete(r.deleted, uid)
			r.changed = true
		}
	}
}

// takeChanged reports whether anything changed since it was last asked, and how many
// deletions were dropped for MaxRevocations meanwhile.
func (r *Revocations) takeChanged() (changed bool, dropped int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed, dropped = r.changed, r.dropped
	r.changed, r.dropped = false, 0
	return changed, dropped
}

// Start watches deletions of pods and service accounts (their metadata only, cut down
// to what identifies them) until ctx ends; a manager Runnable.
func (r *Revocations) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx)
	r.recall(ctx)
	client, err := metadata.NewForConfig(r.Config)
	if err != nil {
		return fmt.Errorf("metadata client for pod and service-account deletions: %w", err)
	}
	namespaces := r.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, namespace := range namespaces {
		factory, err := r.watchDeletions(client, namespace)
		if err != nil {
			return err
		}
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		for resource, synced := range factory.WaitForCacheSync(ctx.Done()) {
			if !synced && ctx.Err() == nil {
				return fmt.Errorf("watch %s: the cache did not sync", resource.Resource)
			}
		}
	}
	log.Info("watching pod and service-account deletions for service-account token checks", "maxTokenLifetime", r.MaxTokenLifetime, "namespaces", r.Namespaces)
	tick := time.NewTicker(r.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			r.forget()
			changed, dropped := r.takeChanged()
			if dropped > 0 {
				log.Info("more deletions than can be remembered: the oldest were dropped, and tokens bound to them pass until they expire",
					"dropped", dropped, "max", MaxRevocations)
			}
			if changed && r.OnChange != nil {
				r.OnChange()
			}
		}
	}
}

// watchDeletions is an informer factory, not started, of the pods and service accounts
// of namespace (all of them for metav1.NamespaceAll) that remembers their deletions.
func (r *Revocations) watchDeletions(client metadata.Interface, namespace string) (metadatainformer.SharedInformerFactory, error) {
	factory := metadatainformer.NewFilteredSharedInformerFactory(client, 0, namespace, nil)
	for _, resource := range []string{"pods", "serviceaccounts"} {
		informer := factory.ForResource(corev1.SchemeGroupVersion.WithResource(resource)).Informer()
		if err := informer.SetTransform(identityOnly); err != nil {
			return nil, fmt.Errorf("watch %s: %w", resource, err)
		}
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: r.onDelete}); err != nil {
			return nil, fmt.Errorf("watch %s: %w", resource, err)
		}
	}
	return factory, nil
}

// recall remembers the UIDs handed over before, then lets UIDs answer. A failure is
// logged, not fatal: the list then starts empty, as on a first start.
func (r *Revocations) recall(ctx context.Context) {
	defer close(r.loadedChan())
	if r.Recall == nil {
		return
	}
	uids, err := r.Recall(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "could not read back the revoked service accounts and pods; the list starts empty")
		return
	}
	for _, uid := range uids {
		r.remember(types.UID(uid))
	}
	r.takeChanged() // what the configs already hold is no news
}

func (r *Revocations) onDelete(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if m, ok := obj.(metav1.Object); ok {
		r.remember(m.GetUID())
	}
}

// identityOnly keeps of an object's metadata what the informer and the revocations need,
// so that watching every pod of the cluster costs little memory.
func identityOnly(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}, nil
}
