package workload

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// The operator's look-up and its write are two requests; an object someone creates
// between them is theirs (issue 39, R17: server-side apply with forced ownership took it
// over, owner reference and all). A new child is created, so that one that appeared is a
// conflict; a child is deleted only if it is still the one that was looked at.
func TestChildrenRaceNoAdoption(t *testing.T) {
	cfg := testenv.StartForTest(t)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ns = "race"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "srv", UID: "uid-srv"}}
	foreign := func(obj client.Object) client.Object {
		obj.SetNamespace(ns)
		obj.SetLabels(map[string]string{LabelManagedBy: FieldOwner}) // a label anyone can put on
		return obj
	}
	// createAfterLookup creates obj once, right after the operator's last look-up of its
	// name (by metadata, on the API server) found nothing: the race, made certain.
	createAfterLookup := func(obj client.Object) interceptor.Funcs {
		done := false
		return interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, into client.Object, opts ...client.GetOption) error {
			err := cl.Get(ctx, key, into, opts...)
			_, byMetadata := into.(*metav1.PartialObjectMetadata)
			if apierrors.IsNotFound(err) && byMetadata && key.Name == obj.GetName() && !done {
				done = true
				if err := c.Create(ctx, obj); err != nil {
					t.Errorf("create the racing object: %v", err)
				}
			}
			return err
		}}
	}

	t.Run("TestAnObjectCreatedBetweenTheLookupAndTheApplyIsNotAdopted", func(t *testing.T) {
		theirs := foreign(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "srv-adapter"}, Data: map[string]string{"theirs": "1"}})
		raced := interceptor.NewClient(c, createAfterLookup(theirs))
		desired := corev1ac.ConfigMap("srv-adapter", ns).WithLabels(Labels(ss)).WithOwnerReferences(ownerOf(ss)).
			WithData(map[string]string{"adapter.json": "{}"})
		err := newAppliedCache().apply(ctx, raced, raced, &corev1.ConfigMap{}, desired)
		var conflict *NameConflictError
		if !errors.As(err, &conflict) {
			t.Errorf("apply over an object created meanwhile: %v, want a NameConflictError", err)
		}
		live := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(theirs), live); err != nil {
			t.Fatal(err)
		}
		if len(live.OwnerReferences) > 0 || live.Data["theirs"] != "1" || live.Data["adapter.json"] != "" {
			t.Errorf("the operator took the object over: owners %v, data %v", live.OwnerReferences, live.Data)
		}
	})

	t.Run("TestACreatedChildDropsWhatIsNoLongerDesired", func(t *testing.T) {
		// Created (not applied), the child's fields belong to an Update manager; the
		// next apply must still be able to remove what it no longer sets.
		applied := newAppliedCache()
		desired := func(ports ...int32) *corev1ac.ServiceApplyConfiguration {
			spec := corev1ac.ServiceSpec().WithSelector(SelectorLabels(ss))
			for _, port := range ports {
				spec.WithPorts(corev1ac.ServicePort().WithName(fmt.Sprint("p", port)).WithPort(port))
			}
			return corev1ac.Service("srv", ns).WithLabels(Labels(ss)).WithOwnerReferences(ownerOf(ss)).WithSpec(spec)
		}
		if err := applied.apply(ctx, c, c, &corev1.Service{}, desired(80, 81)); err != nil {
			t.Fatal(err)
		}
		if err := applied.apply(ctx, c, c, &corev1.Service{}, desired(80)); err != nil {
			t.Fatal(err)
		}
		live := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "srv"}, live); err != nil {
			t.Fatal(err)
		}
		if len(live.Spec.Ports) != 1 || live.Spec.Ports[0].Port != 80 {
			t.Errorf("ports after dropping 81 = %+v, want only 80", live.Spec.Ports)
		}
		if !metav1.IsControlledBy(live, ss) {
			t.Errorf("the created child is not controlled by its SkillServer: %v", live.OwnerReferences)
		}
	})

	t.Run("TestAChildReplacedAfterTheLookupIsNotDeleted", func(t *testing.T) {
		ours := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "srv", Labels: Labels(ss),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: cantusv1alpha1.GroupVersion.String(), Kind: "SkillServer", Name: "srv", UID: ss.UID, Controller: ptr.To(true)}}}}
		if err := c.Create(ctx, ours); err != nil {
			t.Fatal(err)
		}
		theirs := foreign(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "srv"}})
		// After the operator read its own policy, someone deletes it and creates theirs.
		replaced := interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, into client.Object, opts ...client.GetOption) error {
			err := cl.Get(ctx, key, into, opts...)
			if _, ok := into.(*networkingv1.NetworkPolicy); ok && err == nil && metav1.IsControlledBy(into, ss) {
				if err := c.Delete(ctx, ours.DeepCopy()); err != nil {
					t.Errorf("delete ours: %v", err)
				}
				if err := c.Create(ctx, theirs); err != nil {
					t.Errorf("create theirs: %v", err)
				}
			}
			return err
		}})
		k := NewKubernetes(replaced, "img", "cluster.local")
		_, _ = k.deleteIfControlled(ctx, "NetworkPolicy", &networkingv1.NetworkPolicy{}, "srv", ss, "that allowFrom no longer asks for")
		if err := c.Get(ctx, client.ObjectKeyFromObject(theirs), &networkingv1.NetworkPolicy{}); err != nil {
			t.Errorf("someone else's NetworkPolicy, created after the operator looked at its own: %v, want it kept", err)
		}
	})
}

// A restarted operator, its memory of what it applied empty, finds a stdio bridge as it
// left it and writes nothing (found by TestLeaderFailoverRewritesNothingAndDropsNoCall on
// the node: the bridge's Deployment asked for readOnly: false, which the API server
// drops, so every restart re-applied it).
func TestARestartedOperatorRewritesNoBridge(t *testing.T) {
	cfg := testenv.StartForTest(t)
	base, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := base.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	var writes []string
	c := interceptor.NewClient(base, interceptor.Funcs{
		Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			writes = append(writes, fmt.Sprintf("apply %T", obj))
			return cl.Apply(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes = append(writes, fmt.Sprintf("patch %T %s", obj, obj.GetName()))
			return cl.Patch(ctx, obj, patch, opts...)
		},
	})
	imp := stdioImport("github", []string{"server"}, "--x")
	imp.UID = "uid-github"
	if _, _, err := NewKubernetes(c, adapterImage, "cluster.local").Bridges().Ensure(ctx, imp, BridgeAccess{Token: testBridgeToken}); err != nil {
		t.Fatalf("first Ensure: %v", err)
	}
	for restart := 1; restart <= 2; restart++ {
		writes = nil
		if _, _, err := NewKubernetes(c, adapterImage, "cluster.local").Bridges().Ensure(ctx, imp, BridgeAccess{Token: testBridgeToken}); err != nil {
			t.Fatalf("Ensure after restart %d: %v", restart, err)
		}
		if len(writes) > 0 {
			t.Errorf("after restart %d the operator rewrote the unchanged bridge: %v", restart, writes)
		}
	}
}
