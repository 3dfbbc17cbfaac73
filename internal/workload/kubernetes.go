package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// Paths inside the adapter container.
const (
	configMountDir = "/etc/cantus"
	containerName  = "adapter"
	// drainDelay keeps serving while endpoints controllers and proxies notice the pod
	// went unready; shutdownGrace bounds in-flight calls after that.
	drainDelay    = 5 * time.Second
	shutdownGrace = 25 * time.Second
)

// ConfigPath is where the adapter container reads its config.
const ConfigPath = configMountDir + "/" + adapterconfig.ConfigFileName

// Kubernetes runs each SkillServer as a ConfigMap, a Deployment, a Service and, when the
// spec limits who may connect, a NetworkPolicy, all owned by the SkillServer and applied
// server-side.
type Kubernetes struct {
	Client client.Client
	// Image is the adapter image, unless a SkillServer overrides it.
	Image string
	// ClusterDomain forms the Service URL, normally "cluster.local".
	ClusterDomain string
	// Operator selects the operator's own pods; a NetworkPolicy that limits who may
	// connect still lets them in, since they verify the pods through the Service. Nil
	// when unknown (the operator runs outside the cluster).
	Operator *networkingv1.NetworkPolicyPeer
	// APIReader reads from the API server, past the cache that holds only the operator's
	// labelled children: a child's name that the cache does not know is looked up there
	// before it is written, so that someone else's object is never taken over. Nil reads
	// nothing past the cache (tests with an uncached Client).
	APIReader client.Reader
	// TracingEnv are the OTEL_* variables (name → value) every adapter container gets
	// (tracing.AdapterEnv): set by the operator, never by a SkillServer, so that a tenant
	// cannot choose where spans go. Empty: adapters trace nothing.
	TracingEnv map[string]string

	applied *appliedCache
	shards  *shardPlans
}

// OperatorPeer selects the operator's pods: those labelled
// app.kubernetes.io/name=cantus-operator in its namespace.
func OperatorPeer(namespace string) *networkingv1.NetworkPolicyPeer {
	return &networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{LabelName: OperatorName}},
	}
}

func (k *Kubernetes) apply(ctx context.Context, live client.Object, desired applyConfigurationObject) error {
	return k.applied.apply(ctx, k.Client, k.APIReader, live, desired)
}

// deleteIfControlled deletes the child obj (of kind) named name when it exists and ss controls it,
// and says whether there was one so controlled; why ends the error message.
func (k *Kubernetes) deleteIfControlled(ctx context.Context, kind string, obj client.Object, name string, ss *cantusv1alpha1.SkillServer, why string) (bool, error) {
	err := k.Client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get %s %s: %w", kind, name, err)
	}
	if !metav1.IsControlledBy(obj, ss) {
		return false, nil
	}
	// Only the object looked at: one of that name created since (the cache lags, or
	// someone deleted ours and made theirs) has another UID, and the API server refuses.
	uid := obj.GetUID()
	if err := k.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("delete %s %s %s: %w", kind, name, why, err)
	}
	return true, nil
}

// NewKubernetes returns the kubernetes runtime.
func NewKubernetes(c client.Client, image, clusterDomain string) *Kubernetes {
	return &Kubernetes{Client: c, Image: image, ClusterDomain: clusterDomain, applied: newAppliedCache(), shards: newShardPlans()}
}

// OwnedTypes implements Runtime.
func (k *Kubernetes) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}, &networkingv1.NetworkPolicy{}, &corev1.PersistentVolumeClaim{}}
}

// Forget implements Runtime; the garbage collector removes owned objects.
func (k *Kubernetes) Forget(_ context.Context, key types.NamespacedName) error {
	k.shards.forget(key)
	return nil
}

