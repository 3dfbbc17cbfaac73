package workload

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/stdioproxy"
)

// The bridge pod.
const (
	// BridgePort is where a bridge pod serves streamable HTTP.
	BridgePort = stdioproxy.DefaultPort

	bridgeContainer  = "bridge"
	installContainer = "install-bridge"
	binVolume        = "cantus-bin"
	tmpVolume        = "tmp"
	binDir           = "/cantus"
	adapterInShared  = binDir + "/adapter"
	tmpDir           = "/tmp"
	// bridgeShutdownGrace is the bridge's default --shutdown-grace.
	bridgeShutdownGrace = 10 * time.Second
	componentBridge     = "stdio-bridge"
	bridgeAppName       = "cantus-bridge"
	// annotationTokenDigest on the bridge's pod template rolls the pod when its token
	// changes: the container reads the token from its environment at start.
	annotationTokenDigest = "cantus.dev/bridge-token-digest" //nolint:gosec // G101: an annotation's name; its value is a digest

)

// LabelRemoteToolImport names the import a bridge object belongs to.
const LabelRemoteToolImport = "cantus.dev/remotetoolimport"

// KubernetesBridges is the kubernetes runtime of stdio bridges: for each stdio import, a
// NetworkPolicy, a Deployment and a Service named <import>-bridge, owned by the import (so
// the garbage collector removes them with it) and applied server-side through the adapter
// runtime's client and write cache.
//
// Only the gateways of the SkillServers that import the bridge and the operator's
// handshake may call it: the NetworkPolicy admits their pods and no others, and the
// bridge requires the token of its Secret (EnsureBridgeToken), which the container
// reads from CANTUS_BRIDGE_TOKEN and the gateways send as a header.
//
// The pod runs the user's image with the adapter copied in: an init container of the
// adapter image runs `/adapter bridge --install-to /cantus/adapter`, which copies the
// (static) adapter binary into an emptyDir; the main container runs the user's image
// with the command
//
//	/cantus/adapter bridge --port 8765 -- COMMAND... ARGS...
//
// so the bridge starts the user's command inside the user's image, with list-form exec.
// The pod's security settings are those of the adapter pods (restrictedPodSpec); /tmp is
// a writable emptyDir and HOME points there, since most stdio servers (npx, uvx, …) want
// a writable home.
type KubernetesBridges struct {
	runtime *Kubernetes
}

// Bridges returns the runtime of stdio bridges that shares this runtime's client, image
// (it holds the adapter binary the bridge pods copy in), cluster domain and write cache.
func (k *Kubernetes) Bridges() *KubernetesBridges { return &KubernetesBridges{runtime: k} }

// OwnedTypes are the kinds Ensure creates; the controller should watch them (Owns) so
// that a Deployment becoming available triggers a reconcile.
func (b *KubernetesBridges) OwnedTypes() []client.Object {
	return []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &networkingv1.NetworkPolicy{}}
}

// Ensure applies the bridge's NetworkPolicy, Deployment and Service and returns the
// bridge's URL; ready is true once the Deployment is available with its latest spec and
// the Service has its cluster IP. The NetworkPolicy goes first, so that the bridge is
// never served to the whole cluster while it is applied.
//
// The URL names the Service by its cluster IP, not its DNS name: the operator's handshake
// and a gateway's adapter pods then reach the bridge on clusters without cluster DNS too,
// the same way the operator verifies SkillServers. Until the Service is seen with its IP
// (the cache may lag the apply; the Service's event reconciles again) the URL is the DNS
// form and the bridge is not ready.
func (b *KubernetesBridges) Ensure(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, access BridgeAccess) (string, bool, error) {
	if access.Token == "" {
		return "", false, fmt.Errorf("the bridge of %s/%s has no token", imp.Namespace, imp.Name)
	}
	dep, err := b.deploymentFor(imp, access.Token)
	if err != nil {
		return "", false, err
	}
	k := b.runtime
	if err := k.apply(ctx, &networkingv1.NetworkPolicy{}, bridgeNetworkPolicyFor(imp, access.SkillServers, k.Operator)); err != nil {
		return "", false, err
	}
	live := &appsv1.Deployment{}
	if err := k.apply(ctx, live, dep); err != nil {
		return "", false, err
	}
	if err := k.apply(ctx, &corev1.Service{}, bridgeServiceFor(imp)); err != nil {
		return "", false, err
	}
	key := types.NamespacedName{Namespace: imp.Namespace, Name: BridgeName(imp)}
	// apply read the Deployment before writing; read it again for the status after.
	if err := k.Client.Get(ctx, key, live); err != nil {
		return "", false, fmt.Errorf("get Deployment %s: %w", key.Name, err)
	}
	url, routed, err := b.clusterIPURL(ctx, key)
	if err != nil {
		return "", false, err
	}
	if !routed {
		return b.URL(imp), false, nil
	}
	available, _, _ := DeploymentAvailability(live)
	return url, available, nil
}

