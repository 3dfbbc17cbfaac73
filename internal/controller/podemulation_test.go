package controller

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/mcpkit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// TestPodEmulation starts the adapter the way the kubelet would start the container the
// reconciler wrote: the container's command and args, its env, and its volumes (the
// ConfigMap and the auth Secret) at their mount paths, in a chroot that stands in for the
// image's root filesystem. Then two MCP clients nobody here wrote call its tools.
func TestPodEmulation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pod's filesystem is emulated with chroot, which needs root (CI and dev machines here run as root)")
	}
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	token := "s3cr3t-token"
	g := NewWithT(t)
	g.Expect(k8sClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mcp-token"},
		Data:       map[string][]byte{"token": []byte(token)},
	})).To(Succeed())

	for _, transport := range []cantusv1alpha1.Transport{cantusv1alpha1.TransportStreamableHTTP, cantusv1alpha1.TransportSSE} {
		t.Run(string(transport), func(t *testing.T) {
			g := NewWithT(t)
			name := "pod-" + string(transport)
			ss := kubekit.NewSkillServer(ns, name, kubekit.TemplateSkill("search_book", "found: {{ .title }}"))
			ss.Spec.Transport = transport
			ss.Spec.Auth = &cantusv1alpha1.AuthSpec{BearerTokenSecretRef: &cantusv1alpha1.SecretKeyRef{Name: "mcp-token", Key: "token"}}
			g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
			r := &SkillServerReconciler{Client: k8sClient, Runtime: workload.NewKubernetes(k8sClient, "img", "cluster.local")}
			_, err := r.Reconcile(ctx, kubekit.ReconcileRequest(ss))
			g.Expect(err).NotTo(HaveOccurred())

			dep := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(ss), dep)).To(Succeed())
			server := startAsPod(t, ctx, dep)
			url := server.BaseURL + map[cantusv1alpha1.Transport]string{
				cantusv1alpha1.TransportStreamableHTTP: "/mcp", cantusv1alpha1.TransportSSE: "/sse",
			}[transport]
			auth := map[string]string{"Authorization": "Bearer " + token}

			ts := peers.TSClient(t, ctx, peers.TSClientOptions{
				URL: url, Transport: string(transport), Headers: auth,
				Call: "search_book", Args: map[string]any{"title": "Dune"},
			})
			g.Expect(ts.ToolNames()).To(Equal([]string{"search_book"}))
			g.Expect(ts.Result.IsError).To(BeFalse())
			g.Expect(ts.Result.Text()).To(Equal("found: Dune"))

			res, err := mcpkit.CallTool(ctx, url, string(transport), "search_book", map[string]any{"title": "Solaris"}, auth)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mcpkit.ResultText(res)).To(Equal("found: Solaris"))

			_, err = peers.TryTSClient(t, ctx, peers.TSClientOptions{URL: url, Transport: string(transport)})
			g.Expect(err).To(HaveOccurred(), "without the Secret's token the pod refuses clients")
		})
	}
}

// startAsPod lays out the container's filesystem under a temporary root and runs the
// container's command with its args inside it.
func startAsPod(t *testing.T, ctx context.Context, dep *appsv1.Deployment) *peers.Server {
	t.Helper()
	return startAsPodOn(t, ctx, dep, "127.0.0.1")
}

// startAsPodBehindService starts the pod listening on every interface, as in its own
// network namespace: clients then reach it by an address other than the one it listens
// on (a Service's cluster IP), which a server bound to loopback refuses as DNS rebinding.
func startAsPodBehindService(t *testing.T, ctx context.Context, dep *appsv1.Deployment) *peers.Server {
	t.Helper()
	return startAsPodOn(t, ctx, dep, "0.0.0.0")
}