// Apply implements Runtime.
func (k *Kubernetes) Apply(ctx context.Context, d Desired) (Observation, error) {
	ss := d.SkillServer
	// The NetworkPolicy goes first: if the API server refuses it, nothing is served open
	// to the whole cluster in the meantime.
	if err := k.reconcileNetworkPolicy(ctx, ss); err != nil {
		return Observation{}, err
	}
	// The Service depends on nothing the others write: it is applied (and, when new, looked
	// up) beside the ConfigMaps and the Deployment, which take one round trip to the API
	// server after another, so that a new SkillServer waits for two fewer of them.
	service := make(chan error, 1)
	go func() { service <- k.apply(ctx, &corev1.Service{}, serviceFor(ss)) }()
	if err := errors.Join(k.applyChain(ctx, d), <-service); err != nil {
		return Observation{}, err
	}
	return k.observe(ctx, ss)
}

// applyChain applies the children that must be written in order: the content shards
// before the config that names their files, the config before the Deployment that
// mounts it, and the shards no longer needed deleted after the Deployment stopped
// naming them.
func (k *Kubernetes) applyChain(ctx context.Context, d Desired) error {
	ss := d.SkillServer
	shards, err := k.applyContent(ctx, ss, d.Content, d.ContentUnread)
	if err != nil {
		return err
	}
	configMap, err := configMapFor(ss, d.Config)
	if err != nil {
		return err
	}
	if _, err := k.applyConfigMap(ctx, configMap); err != nil {
		return err
	}
	if ss.Spec.Memory != nil {
		if err := k.apply(ctx, &corev1.PersistentVolumeClaim{}, memoryClaimFor(ss)); err != nil {
			return err
		}
	}
	dep := k.deploymentFor(ss, d.RolloutHash, d.Files)
	withContentVolumes(dep, ss, shards, d.ImageSkills)
	if err := k.apply(ctx, &appsv1.Deployment{}, dep); err != nil {
		return err
	}
	return k.deleteContentShardsFrom(ctx, ss, shards)
}

func (k *Kubernetes) reconcileNetworkPolicy(ctx context.Context, ss *cantusv1alpha1.SkillServer) error {
	if len(ss.Spec.AllowFrom) > 0 {
		return k.apply(ctx, &networkingv1.NetworkPolicy{}, networkPolicyFor(ss, k.Operator))
	}
	_, err := k.deleteIfControlled(ctx, "NetworkPolicy", &networkingv1.NetworkPolicy{}, ss.Name, ss, "that allowFrom no longer asks for")
	return err
}

func (k *Kubernetes) observe(ctx context.Context, ss *cantusv1alpha1.SkillServer) (Observation, error) {
	obs := Observation{
		URL:      serviceURL(ss.Name, ss.Namespace, k.ClusterDomain, render.PortOf(ss), render.EndpointPath(ss)),
		Selector: Selector(ss),
	}
	dep := &appsv1.Deployment{}
	err := k.Client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name}, dep)
	if apierrors.IsNotFound(err) {
		// Just applied, not in the cache yet: the event that brings it reconciles again.
		// An error here would retry through the rate limiter, which at a thousand new
		// servers held every one of them back.
		dep = justCreatedDeployment(ss)
	} else if err != nil {
		return obs, fmt.Errorf("get Deployment %s: %w", ss.Name, err)
	}
	obs.Replicas = dep.Status.Replicas
	obs.ReadyReplicas = dep.Status.ReadyReplicas
	obs.Available, obs.Reason, obs.Message = DeploymentAvailability(dep)
	svc := &corev1.Service{}
	// The Service was just applied; the cache may not hold it yet, and the next event
	// about it reconciles again.
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name}, svc); client.IgnoreNotFound(err) != nil {
		return obs, fmt.Errorf("get Service %s: %w", ss.Name, err)
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		obs.ProbeURL = fmt.Sprintf("http://%s%s", net.JoinHostPort(ip, fmt.Sprint(render.PortOf(ss))), render.EndpointPath(ss))
	}
	return obs, nil
}

// justCreatedDeployment stands for a Deployment the API server has just taken and its
// controller has not observed yet.
func justCreatedDeployment(ss *cantusv1alpha1.SkillServer) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(ptr.Deref(ss.Spec.Replicas, 1))},
	}
}

