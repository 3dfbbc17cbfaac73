package workload

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// What adapter and bridge pods have in common.
const (
	// portName names the MCP port of every container and Service the operator runs.
	portName = "mcp"
	// metricsPortName names the adapter's metrics port, which no Service exposes.
	metricsPortName = "metrics"
	// nonRootID is the user and group of every container: distroless's "nonroot".
	nonRootID = 65532
	// killGrace is the time past a process's own shutdown before the kubelet kills it.
	killGrace = 5 * time.Second
	// defaultClusterDomain forms Service URLs when none is configured.
	defaultClusterDomain = "cluster.local"
)

// ownerReference makes owner the controller of a child, so that the garbage collector
// removes the child with it and its changes reach the owner's reconciler.
func ownerReference(kind string, owner metav1.Object) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cantusv1alpha1.GroupVersion.String()).
		WithKind(kind).
		WithName(owner.GetName()).
		WithUID(owner.GetUID()).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// restrictedPodSpec meets the "restricted" Pod Security Standard: non-root, seccomp
// RuntimeDefault, no service account token and no service environment variables (the
// pods talk to no API server and need no neighbours' addresses). shutdown is how long the
// pod's own processes take to stop; the kubelet waits killGrace longer.
func restrictedPodSpec(shutdown time.Duration) *corev1ac.PodSpecApplyConfiguration {
	return corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithTerminationGracePeriodSeconds(int64((shutdown + killGrace).Seconds())).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(nonRootID).
			WithRunAsGroup(nonRootID).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
}

// restrictedContainerSecurityContext is the container half of the restricted standard,
// with a read-only root filesystem on top.
func restrictedContainerSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithRunAsNonRoot(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
}

func httpProbe(path string, periodSeconds int32) *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromString(portName))).
		WithPeriodSeconds(periodSeconds)
}

// metricsContainerPort is where the adapter serves /metrics, apart from the MCP port:
// /metrics names every tool, also those tools/list hides from a caller.
func metricsContainerPort(port int32) *corev1ac.ContainerPortApplyConfiguration {
	return corev1ac.ContainerPort().WithName(metricsPortName).WithContainerPort(port).WithProtocol(corev1.ProtocolTCP)
}

func mcpContainerPort(port int32) *corev1ac.ContainerPortApplyConfiguration {
	return corev1ac.ContainerPort().WithName(portName).WithContainerPort(port).WithProtocol(corev1.ProtocolTCP)
}

// mcpServiceSpec is a ClusterIP Service in front of the MCP port of the selected pods.
func mcpServiceSpec(selector map[string]string, port *corev1ac.ServicePortApplyConfiguration) *corev1ac.ServiceSpecApplyConfiguration {
	return corev1ac.ServiceSpec().
		WithType(corev1.ServiceTypeClusterIP).
		WithSelector(selector).
		WithPorts(port.
			WithName(portName).
			WithTargetPort(intstr.FromString(portName)).
			WithProtocol(corev1.ProtocolTCP))
}

// mcpIngressPolicySpec admits from, and the operator's pods when operator is set, to the
// MCP port of the pods selector selects, and nothing else. With no peers at all the
// policy has no ingress rule: an ingress rule without peers would admit everyone.
//
// Only the operator's pods among those are selected (app.kubernetes.io/managed-by=
// cantus-operator): the admission policy (config/admission/own_objects.yaml) lets the
// operator write no other NetworkPolicy, so that a taken operator cannot open anyone
// else's pods with one.
func mcpIngressPolicySpec(selector map[string]string, from []*networkingv1ac.NetworkPolicyPeerApplyConfiguration, operator *networkingv1.NetworkPolicyPeer) *networkingv1ac.NetworkPolicySpecApplyConfiguration {
	if operator != nil {
		from = append(from, networkPolicyPeer(*operator))
	}
	selected := maps.Clone(selector)
	selected[LabelManagedBy] = FieldOwner
	spec := networkingv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(selected)).
		WithPolicyTypes(networkingv1.PolicyTypeIngress)
	if len(from) > 0 {
		spec.WithIngress(networkingv1ac.NetworkPolicyIngressRule().
			WithFrom(from...).
			WithPorts(networkingv1ac.NetworkPolicyPort().
				WithProtocol(corev1.ProtocolTCP).
				WithPort(intstr.FromString(portName))))
	}
	return spec
}

// networkPolicyPeer converts the API type into its apply configuration; both have the
// same JSON shape, and a round trip keeps every field without copying them one by one.
func networkPolicyPeer(peer networkingv1.NetworkPolicyPeer) *networkingv1ac.NetworkPolicyPeerApplyConfiguration {
	out := networkingv1ac.NetworkPolicyPeer()
	data, err := json.Marshal(peer)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		panic(fmt.Sprintf("NetworkPolicyPeer does not round-trip through JSON: %v", err))
	}
	return out
}

// serviceURL is the in-cluster URL of an MCP endpoint behind a Service.
func serviceURL(name, namespace, clusterDomain string, port int32, path string) string {
	if clusterDomain == "" {
		clusterDomain = defaultClusterDomain
	}
	return fmt.Sprintf("http://%s.%s.svc.%s:%d%s", name, namespace, clusterDomain, port, path)
}

// resourceList parses CPU and memory quantities written as constants.
func resourceList(cpu, memory string) corev1.ResourceList {
	list := corev1.ResourceList{}
	if cpu != "" {
		list[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		list[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return list
}
