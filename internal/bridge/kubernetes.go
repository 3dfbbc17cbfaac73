package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// The bridge pod.
const (
	// Port is where a bridge pod serves streamable HTTP.
	Port = 8765
	// FieldOwner is the server-side apply field manager (the operator's).
	FieldOwner = "cantus-operator"

	portName         = "mcp"
	bridgeContainer  = "bridge"
	installContainer = "install-bridge"
	binVolume        = "cantus-bin"
	tmpVolume        = "tmp"
	binDir           = "/cantus"
	adapterInImage   = "/adapter"
	adapterInShared  = binDir + "/adapter"
	tmpDir           = "/tmp"
	// shutdownGrace is the bridge's default --shutdown-grace.
	shutdownGrace     = 10 * time.Second
	componentBridge   = "stdio-bridge"
	bridgeAppName     = "cantus-bridge"
	nameSuffix        = "-bridge"
	maxServiceNameLen = 63
)

// Labels of the bridge's objects.
const (
	LabelName             = "app.kubernetes.io/name"
	LabelInstance         = "app.kubernetes.io/instance"
	LabelComponent        = "app.kubernetes.io/component"
	LabelManagedBy        = "app.kubernetes.io/managed-by"
	LabelRemoteToolImport = "cantus.dev/remotetoolimport"
)

// Kubernetes is the kubernetes runtime of stdio bridges: for each stdio import, a
// Deployment and a Service named <import>-bridge, owned by the import (so the garbage
// collector removes them with it) and applied server-side.
//
// The pod runs the user's image with the adapter copied in: an init container of the
// adapter image runs `/adapter bridge --install-to /cantus/adapter`, which copies the
// (static) adapter binary into an emptyDir; the main container runs the user's image
// with the command
//
//	/cantus/adapter bridge --port 8765 -- COMMAND... ARGS...
//
// so the bridge starts the user's command inside the user's image, with list-form exec.
// The pod's security settings are those of the SkillServer pods: non-root (65532),
// read-only root filesystem, no privilege escalation, ALL capabilities dropped, seccomp
// RuntimeDefault, no service account token; /tmp is a writable emptyDir and HOME points
// there, since most stdio servers (npx, uvx, …) want a writable home.
type Kubernetes struct {
	Client client.Client
	// AdapterImage holds /adapter (the operator's own image).
	AdapterImage string
	// ClusterDomain forms the Service URL, normally "cluster.local".
	ClusterDomain string
}

// OwnedTypes are the kinds Ensure creates; the controller should watch them (Owns) so
// that a Deployment becoming available triggers a reconcile.
func (k *Kubernetes) OwnedTypes() []client.Object {
	return []client.Object{&appsv1.Deployment{}, &corev1.Service{}}
}

// Ensure applies the bridge's Deployment and Service and returns the Service URL; ready
// is true once the Deployment is available with its latest spec.
func (k *Kubernetes) Ensure(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) (string, bool, error) {
	dep, err := k.deploymentFor(imp)
	if err != nil {
		return "", false, err
	}
	opts := []client.ApplyOption{client.FieldOwner(FieldOwner), client.ForceOwnership}
	if err := k.Client.Apply(ctx, dep, opts...); err != nil {
		return "", false, fmt.Errorf("apply Deployment %s: %w", *dep.Name, err)
	}
	svc := serviceFor(imp)
	if err := k.Client.Apply(ctx, svc, opts...); err != nil {
		return "", false, fmt.Errorf("apply Service %s: %w", *svc.Name, err)
	}
	live := &appsv1.Deployment{}
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: imp.Namespace, Name: Name(imp)}, live); err != nil {
		return "", false, fmt.Errorf("get Deployment %s: %w", Name(imp), err)
	}
	return k.URL(imp), deploymentAvailable(live), nil
}

// Forget does nothing: the garbage collector removes the owned Deployment and Service.
func (k *Kubernetes) Forget(context.Context, types.NamespacedName) error { return nil }

// URL is the bridge Service's MCP endpoint.
func (k *Kubernetes) URL(imp *cantusv1alpha1.RemoteToolImport) string {
	domain := k.ClusterDomain
	if domain == "" {
		domain = "cluster.local"
	}
	return fmt.Sprintf("http://%s.%s.svc.%s:%d%s", Name(imp), imp.Namespace, domain, Port, PathMCP)
}

// Name is the name of an import's bridge Deployment and Service: <import>-bridge. A
// Service name is a DNS label (at most 63 characters, starting with a letter), so a
// longer import name is cut and made unique with a hash, and one starting with a digit
// gets a letter in front.
func Name(imp *cantusv1alpha1.RemoteToolImport) string {
	name := imp.Name + nameSuffix
	if len(name) <= maxServiceNameLen && name[0] >= 'a' && name[0] <= 'z' && !strings.Contains(name, ".") {
		return name
	}
	sum := sha256.Sum256([]byte(imp.Name))
	hash := hex.EncodeToString(sum[:])[:8]
	prefix := strings.ReplaceAll(imp.Name, ".", "-")
	if prefix[0] < 'a' || prefix[0] > 'z' {
		prefix = "b" + prefix
	}
	keep := maxServiceNameLen - len(nameSuffix) - len(hash) - 1
	if len(prefix) > keep {
		prefix = prefix[:keep]
	}
	return strings.TrimRight(prefix, "-") + "-" + hash + nameSuffix
}