// DeploymentAvailability reads a Deployment's status the way `kubectl rollout status`
// does: the controller must have seen the latest spec before its counts mean anything.
// The stdio bridges use the same rule.
func DeploymentAvailability(dep *appsv1.Deployment) (bool, string, string) {
	want := ptr.Deref(dep.Spec.Replicas, 1)
	switch {
	case want == 0:
		return false, cantusv1alpha1.ReasonScaledToZero, "replicas is 0: no adapter pod serves the tools"
	case dep.Status.ObservedGeneration < dep.Generation:
		return false, cantusv1alpha1.ReasonProgressing, "waiting for the Deployment controller to observe the latest spec"
	case dep.Status.UpdatedReplicas < want:
		return false, cantusv1alpha1.ReasonProgressing, fmt.Sprintf("%d of %d adapter pods run the latest config", dep.Status.UpdatedReplicas, want)
	case dep.Status.ReadyReplicas < 1 || !deploymentConditionTrue(dep, appsv1.DeploymentAvailable):
		return false, cantusv1alpha1.ReasonDeploymentNotReady, fmt.Sprintf("%d of %d adapter pods ready", dep.Status.ReadyReplicas, want)
	default:
		return true, cantusv1alpha1.ReasonAvailable, fmt.Sprintf("%d of %d adapter pods ready", dep.Status.ReadyReplicas, want)
	}
}

func deploymentConditionTrue(dep *appsv1.Deployment, t appsv1.DeploymentConditionType) bool {
	for _, c := range dep.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ownerOf makes the SkillServer the controller of an adapter child.
func ownerOf(ss *cantusv1alpha1.SkillServer) *metav1ac.OwnerReferenceApplyConfiguration {
	return ownerReference("SkillServer", ss)
}

func configMapFor(ss *cantusv1alpha1.SkillServer, cfg *adapterconfig.Config) (*corev1ac.ConfigMapApplyConfiguration, error) {
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode adapter config: %w", err)
	}
	return corev1ac.ConfigMap(ConfigMapName(ss), ss.Namespace).
		WithLabels(Labels(ss)).
		WithOwnerReferences(ownerOf(ss)).
		WithData(map[string]string{adapterconfig.ConfigFileName: string(data)}), nil
}

// ConfigMapName is the name of the ConfigMap that holds a SkillServer's adapter config.
func ConfigMapName(ss *cantusv1alpha1.SkillServer) string { return ss.Name + "-adapter" }

func (k *Kubernetes) deploymentFor(ss *cantusv1alpha1.SkillServer, hash string, files []render.File) *appsv1ac.DeploymentApplyConfiguration {
	pod := restrictedPodSpec(drainDelay + shutdownGrace).
		WithContainers(k.containerFor(ss, files)).
		WithVolumes(volumesFor(ss, files)...)
	// The memory claim's files belong to the adapter's group, so a fresh volume is writable.
	pod.SecurityContext.WithFSGroup(nonRootID)
	if ss.Spec.Pod != nil && ss.Spec.Pod.ServiceAccountName != "" {
		pod.WithServiceAccountName(ss.Spec.Pod.ServiceAccountName)
	}
	return appsv1ac.Deployment(ss.Name, ss.Namespace).
		WithLabels(Labels(ss)).
		WithOwnerReferences(ownerOf(ss)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(ptr.Deref(ss.Spec.Replicas, 1)).
			WithStrategy(strategyFor(ss)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(ss))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(Labels(ss)).
				WithAnnotations(map[string]string{AnnotationConfigHash: hash}).
				WithSpec(pod)))
}

func (k *Kubernetes) containerFor(ss *cantusv1alpha1.SkillServer, files []render.File) *corev1ac.ContainerApplyConfiguration {
	image := k.Image
	if ss.Spec.Pod != nil && ss.Spec.Pod.Image != "" {
		image = ss.Spec.Pod.Image
	}
	return corev1ac.Container().
		WithName(containerName).
		WithImage(image).
		WithCommand(AdapterCommand).
		WithArgs(AdapterArgs(ss)...).
		WithPorts(mcpContainerPort(render.PortOf(ss)), metricsContainerPort(MetricsPort(ss))).
		WithReadinessProbe(httpProbe(adapterconfig.PathReadyz, 2)).
		WithLivenessProbe(httpProbe(adapterconfig.PathHealthz, 10)).
		WithResources(resourcesFor(ss)).
		WithVolumeMounts(volumeMountsFor(ss, files)...).
		WithEnv(k.tracingEnvFor(ss)...).
		WithSecurityContext(restrictedContainerSecurityContext())
}