func startAsPodOn(t *testing.T, ctx context.Context, dep *appsv1.Deployment, host string) *peers.Server {
	t.Helper()
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	root := t.TempDir()
	copyFile(t, peers.AdapterBinary(t), filepath.Join(root, c.Command[0]), 0o755)
	for _, m := range c.VolumeMounts {
		materializeVolume(t, ctx, dep.Namespace, volumeNamed(t, pod.Volumes, m.Name), filepath.Join(root, m.MountPath))
	}

	// The pod listens on all interfaces of its own network namespace; here it shares the
	// host's, so bind the given host and ephemeral ports instead (later flags win).
	args := append(append([]string{}, c.Args...), "--host", host, "--port", "0", "--metrics-port", "0")
	cmd := exec.Command(c.Command[0], args...)
	cmd.Env = []string{}
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     root,
		Credential: &syscall.Credential{Uid: uint32(*pod.SecurityContext.RunAsUser), Gid: uint32(*pod.SecurityContext.RunAsGroup)},
	}
	cmd.Dir = "/"
	// Files must be readable by the pod's non-root user, as kubelet makes them.
	g := NewWithT(t)
	g.Expect(filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, int(*pod.SecurityContext.RunAsUser), int(*pod.SecurityContext.RunAsGroup))
	})).To(Succeed())
	g.Expect(os.Chmod(root, 0o755)).To(Succeed())
	return peers.StartAdapterCommand(t, ctx, cmd)
}

func volumeNamed(t *testing.T, volumes []corev1.Volume, name string) corev1.Volume {
	for _, v := range volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("volume %q is mounted but not declared", name)
	return corev1.Volume{}
}

// emulatedImages are the folders that stand in for images mounted as image volumes,
// by reference: the image's root filesystem.
var emulatedImages = map[string]string{}

// materializeVolume writes a ConfigMap, Secret or projected volume the way kubelet
// projects it, and copies an image volume's folder from emulatedImages.
func materializeVolume(t *testing.T, ctx context.Context, ns string, v corev1.Volume, dir string) {
	t.Helper()
	files := map[string][]byte{}
	switch {
	case v.Image != nil:
		src, ok := emulatedImages[v.Image.Reference]
		if !ok {
			t.Fatalf("volume %s: no folder stands in for image %s", v.Name, v.Image.Reference)
		}
		files = folderFiles(t, src)
	case v.ConfigMap != nil:
		files = projectItems(configMapData(t, ctx, ns, v.ConfigMap.Name), v.ConfigMap.Items)
	case v.Secret != nil:
		files = projectItems(secretData(t, ctx, ns, v.Secret.SecretName), v.Secret.Items)
	case v.Projected != nil:
		for _, src := range v.Projected.Sources {
			switch {
			case src.Secret != nil:
				maps.Copy(files, projectItems(secretData(t, ctx, ns, src.Secret.Name), src.Secret.Items))
			case src.ConfigMap != nil:
				maps.Copy(files, projectItems(configMapData(t, ctx, ns, src.ConfigMap.Name), src.ConfigMap.Items))
			default:
				t.Fatalf("volume %s: only Secret and ConfigMap projections are emulated", v.Name)
			}
		}
	default:
		t.Fatalf("volume %s: only ConfigMap, Secret, projected and image volumes are emulated", v.Name)
	}
	for path, data := range files {
		copyBytes(t, data, filepath.Join(dir, path), 0o440)
	}
}

// folderFiles are the regular files under dir, by slash-separated path.
func folderFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return files
}

func configMapData(t *testing.T, ctx context.Context, ns, name string) map[string][]byte {
	cm := &corev1.ConfigMap{}
	if err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		t.Fatalf("ConfigMap %s: %v", name, err)
	}
	data := map[string][]byte{}
	for k, val := range cm.Data {
		data[k] = []byte(val)
	}
	return data
}

func secretData(t *testing.T, ctx context.Context, ns, name string) map[string][]byte {
	s := &corev1.Secret{}
	if err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatalf("Secret %s: %v", name, err)
	}
	return s.Data
}

// projectItems keeps only the listed keys, at their paths, when items are given.
func projectItems(data map[string][]byte, items []corev1.KeyToPath) map[string][]byte {
	if len(items) == 0 {
		return data
	}
	projected := map[string][]byte{}
	for _, it := range items {
		projected[it.Path] = data[it.Key]
	}
	return projected
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatalf("read %s: %v", from, err)
	}
	copyBytes(t, data, to, mode)
}

func copyBytes(t *testing.T, data []byte, to string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
}
