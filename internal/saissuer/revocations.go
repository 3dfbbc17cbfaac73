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

// Bounds of the deletions remembered: the UIDs travel in the config of every server that
// accepts service-account tokens, which must stay well under a ConfigMap's 1 MiB however
// fast a tenant deletes pods. Service accounts and pods are bounded apart, so that pod
// churn (which any tenant can cause) cannot push out a deleted service account. Past a
// bound the oldest of that kind are dropped, and tokens issued before the newest dropped
// deletion are refused from then on (RefuseIssuedBefore): dropping fails closed.
const (
	MaxServiceAccountRevocations = 1000
	MaxPodRevocations            = 4000
)

// Kinds of binding a token can name.
type bindingKind int

const (
	kindServiceAccount bindingKind = iota
	kindPod
	kindCount
)

func (k bindingKind) String() string {
	if k == kindServiceAccount {
		return "serviceaccounts"
	}
	return "pods"
}

func (k bindingKind) max() int {
	if k == kindServiceAccount {
		return MaxServiceAccountRevocations
	}
	return MaxPodRevocations
}

// Revoked is what the adapters are handed: the deleted service accounts and pods, and
// the time before which tokens are refused because deletions had to be dropped.
type Revoked struct {
	ServiceAccounts []string
	Pods            []string
	// RefuseIssuedBefore is zero until a deletion was dropped.
	RefuseIssuedBefore time.Time
}

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
	// Recall, when set, returns what was handed over before this operator started (read
	// back from the configs it rendered), remembered again from now: a restarted
	// operator then hands over the same list instead of rewriting every config.
	Recall func(ctx context.Context) (Revoked, error)

	loadOnce sync.Once
	loaded   chan struct{} // closed once Recall answered

	mu      sync.Mutex
	deleted [kindCount]map[types.UID]time.Time
	// refuseIssuedBefore is the deletion time of the newest deletion dropped: a token
	// bound to it was issued before then.
	refuseIssuedBefore time.Time
	changed            bool
	dropped            int // since the last tick
	now                func() time.Time
}

// Current is what is remembered, sorted; it waits until Start has recalled the earlier
// deletions.
func (r *Revocations) Current(ctx context.Context) (Revoked, error) {
	select {
	case <-r.loadedChan():
	case <-ctx.Done():
		return Revoked{}, fmt.Errorf("wait for the revoked service accounts and pods: %w", ctx.Err())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return Revoked{
		ServiceAccounts:    r.sortedLocked(kindServiceAccount),
		Pods:               r.sortedLocked(kindPod),
		RefuseIssuedBefore: r.refuseIssuedBefore,
	}, nil
}

func (r *Revocations) loadedChan() chan struct{} {
	r.loadOnce.Do(func() { r.loaded = make(chan struct{}) })
	return r.loaded
}

// remembered are all the UIDs remembered, sorted.
func (r *Revocations) remembered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append(r.sortedLocked(kindServiceAccount), r.sortedLocked(kindPod)...)
	slices.Sort(out)
	return out
}

func (r *Revocations) sortedLocked(kind bindingKind) []string {
	out := make([]string, 0, len(r.deleted[kind]))
	for uid := range r.deleted[kind] {
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

func (r *Revocations) remember(kind bindingKind, uid types.UID) {
	if uid == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rememberLocked(kind, uid, r.clock())
}

func (r *Revocations) rememberLocked(kind bindingKind, uid types.UID, at time.Time) {
	if r.deleted[kind] == nil {
		r.deleted[kind] = map[types.UID]time.Time{}
	}
	if _, known := r.deleted[kind][uid]; !known && len(r.deleted[kind]) >= kind.max() {
		r.dropOldestLocked(kind)
	}
	r.deleted[kind][uid] = at
	r.changed = true
}

// dropOldestLocked forgets the oldest deletion of kind and refuses, from now on, every
// token issued before it was seen: those are the only tokens it could have refused.
func (r *Revocations) dropOldestLocked(kind bindingKind) {
	var oldest types.UID
	var at time.Time
	for uid, t := range r.deleted[kind] {
		if oldest == "" || t.Before(at) {
			oldest, at = uid, t
		}
	}
	delete(r.deleted[kind], oldest)
	if at.After(r.refuseIssuedBefore) {
		r.refuseIssuedBefore = at
	}
	r.dropped++
}

// forget drops what was deleted longer ago than MaxTokenLifetime: every token bound to it
// has expired or is refused for its lifetime.
func (r *Revocations) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	cutoff := r.clock().Add(-r.MaxTokenLifetime)
	for _, deleted := range r.deleted {
		for uid, at := range deleted {
			if at.Before(cutoff) {
				delete(deleted, uid)
				r.changed = true
			}
		}
	}
	// Every token issued before the cutoff has expired (none lives longer), so the
	// refusal of older ones no longer refuses anything.
	if !r.refuseIssuedBefore.IsZero() && r.refuseIssuedBefore.Before(cutoff) {
		r.refuseIssuedBefore = time.Time{}
		r.changed = true
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
	var stores []cache.Store
	for _, namespace := range namespaces {
		factory, watched, err := r.watchDeletions(client, namespace)
		if err != nil {
			return err
		}
		stores = append(stores, watched...)
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		for resource, synced := range factory.WaitForCacheSync(ctx.Done()) {
			if !synced && ctx.Err() == nil {
				return fmt.Errorf("watch %s: the cache did not sync", resource.Resource)
			}
		}
	}
	if n := r.forgetLiving(stores); n > 0 {
		log.Info("recalled revocations named living service accounts or pods; they are not revocations and were dropped (a ConfigMap the operator rendered was edited)", "dropped", n)
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
				log.Info("more deletions than can be remembered: the oldest were dropped, and every token issued before them is refused",
					"dropped", dropped, "maxServiceAccounts", MaxServiceAccountRevocations, "maxPods", MaxPodRevocations,
					"refuseIssuedBefore", r.refusingBefore())
			}
			if changed && r.OnChange != nil {
				r.OnChange()
			}
		}
	}
}