func selectorLabels(imp *cantusv1alpha1.RemoteToolImport) map[string]string {
	return map[string]string{LabelName: bridgeAppName, LabelInstance: Name(imp)}
}

func labels(imp *cantusv1alpha1.RemoteToolImport) map[string]string {
	l := selectorLabels(imp)
	l[LabelComponent] = componentBridge
	l[LabelManagedBy] = FieldOwner
	if len(imp.Name) <= 63 { // label values are at most 63 characters
		l[LabelRemoteToolImport] = imp.Name
	}
	return l
}

func ownerReference(imp *cantusv1alpha1.RemoteToolImport) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cantusv1alpha1.GroupVersion.String()).
		WithKind("RemoteToolImport").
		WithName(imp.Name).
		WithUID(imp.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// BridgeCommand is the main container's command: the adapter copied into the shared
// volume, bridging the import's command and args.
func BridgeCommand(argv []string) []string {
	return append([]string{adapterInShared, "bridge", "--port", strconv.Itoa(Port), "--"}, argv...)
}

func (k *Kubernetes) deploymentFor(imp *cantusv1alpha1.RemoteToolImport) (*appsv1ac.DeploymentApplyConfiguration, error) {
	argv, err := Argv(imp)
	if err != nil {
		return nil, err
	}
	if imp.Spec.Stdio.Image == "" {
		return nil, fmt.Errorf("RemoteToolImport %s/%s has no stdio image", imp.Namespace, imp.Name)
	}
	if k.AdapterImage == "" {
		return nil, fmt.Errorf("the kubernetes bridge runtime has no adapter image")
	}
	mountShared := func(readOnly bool) *corev1ac.VolumeMountApplyConfiguration {
		return corev1ac.VolumeMount().WithName(binVolume).WithMountPath(binDir).WithReadOnly(readOnly)
	}
	install := corev1ac.Container().
		WithName(installContainer).
		WithImage(k.AdapterImage).
		// The adapter image is distroless (no cp): the adapter copies itself.
		WithCommand(adapterInImage, "bridge", "--install-to", adapterInShared).
		WithResources(resources("10m", "16Mi", "64Mi")).
		WithVolumeMounts(mountShared(false)).
		WithSecurityContext(containerSecurityContext())
	main := corev1ac.Container().
		WithName(bridgeContainer).
		WithImage(imp.Spec.Stdio.Image).
		WithCommand(BridgeCommand(argv)...).
		WithEnv(corev1ac.EnvVar().WithName("HOME").WithValue(tmpDir)).
		WithPorts(corev1ac.ContainerPort().WithName(portName).WithContainerPort(Port).WithProtocol(corev1.ProtocolTCP)).
		WithReadinessProbe(httpProbe(PathReadyz, 2)).
		WithLivenessProbe(httpProbe(PathHealthz, 10)).
		WithResources(resources("50m", "64Mi", "256Mi")).
		WithVolumeMounts(mountShared(true), corev1ac.VolumeMount().WithName(tmpVolume).WithMountPath(tmpDir)).
		WithSecurityContext(containerSecurityContext())
	pod := corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		// The bridge's HTTP shutdown, then the child's stop (stdin, SIGTERM, 5s, SIGKILL).
		WithTerminationGracePeriodSeconds(int64((shutdownGrace + DefaultStopGrace + 5*time.Second).Seconds())).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(65532).
			WithRunAsGroup(65532).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithInitContainers(install).
		WithContainers(main).
		WithVolumes(
			corev1ac.Volume().WithName(binVolume).WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithSizeLimit(resource.MustParse("128Mi"))),
			corev1ac.Volume().WithName(tmpVolume).WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithSizeLimit(resource.MustParse("256Mi"))),
		)
	return appsv1ac.Deployment(Name(imp), imp.Namespace).
		WithLabels(labels(imp)).
		WithOwnerReferences(ownerReference(imp)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(1).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(imp))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels(imp)).
				WithSpec(pod))), nil
}

func containerSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithRunAsNonRoot(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
}

func resources(cpu, memory, memoryLimit string) *corev1ac.ResourceRequirementsApplyConfiguration {
	return corev1ac.ResourceRequirements().
		WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}).
		WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memoryLimit)})
}

func httpProbe(path string, periodSeconds int32) *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromString(portName))).
		WithPeriodSeconds(periodSeconds)
}

func serviceFor(imp *cantusv1alpha1.RemoteToolImport) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(Name(imp), imp.Namespace).
		WithLabels(labels(imp)).
		WithOwnerReferences(ownerReference(imp)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(selectorLabels(imp)).
			WithPorts(corev1ac.ServicePort().
				WithName(portName).
				WithPort(Port).
				WithTargetPort(intstr.FromString(portName)).
				WithProtocol(corev1.ProtocolTCP)))
}

// deploymentAvailable applies the SkillServer runtime's rollout rule to a bridge.
func deploymentAvailable(dep *appsv1.Deployment) bool {
	ok, _, _ := workload.DeploymentAvailability(dep)
	return ok
}
