package main

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// The yardstick: how many writes a second the same API server accepts from parallel
// writers applying what the operator applies for one of the bench's SkillServers (a
// ConfigMap, a Deployment, a Service, a NetworkPolicy, and a SkillServer status), so that
// the operator's own write rate is compared with what the API server on the same cores
// can take.
//
// The status goes to a copy of the SkillServer CRD under a group of the bench's own:
// a custom resource's status costs the API server several times a Deployment's (decoding
// and validating it against the CRD's schema), and the manager, which watches every
// SkillServer, must not see the yardstick's.

const (
	yardstickWriters = 16
	// writesPerUnit is what one unit writes: four applies (a ConfigMap, a NetworkPolicy,
	// a Service, a Deployment) and a status patch.
	writesPerUnit = 5
)

// yardstickGroup is the group of the bench's copy of the SkillServer CRD.
const yardstickGroup = "yardstick.scalebench.local"

// prepareUnits creates the namespace of the yardstick's units and the custom resources
// whose status they write, as the bench's SkillServers are created before the manager
// starts: outside what is timed.
func prepareUnits(ctx context.Context, c client.Client, namespace string, units int) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return fmt.Errorf("create the yardstick's namespace: %w", err)
	}
	return inParallel(units, func(i int) error { return createUnitServer(ctx, c, namespace, i) })
}

// parallelWriteRate has yardstickWriters clients apply the prepared units of the
// operator's mix of kinds and returns the writes a second they achieved.
func parallelWriteRate(ctx context.Context, c client.WithWatch, namespace string, units int) (float64, error) {
	kube := yardstickRuntime(c)
	start := time.Now()
	if err := inParallel(units, func(i int) error { return writeUnit(ctx, kube, c, namespace, i) }); err != nil {
		return 0, err
	}
	return float64(units*writesPerUnit) / time.Since(start).Seconds(), nil
}

// removeUnits deletes what the units wrote, so that the operator starts on the API
// server as the yardstick found it. Deleting a Service releases its cluster IP, and a
// new Service costs the API server more the more cluster IPs it holds.
func removeUnits(ctx context.Context, c client.Client, namespace string) error {
	in := client.InNamespace(namespace)
	for _, kind := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &networkingv1.NetworkPolicy{}} {
		if err := c.DeleteAllOf(ctx, kind, in); err != nil {
			return fmt.Errorf("delete the yardstick's %T: %w", kind, err)
		}
	}
	servers := &unstructured.Unstructured{}
	servers.SetAPIVersion(yardstickGroup + "/" + cantusv1alpha1.GroupVersion.Version)
	servers.SetKind("SkillServer")
	if err := c.DeleteAllOf(ctx, servers, in); err != nil {
		return fmt.Errorf("delete the yardstick's SkillServers: %w", err)
	}
	// Services have no delete-collection.
	services := &corev1.ServiceList{}
	if err := c.List(ctx, services, in); err != nil {
		return fmt.Errorf("list the yardstick's Services: %w", err)
	}
	return inParallel(len(services.Items), func(i int) error {
		return client.IgnoreNotFound(c.Delete(ctx, &services.Items[i]))
	})
}

// inParallel runs do for 0 … n-1 on yardstickWriters goroutines and returns the first error.
func inParallel(n int, do func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, yardstickWriters)
	for range yardstickWriters {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// installYardstickKind copies the SkillServer CRD under yardstickGroup and waits until
// the API server serves it.
func installYardstickKind(ctx context.Context, c client.Client) error {
	if err := apiextensionsv1.AddToScheme(c.Scheme()); err != nil {
		return err
	}
	original := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "skillservers." + cantusv1alpha1.GroupVersion.Group}, original); err != nil {
		return fmt.Errorf("read the SkillServer CRD: %w", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: original.Spec.Names.Plural + "." + yardstickGroup},
		Spec:       *original.Spec.DeepCopy(),
	}
	crd.Spec.Group = yardstickGroup
	if err := c.Create(ctx, crd); err != nil {
		return fmt.Errorf("create the yardstick's copy of the SkillServer CRD: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		return apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established), nil
	})
}