// clusterIPURL is the bridge's MCP endpoint at its Service's cluster IP; false while the
// Service is not seen yet or has no IP.
func (b *KubernetesBridges) clusterIPURL(ctx context.Context, key types.NamespacedName) (string, bool, error) {
	svc := &corev1.Service{}
	if err := b.runtime.Client.Get(ctx, key, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("get Service %s: %w", key.Name, err)
	}
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone {
		return "", false, nil
	}
	return fmt.Sprintf("http://%s%s", net.JoinHostPort(ip, strconv.Itoa(BridgePort)), stdioproxy.PathMCP), true, nil
}

// Forget does nothing: the garbage collector removes the owned objects.
func (b *KubernetesBridges) Forget(context.Context, types.NamespacedName) error { return nil }

// URL is the bridge Service's MCP endpoint by its cluster DNS name.
func (b *KubernetesBridges) URL(imp *cantusv1alpha1.RemoteToolImport) string {
	return serviceURL(BridgeName(imp), imp.Namespace, b.runtime.ClusterDomain, BridgePort, stdioproxy.PathMCP)
}

// BridgeName is the name of an import's bridge objects: <import>-bridge, made a DNS
// label (render.BridgeName).
func BridgeName(imp *cantusv1alpha1.RemoteToolImport) string { return render.BridgeName(imp.Name) }

func bridgeSelectorLabels(imp *cantusv1alpha1.RemoteToolImport) map[string]string {
	return map[string]string{LabelName: bridgeAppName, LabelInstance: BridgeName(imp)}
}

func bridgeLabels(imp *cantusv1alpha1.RemoteToolImport) map[string]string {
	l := bridgeSelectorLabels(imp)
	l[LabelComponent] = componentBridge
	l[LabelManagedBy] = FieldOwner
	if len(imp.Name) <= 63 { // label values are at most 63 characters
		l[LabelRemoteToolImport] = imp.Name
	}
	return l
}

// bridgeOwner makes the import the controller of its bridge objects.
func bridgeOwner(imp *cantusv1alpha1.RemoteToolImport) *metav1ac.OwnerReferenceApplyConfiguration {
	return ownerReference("RemoteToolImport", imp)
}

// BridgeCommand is the main container's command: the adapter copied into the shared
// volume, bridging the import's command and args.
func BridgeCommand(argv []string) []string {
	return append([]string{adapterInShared, "bridge", "--port", strconv.Itoa(BridgePort), "--"}, argv...)
}

