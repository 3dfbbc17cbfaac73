package saissuer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
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

	"github.com/cantus-dev/cantus-operator/internal/periodic"
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
// bound the oldest deletion of that kind in the namespace that holds the most is
// dropped, and tokens of that namespace issued before the newest deletion dropped there
// are refused from then on (RefuseIssuedBefore): dropping fails closed, and only for the
// namespace that churns (issue 39, R12: a global bound let one tenant refuse every
// token of the cluster).
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
// per namespace the time before which its tokens are refused because deletions there
// had to be dropped.
type Revoked struct {
	ServiceAccounts []string
	Pods            []string
	// RefuseIssuedBefore holds a namespace once one of its deletions was dropped.
	RefuseIssuedBefore map[string]time.Time
}

// State is what Revocations remembers, as it is kept across restarts (Save, Recall).
type State struct {
	ServiceAccounts    []Deletion           `json:"serviceAccounts,omitempty"`
	Pods               []Deletion           `json:"pods,omitempty"`
	RefuseIssuedBefore map[string]time.Time `json:"refuseIssuedBefore,omitempty"`
}

// Deletion is one deleted service account or pod, and when it was seen deleted.
type Deletion struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	// At is the time in Unix seconds (the state of thousands of deletions stays small).
	At int64 `json:"at"`
}

// deletion is what is remembered of a deleted object.
type deletion struct {
	namespace string
	at        time.Time
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
	// Recall, when set, returns what was remembered before this operator started (Save
	// kept it where no tenant can write, the operator's own namespace): a restarted
	// operator then hands over the same list instead of forgetting it.
	Recall func(ctx context.Context) (State, error)
	// Save, when set, keeps what is remembered after it changed, for Recall.
	Save func(ctx context.Context, state State) error

	loadOnce sync.Once
	loaded   chan struct{} // closed once Recall answered

	mu      sync.Mutex
	deleted [kindCount]map[types.UID]deletion
	// perNamespace counts the deletions of each kind by namespace.
	perNamespace [kindCount]map[string]int
	// refuseIssuedBefore is, by namespace, the deletion time of the newest deletion
	// dropped there: a token bound to it was issued before then.
	refuseIssuedBefore map[string]time.Time
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
		RefuseIssuedBefore: maps.Clone(r.refuseIssuedBefore),
	}, nil
}

// snapshot is what is remembered, for Save.
func (r *Revocations) snapshot() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	deletions := func(kind bindingKind) []Deletion {
		out := make([]Deletion, 0, len(r.deleted[kind]))
		for uid, d := range r.deleted[kind] {
			out = append(out, Deletion{UID: string(uid), Namespace: d.namespace, At: d.at.Unix()})
		}
		slices.SortFunc(out, func(a, b Deletion) int { return strings.Compare(a.UID, b.UID) })
		return out
	}
	return State{
		ServiceAccounts:    deletions(kindServiceAccount),
		Pods:               deletions(kindPod),
		RefuseIssuedBefore: maps.Clone(r.refuseIssuedBefore),
	}
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

func (r *Revocations) remember(kind bindingKind, namespace string, uid types.UID) {
	if uid == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rememberLocked(kind, uid, deletion{namespace: namespace, at: r.clock()})
}

func (r *Revocations) rememberLocked(kind bindingKind, uid types.UID, d deletion) {
	if r.deleted[kind] == nil {
		r.deleted[kind] = map[types.UID]deletion{}
		r.perNamespace[kind] = map[string]int{}
	}
	if _, known := r.deleted[kind][uid]; known {
		return
	}
	if len(r.deleted[kind]) >= kind.max() {
		r.dropOldestLocked(kind, r.busiestNamespaceLocked(kind, d.namespace))
	}
	r.deleted[kind][uid] = d
	r.perNamespace[kind][d.namespace]++
	r.changed = true
}

// busiestNamespaceLocked is the namespace holding the most deletions of kind, counting
// the one about to be added to adding: it pays for the bound, so that deletions in one
// namespace never push out another's.
func (r *Revocations) busiestNamespaceLocked(kind bindingKind, adding string) string {
	busiest, most := adding, r.perNamespace[kind][adding]+1
	for namespace, n := range r.perNamespace[kind] {
		if n > most || (n == most && namespace < busiest) {
			busiest, most = namespace, n
		}
	}
	return busiest
}

// dropOldestLocked forgets the oldest deletion of kind in namespace (if it holds any) and
// refuses, from now on, every token of namespace issued before it was seen: those are
// the only tokens it could have refused.
func (r *Revocations) dropOldestLocked(kind bindingKind, namespace string) {
	var oldest types.UID
	var at time.Time
	for uid, d := range r.deleted[kind] {
		if d.namespace == namespace && (oldest == "" || d.at.Before(at)) {
			oldest, at = uid, d.at
		}
	}
	if oldest == "" {
		return
	}
	r.forgetLocked(kind, oldest)
	if r.refuseIssuedBefore == nil {
		r.refuseIssuedBefore = map[string]time.Time{}
	}
	if at.After(r.refuseIssuedBefore[namespace]) {
		r.refuseIssuedBefore[namespace] = at
	}
	r.dropped++
}

