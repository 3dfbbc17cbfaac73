// Package helm checks the Helm chart (charts/cantus-operator) with the pinned helm
// binary (bin/helm, `make bin/helm`) and real kubectl against a real API server
// (envtest) that starts without the cantus.dev CRDs, so that the chart installs them.
package helm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

var (
	k8sClient  client.Client
	restConfig *rest.Config
	kubeconfig string
	helmBin    string
	chart      string
)

func TestMain(m *testing.M) {
	testenv.ExitUnderShort()
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return 0, err
	}
	helmBin, chart = filepath.Join(root, "bin", "helm"), filepath.Join(root, "charts", "cantus-operator")
	if _, err := os.Stat(helmBin); err != nil {
		return 0, fmt.Errorf("the pinned helm is missing (make bin/helm): %w", err)
	}
	env, cfg, err := testenv.StartWithoutCRDs()
	if err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	scheme := testenv.Scheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return 0, fmt.Errorf("scheme: %w", err)
	}
	restConfig = cfg
	if k8sClient, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return 0, fmt.Errorf("client: %w", err)
	}
	if kubeconfig, err = writeKubeconfig(env); err != nil {
		return 0, err
	}
	defer os.Remove(kubeconfig)
	return m.Run(), nil
}

// writeKubeconfig gives helm and kubectl an admin of the test's API server.
func writeKubeconfig(env *envtest.Environment) (string, error) {
	admin, err := env.ControlPlane.AddUser(envtest.User{Name: "helm-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("add admin: %w", err)
	}
	data, err := admin.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("admin kubeconfig: %w", err)
	}
	f, err := os.CreateTemp("", "helm-test-kubeconfig-*")
	if err != nil {
		return "", fmt.Errorf("kubeconfig file: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return f.Name(), nil
}

// command runs helm or kubectl against the test's API server and returns its output.
func command(t *testing.T, stdin []byte, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// The rendered chart, with its defaults and with its options on, is accepted by the
// API server (kubectl apply --dry-run=server), CRDs included; ServiceMonitor is left
// out because there is no such CRD here.
func TestChartIsAcceptedByTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	_, err := command(t, nil, "kubectl", "create", "namespace", "dry-run")
	g.Expect(err).NotTo(HaveOccurred())
	for name, set := range map[string]string{
		"defaults":   "",
		"options on": "replicas=2,logLevel=debug,verifyServers=false,catalog.tlsSecretName=catalog-tls,metrics.service=true,adapterImage=example.com/adapter:1",
		"no catalog": "catalog.enabled=false",
		"watched":    "watchNamespaces={dry-run},admissionPolicy.extraAdapterImages={example.com/adapter:2}",
		"tracing":    "tracing.enabled=true,tracing.endpoint=http://otel-collector.observability:4317,tracing.protocol=grpc,tracing.sampler=parentbased_traceidratio,tracing.samplerArg=0.25,tracing.resourceAttributes.team=platform,tracing.headersSecret.name=otel,tracing.headersSecret.key=headers",
	} {
		args := []string{"template", "cantus-operator", chart, "-n", "dry-run"}
		if set != "" {
			args = append(args, "--set", set)
		}
		manifests, err := command(t, nil, helmBin, args...)
		g.Expect(err).NotTo(HaveOccurred(), name+": "+manifests)
		out, err := command(t, []byte(manifests), "kubectl", "apply", "--dry-run=server", "--server-side", "--force-conflicts", "-f", "-")
		g.Expect(err).NotTo(HaveOccurred(), name+": "+out)
		g.Expect(out).To(ContainSubstring("customresourcedefinition.apiextensions.k8s.io/skillservers.cantus.dev serverside-applied (server dry run)"), name)
		g.Expect(out).To(ContainSubstring("deployment.apps/cantus-operator serverside-applied (server dry run)"), name)
		g.Expect(out).To(ContainSubstring("validatingadmissionpolicy.admissionregistration.k8s.io/cantus-operator-restricted-workloads serverside-applied (server dry run)"), name)
		g.Expect(out).To(ContainSubstring("validatingadmissionpolicybinding.admissionregistration.k8s.io/cantus-operator-admission-params serverside-applied (server dry run)"), name)
		if name == "watched" {
			g.Expect(out).To(ContainSubstring("role.rbac.authorization.k8s.io/cantus-operator serverside-applied (server dry run)"), name)
			g.Expect(out).To(ContainSubstring("clusterrole.rbac.authorization.k8s.io/cantus-operator-cluster-scoped serverside-applied (server dry run)"), name)
			g.Expect(out).NotTo(ContainSubstring("clusterrole.rbac.authorization.k8s.io/cantus-operator serverside-applied"), name)
			g.Expect(manifests).To(ContainSubstring("--watch-namespaces=dry-run"), name)
			g.Expect(manifests).To(ContainSubstring(`adapterImages: "ghcr.io/cantus-dev/cantus-operator:`), name)
			g.Expect(manifests).To(ContainSubstring(`,example.com/adapter:2"`), name)
		}
	}
}

// Values the schema or the chart refuses stop helm before anything is applied; the
// ServiceMonitor renders only when asked for.
func TestChartRefusesBadValues(t *testing.T) {
	g := NewWithT(t)
	wrongType := filepath.Join(t.TempDir(), "wrong-type.yaml")
	g.Expect(os.WriteFile(wrongType, []byte("replicas: two\ncatalog:\n  enabled: \"yes\"\n"), 0o600)).To(Succeed())
	out, err := command(t, nil, helmBin, "template", "x", chart, "-f", wrongType)
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("schema"))
	g.Expect(out).To(ContainSubstring("replicas"))

	for set, says := range map[string]string{
		"logLevel=chatty":                            "logLevel",
		"serviceMonitor.interval=often":              "interval",
		"unknownValue=1":                             "unknownValue",
		"replicas=2,leaderElection=false":            "needs leaderElection",
		"image.digest=sha256:abc":                    "digest",
		"catalog.service.port=70000":                 "port",
		"resources.requests.memory=lots of it":       "memory",
		"watchNamespaces={Team_A}":                   "watchNamespaces",
		"admissionPolicy.extraAdapterImages={a,b c}": "extraAdapterImages",
		"admissionPolicy.serviceAccounts={runner}":   "serviceAccounts",
		"admissionPolicy.bridgeImages={a b}":         "bridgeImages",
		"tracing.enabled=true":                       "tracing.enabled needs tracing.endpoint",
		"tracing.protocol=http/json":                 "/tracing/protocol",
		"tracing.endpoint=collector:4317":            "/tracing/endpoint",
		"tracing.samplerArg=2":                       "/tracing/samplerArg",
		"tracing.sampler=sometimes":                  "/tracing/sampler",
	} {
		out, err := command(t, nil, helmBin, "template", "x", chart, "--set", set)
		g.Expect(err).To(HaveOccurred(), set)
		g.Expect(out).To(ContainSubstring(says), set)
	}

	out, err = command(t, nil, helmBin, "template", "x", chart)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).NotTo(ContainSubstring("kind: ServiceMonitor"))
	out, err = command(t, nil, helmBin, "template", "x", chart, "--set", "serviceMonitor.enabled=true")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("kind: ServiceMonitor"))
}