func (b *KubernetesBridges) deploymentFor(imp *cantusv1alpha1.RemoteToolImport, token string) (*appsv1ac.DeploymentApplyConfiguration, error) {
	argv, err := BridgeArgv(imp)
	if err != nil {
		return nil, err
	}
	if imp.Spec.Stdio.Image == "" {
		return nil, fmt.Errorf("RemoteToolImport %s/%s has no stdio image", imp.Namespace, imp.Name)
	}
	adapterImage := b.runtime.Image
	if adapterImage == "" {
		return nil, fmt.Errorf("the kubernetes bridge runtime has no adapter image")
	}
	// readOnly is set only when true: the API server drops a false one, and a request
	// holding it would never match the live object, so every restart rewrote the bridge.
	mountShared := func(readOnly bool) *corev1ac.VolumeMountApplyConfiguration {
		mount := corev1ac.VolumeMount().WithName(binVolume).WithMountPath(binDir)
		if readOnly {
			mount.WithReadOnly(true)
		}
		return mount
	}
	install := corev1ac.Container().
		WithName(installContainer).
		WithImage(adapterImage).
		// The adapter image is distroless (no cp): the adapter copies itself.
		WithCommand(AdapterCommand, "bridge", "--install-to", adapterInShared).
		WithResources(bridgeResources("10m", "16Mi", "64Mi")).
		WithVolumeMounts(mountShared(false)).
		WithSecurityContext(restrictedContainerSecurityContext())
	main := corev1ac.Container().
		WithName(bridgeContainer).
		WithImage(imp.Spec.Stdio.Image).
		WithCommand(BridgeCommand(argv)...).
		WithEnv(
			corev1ac.EnvVar().WithName("HOME").WithValue(tmpDir),
			// The bridge takes it out of the environment its stdio command inherits.
			corev1ac.EnvVar().WithName(stdioproxy.TokenEnv).WithValueFrom(corev1ac.EnvVarSource().
				WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(BridgeName(imp)).WithKey(render.BridgeTokenKey))),
		).
		WithPorts(mcpContainerPort(BridgePort)).
		WithReadinessProbe(httpProbe(stdioproxy.PathReadyz, 2)).
		WithLivenessProbe(httpProbe(stdioproxy.PathHealthz, 10)).
		WithResources(bridgeResources("50m", "64Mi", "256Mi")).
		WithVolumeMounts(mountShared(true), corev1ac.VolumeMount().WithName(tmpVolume).WithMountPath(tmpDir)).
		WithSecurityContext(restrictedContainerSecurityContext())
	// The bridge's HTTP shutdown, then the child's stop (stdin, SIGTERM, StopGrace, SIGKILL).
	pod := restrictedPodSpec(bridgeShutdownGrace+stdioproxy.DefaultStopGrace).
		WithInitContainers(install).
		WithContainers(main).
		WithVolumes(
			corev1ac.Volume().WithName(binVolume).WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithSizeLimit(resource.MustParse("128Mi"))),
			corev1ac.Volume().WithName(tmpVolume).WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithSizeLimit(resource.MustParse("256Mi"))),
		)
	return appsv1ac.Deployment(BridgeName(imp), imp.Namespace).
		WithLabels(bridgeLabels(imp)).
		WithOwnerReferences(bridgeOwner(imp)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(1).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(bridgeSelectorLabels(imp))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(bridgeLabels(imp)).
				WithAnnotations(map[string]string{annotationTokenDigest: tokenDigest(token)}).
				WithSpec(pod))), nil
}

func bridgeResources(cpu, memory, memoryLimit string) *corev1ac.ResourceRequirementsApplyConfiguration {
	return corev1ac.ResourceRequirements().
		WithRequests(resourceList(cpu, memory)).
		WithLimits(resourceList("", memoryLimit))
}

func bridgeServiceFor(imp *cantusv1alpha1.RemoteToolImport) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(BridgeName(imp), imp.Namespace).
		WithLabels(bridgeLabels(imp)).
		WithOwnerReferences(bridgeOwner(imp)).
		WithSpec(mcpServiceSpec(bridgeSelectorLabels(imp), corev1ac.ServicePort().WithPort(BridgePort)))
}

// bridgeNetworkPolicyFor admits to the bridge's MCP port the gateway pods of the named
// SkillServers (of the import's namespace) and the operator's pods, and nothing else.
func bridgeNetworkPolicyFor(imp *cantusv1alpha1.RemoteToolImport, skillServers []string, operator *networkingv1.NetworkPolicyPeer) *networkingv1ac.NetworkPolicyApplyConfiguration {
	var from []*networkingv1ac.NetworkPolicyPeerApplyConfiguration
	if servers := sortedUnique(skillServers); len(servers) > 0 {
		from = append(from, networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector().
			WithMatchLabels(map[string]string{LabelName: adapterName}).
			WithMatchExpressions(metav1ac.LabelSelectorRequirement().
				WithKey(LabelInstance).
				WithOperator(metav1.LabelSelectorOpIn).
				WithValues(servers...))))
	}
	return networkingv1ac.NetworkPolicy(BridgeName(imp), imp.Namespace).
		WithLabels(bridgeLabels(imp)).
		WithOwnerReferences(bridgeOwner(imp)).
		WithSpec(mcpIngressPolicySpec(bridgeSelectorLabels(imp), from, operator))
}

func sortedUnique(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}
