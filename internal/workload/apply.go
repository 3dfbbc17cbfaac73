package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// applyConfiguration is what every typed apply configuration of client-go offers.
type applyConfiguration interface {
	GetName() *string
	GetNamespace() *string
	GetKind() *string
}

// NameConflictError is an object the operator would write that exists and is not
// controlled by the object it would write it for: someone else's, never to be adopted.
type NameConflictError struct {
	Kind, Namespace, Name string
	// Controller names the object's controller, or is empty when it has none.
	Controller string
}

func (e *NameConflictError) Error() string {
	owner := "no controller"
	if e.Controller != "" {
		owner = "controller " + e.Controller
	}
	return fmt.Sprintf("%s %s/%s already exists and is not controlled by this object (it has %s): the operator does not take over objects it did not create; rename or delete that %s",
		e.Kind, e.Namespace, e.Name, owner, e.Kind)
}

// apply sends a server-side apply unless the live object already holds everything the
// request would set, so that reconciling an unchanged SkillServer sends no write to the
// API server, also right after the operator restarts with an empty cache. Anyone
// else's edit of a field the operator sets makes the live object differ, and the next
// reconcile applies again, taking the field back.
//
// An object of that name that the request's controller does not control is a
// NameConflictError, and nothing is written: server-side apply with forced ownership
// would otherwise take it over (and its owner reference would let the garbage collector
// delete it with the SkillServer). The cache holds only the operator's labelled
// children, so a name it does not know is looked up once on the API server (apiReader).
func (c *appliedCache) apply(ctx context.Context, cl client.Client, apiReader client.Reader, live client.Object, desired applyConfigurationObject) error {
	key := types.NamespacedName{Namespace: *desired.GetNamespace(), Name: *desired.GetName()}
	kind := *desired.GetKind()
	request, err := json.Marshal(desired)
	if err != nil {
		return fmt.Errorf("encode apply request for %s %s: %w", kind, key, err)
	}
	requestID := requestHash(request)
	if err := cl.Get(ctx, key, live); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	owner := controllerUIDOf(request)
	if live.GetResourceVersion() != "" {
		if err := refuseForeign(kind, live, owner); err != nil {
			return err
		}
	} else if rv, err := refuseUncachedForeign(ctx, cl, apiReader, kind, key, live, owner); err != nil {
		return err
	} else if rv == "" {
		return c.create(ctx, cl, apiReader, kind, key, live, request, requestID, owner)
	} else if c.has(kind, key, rv, requestID) {
		// This process applied this very request and nobody wrote the object since;
		// the cache has not caught up with it yet (a reconcile right after the one
		// that created it). Applying it again would write the same thing.
		return nil
	}
	if rv := live.GetResourceVersion(); rv != "" && (c.has(kind, key, rv, requestID) || holdsRequest(live, request)) {
		c.add(kind, key, rv, requestID)
		return nil
	}
	if err := takeOverCreatedFields(ctx, cl, apiReader, kind, key, live); err != nil {
		return err
	}
	if err := cl.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, key, err)
	}
	if rv := resourceVersionOf(desired); rv != "" {
		c.add(kind, key, rv, requestID)
	}
	return nil
}

// create writes a child that does not exist yet with Create, never with an apply: an
// object of that name created since it was looked up is someone else's, and Create
// fails on it (AlreadyExists) where a forced apply would take it over.
func (c *appliedCache) create(ctx context.Context, cl client.Client, apiReader client.Reader, kind string, key types.NamespacedName, live client.Object, request []byte, requestID string, owner types.UID) error {
	obj, ok := live.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("create %s %s: %T is not an object", kind, key, live)
	}
	if err := json.Unmarshal(request, obj); err != nil {
		return fmt.Errorf("decode %s %s to create it: %w", kind, key, err)
	}
	err := cl.Create(ctx, obj, client.FieldOwner(FieldOwner))
	if apierrors.IsAlreadyExists(err) {
		return createdMeanwhile(ctx, cl, apiReader, kind, key, live, owner)
	}
	if err != nil {
		return fmt.Errorf("create %s %s: %w", kind, key, err)
	}
	c.add(kind, key, obj.GetResourceVersion(), requestID)
	return nil
}

// createdMeanwhile is the error for an object of key that appeared between the look-up
// and the Create: a NameConflictError when it is not owner's, else a plain error that
// retries (another process of the operator, such as a leader on its way out, made it).
func createdMeanwhile(ctx context.Context, cl client.Client, apiReader client.Reader, kind string, key types.NamespacedName, live client.Object, owner types.UID) error {
	if apiReader == nil {
		apiReader = cl
	}
	if _, err := refuseUncachedForeign(ctx, cl, apiReader, kind, key, live, owner); err != nil {
		return err
	}
	return fmt.Errorf("create %s %s: it was created meanwhile; it is looked at again", kind, key)
}