// tracingEnvFor is the adapter container's tracing env: the operator's TracingEnv, with
// the SkillServer's namespace and name added to the resource attributes.
func (k *Kubernetes) tracingEnvFor(ss *cantusv1alpha1.SkillServer) []*corev1ac.EnvVarApplyConfiguration {
	if len(k.TracingEnv) == 0 {
		return nil
	}
	env := maps.Clone(k.TracingEnv)
	attrs := "k8s.namespace.name=" + ss.Namespace + ",k8s.deployment.name=" + ss.Name
	if v := env["OTEL_RESOURCE_ATTRIBUTES"]; v != "" {
		attrs = v + "," + attrs
	}
	env["OTEL_RESOURCE_ATTRIBUTES"] = attrs
	env["OTEL_SERVICE_NAME"] = "cantus-adapter"
	out := make([]*corev1ac.EnvVarApplyConfiguration, 0, len(env))
	for _, name := range slices.Sorted(maps.Keys(env)) {
		out = append(out, corev1ac.EnvVar().WithName(name).WithValue(env[name]))
	}
	return out
}

// AdapterCommand is the adapter binary's path in the image.
const AdapterCommand = "/adapter"

// AdapterArgs is the adapter container's argument list.
func AdapterArgs(ss *cantusv1alpha1.SkillServer) []string {
	return []string{
		"serve",
		"--config", ConfigPath,
		"--port", fmt.Sprint(render.PortOf(ss)),
		"--metrics-port", fmt.Sprint(MetricsPort(ss)),
		"--drain-delay", drainDelay.String(),
		"--shutdown-grace", shutdownGrace.String(),
	}
}

// DefaultMetricsPort is the adapter container's metrics port, named "metrics".
const DefaultMetricsPort = int32(9090)

// MetricsPort is the adapter's metrics port: DefaultMetricsPort, or the next one when
// the MCP port is DefaultMetricsPort.
func MetricsPort(ss *cantusv1alpha1.SkillServer) int32 {
	if render.PortOf(ss) == DefaultMetricsPort {
		return DefaultMetricsPort + 1
	}
	return DefaultMetricsPort
}

func resourcesFor(ss *cantusv1alpha1.SkillServer) *corev1ac.ResourceRequirementsApplyConfiguration {
	requests, limits := resourceList("50m", "64Mi"), resourceList("", "256Mi")
	if ss.Spec.Pod != nil && ss.Spec.Pod.Resources != nil {
		requests, limits = ss.Spec.Pod.Resources.Requests, ss.Spec.Pod.Resources.Limits
	}
	rr := corev1ac.ResourceRequirements()
	if len(requests) > 0 {
		rr.WithRequests(requests)
	}
	if len(limits) > 0 {
		rr.WithLimits(limits)
	}
	return rr
}

func volumesFor(ss *cantusv1alpha1.SkillServer, files []render.File) []*corev1ac.VolumeApplyConfiguration {
	volumes := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName("config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(ConfigMapName(ss))),
	}
	projected, callerKeys := splitCallerKeys(files)
	if len(projected) > 0 {
		volumes = append(volumes, corev1ac.Volume().WithName("imports").WithProjected(importFiles(projected)))
	}
	if callerKeys != nil {
		// A volume of its own projecting every key of the Secret (no items): the kubelet
		// brings keys added and removed later without a change of the pod template.
		// Projected, as the admission policy admits for the operator's pods.
		volumes = append(volumes, corev1ac.Volume().WithName(callerKeysVolume).WithProjected(
			corev1ac.ProjectedVolumeSource().WithDefaultMode(0o440).WithSources(
				corev1ac.VolumeProjection().WithSecret(corev1ac.SecretProjection().WithName(callerKeys.Secret)))))
	}
	if ss.Spec.Memory != nil {
		volumes = append(volumes, corev1ac.Volume().WithName("memory").WithPersistentVolumeClaim(
			corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(MemoryClaimName(ss))))
	}
	return volumes
}