func (r *Revocations) forgetLocked(kind bindingKind, uid types.UID) {
	d, ok := r.deleted[kind][uid]
	if !ok {
		return
	}
	delete(r.deleted[kind], uid)
	if r.perNamespace[kind][d.namespace]--; r.perNamespace[kind][d.namespace] <= 0 {
		delete(r.perNamespace[kind], d.namespace)
	}
}

// forget drops what was deleted longer ago than MaxTokenLifetime: every token bound to it
// has expired or is refused for its lifetime.
func (r *Revocations) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	cutoff := r.clock().Add(-r.MaxTokenLifetime)
	for kind := range r.deleted {
		for uid, d := range r.deleted[kind] {
			if d.at.Before(cutoff) {
				r.forgetLocked(bindingKind(kind), uid)
				r.changed = true
			}
		}
	}
	// Every token issued before the cutoff has expired (none lives longer), so the
	// refusal of older ones no longer refuses anything.
	for namespace, at := range r.refuseIssuedBefore {
		if at.Before(cutoff) {
			delete(r.refuseIssuedBefore, namespace)
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
		log.Info("recalled revocations named living service accounts or pods; they are not revocations and were dropped (the kept state was edited)", "dropped", n)
	}
	log.Info("watching pod and service-account deletions for service-account token checks", "maxTokenLifetime", r.MaxTokenLifetime, "namespaces", r.Namespaces)
	periodic.Run(ctx, r.Every, func() {
		r.forget()
		changed, dropped := r.takeChanged()
		if dropped > 0 {
			log.Info("more deletions than can be remembered: the oldest were dropped, and every token issued before them is refused",
				"dropped", dropped, "maxServiceAccounts", MaxServiceAccountRevocations, "maxPods", MaxPodRevocations,
				"refuseIssuedBefore", r.refusingBefore())
		}
		if changed {
			r.save(ctx)
		}
		if changed && r.OnChange != nil {
			r.OnChange()
		}
	})
	return nil
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

// save keeps what is remembered (Save); a failure is logged: the list in memory still
// holds, only a restart would forget the newest deletions.
func (r *Revocations) save(ctx context.Context) {
	if r.Save == nil {
		return
	}
	if err := r.Save(ctx, r.snapshot()); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "could not keep the revoked service accounts and pods for a restart")
	}
}

// recall remembers the deletions kept before, then lets UIDs answer. A failure is
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
	cutoff := now.Add(-r.MaxTokenLifetime)
	// A time to come is no deletion anyone saw; one older than the longest token
	// lifetime refuses nothing any more.
	plausible := func(at time.Time) bool { return !at.After(now) && !at.Before(cutoff) }
	for kind, deletions := range [kindCount][]Deletion{kindServiceAccount: earlier.ServiceAccounts, kindPod: earlier.Pods} {
		for _, d := range deletions {
			if at := time.Unix(d.At, 0); d.UID != "" && plausible(at) {
				r.rememberLocked(bindingKind(kind), types.UID(d.UID), deletion{namespace: d.Namespace, at: at})
			}
		}
	}
	for namespace, at := range earlier.RefuseIssuedBefore {
		if plausible(at) && at.After(r.refuseIssuedBefore[namespace]) {
			if r.refuseIssuedBefore == nil {
				r.refuseIssuedBefore = map[string]time.Time{}
			}
			r.refuseIssuedBefore[namespace] = at
		}
	}
	if r.dropped == 0 {
		r.changed = false // what the adapters were handed before is no news
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
// living one was never deleted, and can only have come from a recalled state that
// someone edited to lock its owner out.
//
// The stores are read under the lock: a deletion's handler runs after the store dropped
// the object, so one that races this either is no longer living here or is remembered
// after.
func (r *Revocations) forgetLiving(stores []cache.Store) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	living := livingUIDs(stores)
	dropped := 0
	for kind := range r.deleted {
		for uid := range r.deleted[kind] {
			if living[uid] {
				r.forgetLocked(bindingKind(kind), uid)
				dropped++
			}
		}
	}
	if dropped > 0 {
		r.changed = true
	}
	return dropped
}

func (r *Revocations) refusingBefore() map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.refuseIssuedBefore)
}

// onDelete remembers the deleted objects of kind.
func (r *Revocations) onDelete(kind bindingKind) func(obj any) {
	return func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			r.remember(kind, m.GetNamespace(), m.GetUID())
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