// takeOverCreatedFields makes the fields of a child this operator created (with Create,
// so owned by its Update manager) the apply manager's, once, before its first apply:
// fields an apply stops setting are removed only if no other manager owns them. The
// cache keeps no managed fields, so they are read from the API server, by metadata.
func takeOverCreatedFields(ctx context.Context, cl client.Client, apiReader client.Reader, kind string, key types.NamespacedName, live client.Object) error {
	if apiReader == nil {
		apiReader = cl
	}
	gvk, err := apiutil.GVKForObject(live, cl.Scheme())
	if err != nil {
		return fmt.Errorf("kind of %s %s: %w", kind, key, err)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(gvk)
	if err := apiReader.Get(ctx, key, meta); err != nil {
		return fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(meta, sets.New(FieldOwner), FieldOwner)
	if err != nil || patch == nil {
		return err
	}
	if err := cl.Patch(ctx, meta, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("hand the fields of %s %s to its apply manager: %w", kind, key, err)
	}
	return nil
}

// controllerUIDOf reads the UID of the controller reference an apply request sets.
func controllerUIDOf(request []byte) types.UID {
	var obj struct {
		Metadata struct {
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if json.Unmarshal(request, &obj) != nil {
		return ""
	}
	for _, ref := range obj.Metadata.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return ref.UID
		}
	}
	return ""
}

// refuseForeign is a NameConflictError when obj is not controlled by owner.
func refuseForeign(kind string, obj metav1.Object, owner types.UID) error {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref != nil && ref.UID == owner {
		return nil
	}
	conflict := &NameConflictError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if ref != nil {
		conflict.Controller = ref.Kind + " " + ref.Name
	}
	return conflict
}

// ownedSecret is a Secret the operator keeps for owner (of kind ownerKind): created,
// controlled by owner, when it is missing; changed in place when it holds something
// else; never adopted from anyone else (a NameConflictError). One created meanwhile by
// someone else is a conflict reported on the next reconcile, never overwritten. Its
// values are never logged nor put in an error; what names it in errors.
type ownedSecret struct {
	owner     client.Object
	ownerKind string
	key       types.NamespacedName
	labels    map[string]string
	what      string
}

// ensure makes the Secret hold what fill puts in it. fill is given the live Secret, or
// a new one with only its metadata when there is none, and says whether it changed it.
func (o ownedSecret) ensure(ctx context.Context, c client.Client, fill func(*corev1.Secret) (bool, error)) error {
	live := &corev1.Secret{}
	err := c.Get(ctx, o.key, live)
	switch {
	case apierrors.IsNotFound(err):
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: o.key.Namespace, Name: o.key.Name, Labels: o.labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(o.owner, cantusv1alpha1.GroupVersion.WithKind(o.ownerKind))},
			},
			Type: corev1.SecretTypeOpaque,
		}
		if _, err := fill(secret); err != nil {
			return err
		}
		if err := c.Create(ctx, secret); err != nil {
			return fmt.Errorf("create %s %s: %w", o.what, o.key.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get %s %s: %w", o.what, o.key.Name, err)
	}
	if err := refuseForeign("Secret", live, o.owner.GetUID()); err != nil {
		return err
	}
	changed, err := fill(live)
	if err != nil || !changed {
		return err
	}
	if err := c.Update(ctx, live); err != nil {
		return fmt.Errorf("update %s %s: %w", o.what, o.key.Name, err)
	}
	return nil
}

// refuseUncachedForeign looks up on the API server, by metadata only, an object the cache
// does not hold, and refuses it when it exists and owner does not control it. It returns
// the resourceVersion of the object it found, "" when there is none.
func refuseUncachedForeign(ctx context.Context, cl client.Client, apiReader client.Reader, kind string, key types.NamespacedName, live client.Object, owner types.UID) (string, error) {
	if apiReader == nil {
		return "", nil
	}
	gvk, err := apiutil.GVKForObject(live, cl.Scheme())
	if err != nil {
		return "", fmt.Errorf("kind of %s %s: %w", kind, key, err)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(gvk)
	if err := apiReader.Get(ctx, key, meta); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	return meta.GetResourceVersion(), refuseForeign(kind, meta, owner)
}

// holdsRequest says whether every field the apply request sets has that value in the
// live object. Fields the API server defaults or others own may be there besides.
func holdsRequest(live client.Object, request []byte) bool {
	liveJSON, err := json.Marshal(live)
	if err != nil {
		return false
	}
	var want, have map[string]any
	if json.Unmarshal(request, &want) != nil || json.Unmarshal(liveJSON, &have) != nil {
		return false
	}
	// Objects read from the cache carry no apiVersion and kind; the request always does.
	delete(want, "apiVersion")
	delete(want, "kind")
	return contains(have, want)
}

// contains says whether have holds want: equal scalars, maps holding each of want's
// keys, lists of the same length holding want's items in order.
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			if !contains(h[k], wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(have, want)
	}
}

// resourceVersionOf reads the resourceVersion controller-runtime decoded into the apply
// configuration from the API server's answer.
func resourceVersionOf(applied any) string {
	var answer struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	data, err := json.Marshal(applied)
	if err != nil || json.Unmarshal(data, &answer) != nil {
		return ""
	}
	return answer.Metadata.ResourceVersion
}

// applyConfigurationObject is a client-go apply configuration of a named object.
type applyConfigurationObject interface {
	applyConfiguration
	IsApplyConfiguration()
}

func requestHash(request []byte) string {
	sum := sha256.Sum256(request)
	return hex.EncodeToString(sum[:])
}

// appliedCache remembers which apply requests succeeded against which resourceVersion.
// The entries of one object are replaced on every apply, so it stays as large as the
// number of children.
type appliedCache struct {
	mu      sync.Mutex
	entries map[string]string
}

func newAppliedCache() *appliedCache { return &appliedCache{entries: map[string]string{}} }

func (c *appliedCache) has(kind string, key types.NamespacedName, resourceVersion, requestID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[kind+"/"+key.String()] == resourceVersion+"#"+requestID
}

func (c *appliedCache) add(kind string, key types.NamespacedName, resourceVersion, requestID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[kind+"/"+key.String()] = resourceVersion + "#" + requestID
}