func volumeMountsFor(ss *cantusv1alpha1.SkillServer, files []render.File) []*corev1ac.VolumeMountApplyConfiguration {
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName("config").WithMountPath(configMountDir).WithReadOnly(true),
	}
	projected, callerKeys := splitCallerKeys(files)
	if len(projected) > 0 {
		mounts = append(mounts, corev1ac.VolumeMount().WithName("imports").WithMountPath(render.ImportFilesDir).WithReadOnly(true))
	}
	if callerKeys != nil {
		mounts = append(mounts, corev1ac.VolumeMount().WithName(callerKeysVolume).WithMountPath(callerKeys.Path).WithReadOnly(true))
	}
	if ss.Spec.Memory != nil {
		mounts = append(mounts, corev1ac.VolumeMount().WithName("memory").WithMountPath(render.MemoryMountPath))
	}
	return mounts
}

// callerKeysVolume mounts a gateway's caller-keys Secret (render.CallerKeysDir).
const callerKeysVolume = "caller-keys"

// actorTokenSeconds is the lifetime asked for a gateway's actor token: the kubelet
// renews it at 80% of that.
const actorTokenSeconds = 3600

// splitCallerKeys separates the caller-keys directory (a File with AllKeys) from the
// files projected one key each.
func splitCallerKeys(files []render.File) (projected []render.File, callerKeys *render.File) {
	for i := range files {
		if files[i].AllKeys {
			callerKeys = &files[i]
			continue
		}
		projected = append(projected, files[i])
	}
	return projected, callerKeys
}

// importFiles projects the header values and CA bundles of re-exported imports, each key
// at the path the rendered config names.
func importFiles(files []render.File) *corev1ac.ProjectedVolumeSourceApplyConfiguration {
	projected := corev1ac.ProjectedVolumeSource().WithDefaultMode(0o440)
	for _, f := range files {
		rel := strings.TrimPrefix(f.Path, render.ImportFilesDir+"/")
		if f.ServiceAccountTokenAudience != "" {
			// The kubelet renews it before it expires; the adapter re-reads the file.
			projected.WithSources(corev1ac.VolumeProjection().WithServiceAccountToken(corev1ac.ServiceAccountTokenProjection().
				WithAudience(f.ServiceAccountTokenAudience).WithExpirationSeconds(actorTokenSeconds).WithPath(rel)))
			continue
		}
		item := corev1ac.KeyToPath().WithKey(f.Key).WithPath(rel)
		if f.Secret != "" {
			projected.WithSources(corev1ac.VolumeProjection().WithSecret(corev1ac.SecretProjection().WithName(f.Secret).WithItems(item)))
		} else {
			projected.WithSources(corev1ac.VolumeProjection().WithConfigMap(corev1ac.ConfigMapProjection().WithName(f.ConfigMap).WithItems(item)))
		}
	}
	return projected
}

// MemoryClaimName is the PersistentVolumeClaim of a SkillServer's memory tool.
func MemoryClaimName(ss *cantusv1alpha1.SkillServer) string { return ss.Name + "-memory" }

func memoryClaimFor(ss *cantusv1alpha1.SkillServer) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	m := ss.Spec.Memory
	size := resource.MustParse("1Gi")
	if m.Size != nil {
		// The reconciler refuses a spec whose size does not parse before it gets here.
		if parsed, err := m.Size.Parse(); err == nil {
			size = parsed
		}
	}
	mode := m.AccessMode
	if mode == "" {
		mode = corev1.ReadWriteOnce
	}
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(mode).
		WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: size}))
	if m.StorageClassName != nil {
		spec.WithStorageClassName(*m.StorageClassName)
	}
	return corev1ac.PersistentVolumeClaim(MemoryClaimName(ss), ss.Namespace).
		WithLabels(Labels(ss)).
		WithOwnerReferences(ownerOf(ss)).
		WithSpec(spec)
}