// unitServer is unit i's custom resource: a bench SkillServer under yardstickGroup.
func unitServer(namespace string, i int) (*unstructured.Unstructured, error) {
	ss := skillServer(i)
	ss.Namespace, ss.Name = namespace, unitName(i)
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ss)
	if err != nil {
		return nil, fmt.Errorf("convert unit %d: %w", i, err)
	}
	u := &unstructured.Unstructured{Object: fields}
	u.SetAPIVersion(yardstickGroup + "/" + cantusv1alpha1.GroupVersion.Version)
	u.SetKind("SkillServer")
	return u, nil
}

func createUnitServer(ctx context.Context, c client.Client, namespace string, i int) error {
	u, err := unitServer(namespace, i)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, u); err != nil {
		return fmt.Errorf("create the yardstick's SkillServer %d: %w", i, err)
	}
	return nil
}

func unitName(i int) string { return fmt.Sprintf("unit-%d", i) }

// writeUnit applies the children of one server with the operator's own code and
// objects (yardstickRuntime), then patches its SkillServer's status as the operator
// does for a new server.
func writeUnit(ctx context.Context, kube *workload.Kubernetes, c client.Client, namespace string, i int) error {
	ss := skillServer(i)
	ss.Namespace, ss.Name, ss.UID, ss.Generation = namespace, unitName(i), uuid.NewUUID(), 1
	rendered, err := render.SkillServer(ss, render.Inputs{})
	if err != nil {
		return fmt.Errorf("render unit %d: %w", i, err)
	}
	if _, err := kube.Apply(ctx, workload.Desired{SkillServer: ss, Config: rendered.Config, ConfigHash: rendered.Hash, RolloutHash: rendered.RolloutHash, Files: rendered.Files}); err != nil {
		return fmt.Errorf("apply the children of unit %d: %w", i, err)
	}
	server, err := unitServer(namespace, i)
	if err != nil {
		return err
	}
	status, err := json.Marshal(map[string]any{"status": newServerStatus(namespace, ss.Name)})
	if err != nil {
		return err
	}
	if err := c.Status().Patch(ctx, server, client.RawPatch(types.MergePatchType, status)); err != nil {
		return fmt.Errorf("patch the status of unit %d: %w", i, err)
	}
	return nil
}

// yardstickRuntime is the operator's kubernetes runtime for the yardstick's writers. The
// operator reads the objects it writes from its cache; the writers have none, so every
// read finds nothing, at no cost to the API server, and each unit is applied whole. The
// objects are not labelled as the operator's, so that the manager does not cache them.
func yardstickRuntime(c client.WithWatch) *workload.Kubernetes {
	nothingCached := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
			return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			labels := reflect.ValueOf(obj).Elem().FieldByName("Labels")
			labels.SetMapIndex(reflect.ValueOf(workload.LabelManagedBy), reflect.ValueOf("scalebench-yardstick"))
			return c.Apply(ctx, obj, opts...)
		},
	})
	return workload.NewKubernetes(nothingCached, "cantus.local/cantus-operator:dev", "cluster.local")
}

// newServerStatus is about what the operator writes for a new server whose pods are not
// available yet.
func newServerStatus(namespace, name string) cantusv1alpha1.SkillServerStatus {
	now := metav1.Now()
	condition := func(kind string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
		return metav1.Condition{Type: kind, Status: status, ObservedGeneration: 1, LastTransitionTime: now, Reason: reason, Message: message}
	}
	return cantusv1alpha1.SkillServerStatus{
		ObservedGeneration: 1,
		Conditions: []metav1.Condition{
			condition("Ready", metav1.ConditionFalse, "Progressing", "Deployment "+name+": 0 of 1 pods available"),
			condition("Available", metav1.ConditionFalse, "Progressing", "Deployment "+name+": 0 of 1 pods available"),
			condition("Progressing", metav1.ConditionTrue, "Progressing", "Deployment "+name+": 0 of 1 pods available"),
		},
		URL:       fmt.Sprintf("http://%s.%s.svc.cluster.local:8765/mcp", name, namespace),
		Tools:     []cantusv1alpha1.ServedTool{{Name: "search_book", Source: "skill"}},
		ToolCount: 1,
	}
}
