package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
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
	// writesPerUnit is what one unit writes: four applies and a status patch.
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
func parallelWriteRate(ctx context.Context, c client.Client, namespace string, units int) (float64, error) {
	start := time.Now()
	if err := inParallel(units, func(i int) error { return writeUnit(ctx, c, namespace, i) }); err != nil {
		return 0, err
	}
	return float64(units*writesPerUnit) / time.Since(start).Seconds(), nil
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

// writeUnit applies the four children of one server with forced ownership, as the
// operator does, then patches its SkillServer's status as the operator does for a new
// server.
func writeUnit(ctx context.Context, c client.Client, namespace string, i int) error {
	name := unitName(i)
	labels := map[string]string{"app.kubernetes.io/name": "yardstick", "app.kubernetes.io/instance": name}
	objs := []client.Object{
		&corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: meta(namespace, name, labels),
			Data: map[string]string{"config.json": fmt.Sprintf(`{"server":{"name":%q,"version":"0.0.0"},"transport":"streamable-http","tools":[{"name":"search_book","description":"Search the catalog.","template":{"text":"found: {{ .title }}"}}]}`, name)}},
		yardstickDeployment(namespace, name, labels),
		&corev1.Service{TypeMeta: typeMeta("v1", "Service"), ObjectMeta: meta(namespace, name, labels), Spec: corev1.ServiceSpec{
			Selector: labels, Ports: []corev1.ServicePort{{Name: "mcp", Port: 8765, TargetPort: intstr.FromString("mcp")}},
		}},
		&networkingv1.NetworkPolicy{TypeMeta: typeMeta("networking.k8s.io/v1", "NetworkPolicy"), ObjectMeta: meta(namespace, name, labels), Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: labels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{agents},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptrTo(corev1.ProtocolTCP), Port: ptrTo(intstr.FromString("mcp"))}},
			}},
		}},
	}
	for _, obj := range objs {
		//nolint:staticcheck // SA1019: the operator applies typed objects the same way
		if err := c.Patch(ctx, obj, client.Apply, client.ForceOwnership, client.FieldOwner("yardstick")); err != nil {
			return fmt.Errorf("apply %T %s: %w", obj, name, err)
		}
	}
	server, err := unitServer(namespace, i)
	if err != nil {
		return err
	}
	status, err := json.Marshal(map[string]any{"status": newServerStatus(namespace, name)})
	if err != nil {
		return err
	}
	if err := c.Status().Patch(ctx, server, client.RawPatch(types.MergePatchType, status)); err != nil {
		return fmt.Errorf("patch the status of %s: %w", name, err)
	}
	return nil
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

// yardstickDeployment is about the size of an adapter's Deployment.
func yardstickDeployment(namespace, name string, labels map[string]string) *appsv1.Deployment {
	no, yes := false, true
	return &appsv1.Deployment{TypeMeta: typeMeta("apps/v1", "Deployment"), ObjectMeta: meta(namespace, name, labels), Spec: appsv1.DeploymentSpec{
		Replicas: ptrTo(int32(1)),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"cantus.dev/config-hash": name}},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: &no,
				SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name: "adapter", Image: "cantus.local/cantus-operator:dev", Args: []string{"adapter", "--config=/etc/cantus/config.json"},
					Ports:           []corev1.ContainerPort{{Name: "mcp", ContainerPort: 8765}},
					ReadinessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("mcp")}}},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					VolumeMounts:    []corev1.VolumeMount{{Name: "config", MountPath: "/etc/cantus", ReadOnly: true}},
				}},
				Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}},
			},
		},
	}}
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func meta(namespace, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}
}