// strategyFor replaces pods one at a time, except when they share a ReadWriteOnce memory
// claim: a new pod could not mount it while the old one holds it, so the old one goes first.
func strategyFor(ss *cantusv1alpha1.SkillServer) *appsv1ac.DeploymentStrategyApplyConfiguration {
	if ss.Spec.Memory != nil && ss.Spec.Memory.AccessMode != corev1.ReadWriteMany {
		return appsv1ac.DeploymentStrategy().WithType(appsv1.RecreateDeploymentStrategyType)
	}
	return appsv1ac.DeploymentStrategy().WithType(appsv1.RollingUpdateDeploymentStrategyType)
}

// Discovery labels and annotations on the Service, so that agent stacks find the server
// with no extra step:
//   - cantus.dev/mcp-server: ours, for the catalog and `kubectl get svc -l`.
//   - kagent.dev/mcp-service=true with kagent.dev/mcp-service-{path,port,protocol}: how
//     kagent discovers MCP Services (kagent-dev/kagent, the MCPService* constants of its
//     agent translator; protocol values are its RemoteMCPServerProtocol enum,
//     STREAMABLE_HTTP or SSE).
//   - appProtocol agentgateway.dev/mcp on the port: how agentgateway (and kgateway) select
//     MCP backends among Services.
const (
	LabelMCPServer               = "cantus.dev/mcp-server"
	LabelKagentMCPService        = "kagent.dev/mcp-service"
	AnnotationKagentPath         = "kagent.dev/mcp-service-path"
	AnnotationKagentPort         = "kagent.dev/mcp-service-port"
	AnnotationKagentProtocol     = "kagent.dev/mcp-service-protocol"
	AnnotationMCPPath            = "cantus.dev/mcp-path"
	AnnotationMCPTransport       = "cantus.dev/mcp-transport"
	AppProtocolAgentgatewayMCP   = "agentgateway.dev/mcp"
	kagentProtocolStreamableHTTP = "STREAMABLE_HTTP"
	kagentProtocolSSE            = "SSE"
)

func discoveryLabels(ss *cantusv1alpha1.SkillServer) map[string]string {
	l := Labels(ss)
	l[LabelMCPServer] = "true"
	l[LabelKagentMCPService] = "true"
	return l
}

func discoveryAnnotations(ss *cantusv1alpha1.SkillServer) map[string]string {
	transport := ss.Spec.TransportOrDefault()
	protocol := kagentProtocolStreamableHTTP
	if transport == cantusv1alpha1.TransportSSE {
		protocol = kagentProtocolSSE
	}
	return map[string]string{
		AnnotationKagentPath:     render.EndpointPath(ss),
		AnnotationKagentPort:     fmt.Sprint(render.PortOf(ss)),
		AnnotationKagentProtocol: protocol,
		AnnotationMCPPath:        render.EndpointPath(ss),
		AnnotationMCPTransport:   string(transport),
	}
}

func serviceFor(ss *cantusv1alpha1.SkillServer) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(ss.Name, ss.Namespace).
		WithLabels(discoveryLabels(ss)).
		WithAnnotations(discoveryAnnotations(ss)).
		WithOwnerReferences(ownerOf(ss)).
		WithSpec(mcpServiceSpec(SelectorLabels(ss), corev1ac.ServicePort().
			WithAppProtocol(AppProtocolAgentgatewayMCP).
			WithPort(render.PortOf(ss))))
}

func networkPolicyFor(ss *cantusv1alpha1.SkillServer, operator *networkingv1.NetworkPolicyPeer) *networkingv1ac.NetworkPolicyApplyConfiguration {
	from := make([]*networkingv1ac.NetworkPolicyPeerApplyConfiguration, 0, len(ss.Spec.AllowFrom))
	for i := range ss.Spec.AllowFrom {
		from = append(from, networkPolicyPeer(ss.Spec.AllowFrom[i]))
	}
	return networkingv1ac.NetworkPolicy(ss.Name, ss.Namespace).
		WithLabels(Labels(ss)).
		WithOwnerReferences(ownerOf(ss)).
		WithSpec(mcpIngressPolicySpec(SelectorLabels(ss), from, operator))
}