// watchDeletions is an informer factory, not started, of the pods and service accounts
// of namespace (all of them for metav1.NamespaceAll) that remembers their deletions.
func (r *Revocations) watchDeletions(client metadata.Interface, namespace string) (metadatainformer.SharedInformerFactory, []cache.Store, error) {
	factory := metadatainformer.NewFilteredSharedInformerFactory(client, 0, namespace, nil)
	var stores []cache.Store
	for _, kind := range []bindingKind{kindPod, kindServiceAccount} {
		informer := factory.ForResource(corev1.SchemeGroupVersion.WithResource(kind.String())).Informer()
		stores = append(stores, informer.GetStore())
		if err := informer.SetTransform(identityOnly); err != nil {
			return nil, nil, fmt.Errorf("watch %s: %w", kind, err)
		}
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: r.onDelete(kind)}); err != nil {
			return nil, nil, fmt.Errorf("watch %s: %w", kind, err)
		}
	}
	return factory, stores, nil
}

// recall remembers the UIDs handed over before, then lets UIDs answer. A failure is
// logged, not fatal: the list then starts empty, as on a first start.
func (r *Revocations) recall(ctx context.Context) {
	defer close(r.loadedChan())
	if r.Recall == nil {
		return
	}
	earlier, err := r.Recall(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "could not read back the revoked service accounts and pods; the list starts empty")
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	for _, uid := range earlier.ServiceAccounts {
		r.rememberLocked(kindServiceAccount, types.UID(uid), now)
	}
	for _, uid := range earlier.Pods {
		r.rememberLocked(kindPod, types.UID(uid), now)
	}
	// A time to come is no deletion anyone saw: recalled, it would refuse every token.
	if at := earlier.RefuseIssuedBefore; at.After(r.refuseIssuedBefore) && !at.After(now) {
		r.refuseIssuedBefore = at
	}
	if r.dropped == 0 {
		r.changed = false // what the configs already hold is no news
	}
}

// livingUIDs are the UIDs of the objects in stores.
func livingUIDs(stores []cache.Store) map[types.UID]bool {
	living := map[types.UID]bool{}
	for _, store := range stores {
		for _, obj := range store.List() {
			if m, ok := obj.(metav1.Object); ok {
				living[m.GetUID()] = true
			}
		}
	}
	return living
}

// forgetLiving drops revocations of objects that exist: a UID is never reused, so a
// living one was never deleted, and can only have come from a recalled config that
// someone edited (a tenant may write its own server's ConfigMap) to lock its owner out.
//
// The stores are read under the lock: a deletion's handler runs after the store dropped
// the object, so one that races this either is no longer living here or is remembered
// after.
func (r *Revocations) forgetLiving(stores []cache.Store) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	living := livingUIDs(stores)
	dropped := 0
	for _, deleted := range r.deleted {
		for uid := range deleted {
			if living[uid] {
				delete(deleted, uid)
				dropped++
			}
		}
	}
	if dropped > 0 {
		r.changed = true
	}
	return dropped
}

func (r *Revocations) refusingBefore() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refuseIssuedBefore
}

// onDelete remembers the deleted objects of kind.
func (r *Revocations) onDelete(kind bindingKind) func(obj any) {
	return func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			r.remember(kind, m.GetUID())
		}
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
