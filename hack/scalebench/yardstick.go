package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The yardstick: how many writes a second the same API server accepts from parallel
// writers applying what the operator applies for one SkillServer (a ConfigMap, a
// Deployment, a Service, a NetworkPolicy, and a status), so that the operator's own write
// rate is compared with what the API server on the same cores can take.

const (
	yardstickWriters = 16
	// writesPerUnit is what one unit writes: four applies and a status patch.
	writesPerUnit = 5
)

// parallelWriteRate has yardstickWriters clients apply units of the operator's mix of
// kinds and returns the writes a second they achieved.
func parallelWriteRate(ctx context.Context, c client.Client, namespace string, units int) (float64, error) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return 0, fmt.Errorf("create the yardstick's namespace: %w", err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, yardstickWriters)
	start := time.Now()
	for range yardstickWriters {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < units; i = int(next.Add(1)) - 1 {
				if err := writeUnit(ctx, c, namespace, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(units*writesPerUnit) / elapsed.Seconds(), nil
}

// writeUnit applies the four children of one server with forced ownership, as the
// operator does, then patches the Deployment's status in place of the SkillServer's.
func writeUnit(ctx context.Context, c client.Client, namespace string, i int) error {
	name := fmt.Sprintf("unit-%d", i)
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
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptrTo(intstr.FromInt32(8765))}}}},
		}},
	}
	for _, obj := range objs {
		//nolint:staticcheck // SA1019: the operator applies typed objects the same way
		if err := c.Patch(ctx, obj, client.Apply, client.ForceOwnership, client.FieldOwner("yardstick")); err != nil {
			return fmt.Errorf("apply %T %s: %w", obj, name, err)
		}
	}
	dep := objs[1].(*appsv1.Deployment)
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Status.ObservedGeneration = dep.Generation
	dep.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "Yardstick", Message: "pods not available", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := c.Status().Patch(ctx, dep, patch); err != nil {
		return fmt.Errorf("patch the status of %s: %w", name, err)
	}
	return nil
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