// helm install creates the CRDs and the manager; helm upgrade to a changed value changes
// the manager's pod template (a rollout) and updates the CRDs, and rewrites no
// SkillServer; helm uninstall removes the manager and keeps the CRDs and every
// SkillServer.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "cantus-system"
	out, err := command(t, nil, helmBin, "install", "cantus-operator", chart, "-n", ns, "--create-namespace")
	g.Expect(err).NotTo(HaveOccurred(), out)

	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "skillservers.cantus.dev"}, crd)).To(Succeed())
		g.Expect(established(crd)).To(BeTrue())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(crd.Annotations).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))

	before := managerDeployment(t)
	g.Expect(before.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--zap-log-level=info"))
	g.Expect(before.Spec.Template.Labels).To(HaveKeyWithValue("app.kubernetes.io/name", "cantus-operator"),
		"the SkillServers' NetworkPolicies let the operator in by this label")

	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "library"},
		Spec:       cantusv1alpha1.SkillServerSpec{Skills: []cantusv1alpha1.Skill{{Name: "echo", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}}}},
	}
	g.Eventually(func() error { return k8sClient.Create(ctx, ss) }).WithTimeout(30 * time.Second).Should(Succeed())

	// An upgrade that also changes a CRD: the chart's CRD is edited in a copy.
	changed := copyChart(t)
	crdFile := filepath.Join(changed, "files", "crds", "cantus.dev_skillservers.yaml")
	data, err := os.ReadFile(crdFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(crdFile, []byte(strings.Replace(string(data), "shortNames:\n", "shortNames:\n    - skillsrv\n", 1)), 0o600)).To(Succeed())
	out, err = command(t, nil, helmBin, "upgrade", "cantus-operator", changed, "-n", ns, "--set", "logLevel=debug")
	g.Expect(err).NotTo(HaveOccurred(), out)

	after := managerDeployment(t)
	g.Expect(after.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--zap-log-level=debug"))
	g.Expect(after.Generation).To(BeNumerically(">", before.Generation), "a new pod template: the manager rolls")
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "skillservers.cantus.dev"}, crd)).To(Succeed())
	g.Expect(crd.Spec.Names.ShortNames).To(ContainElement("skillsrv"), "helm upgrade updates the CRDs")
	kept := &cantusv1alpha1.SkillServer{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ss), kept)).To(Succeed())
	g.Expect(kept.ResourceVersion).To(Equal(ss.ResourceVersion), "no SkillServer is rewritten by an upgrade")

	out, err = command(t, nil, helmBin, "uninstall", "cantus-operator", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(after), &appsv1.Deployment{}))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "skillservers.cantus.dev"}, crd)).To(Succeed())
	g.Expect(crd.DeletionTimestamp).To(BeNil(), "helm uninstall keeps the CRDs")
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ss), kept)).To(Succeed())
	g.Expect(kept.DeletionTimestamp).To(BeNil(), "and every SkillServer")

	// Installed again, the release takes the kept CRDs back.
	out, err = command(t, nil, helmBin, "install", "cantus-operator", chart, "-n", ns)
	g.Expect(err).NotTo(HaveOccurred(), out)
}

func managerDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: "cantus-system", Name: "cantus-operator"}, d); err != nil {
		t.Fatal(err)
	}
	return d
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// copyChart copies the chart to a temporary folder that a test may change.
func copyChart(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "cantus-operator")
	if err := os.CopyFS(dst, os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	return dst
}
