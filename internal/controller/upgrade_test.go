package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

var crdKind = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// Objects stored under an older CRD that lacked today's validations must not stop the
// operator: a value that no longer parses reports InvalidSpec on that object, and every
// other object, in its namespace and in others, is still reconciled.
func TestObjectsStoredBeforeValidationDoNotStopTheOperator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	badNS, goodNS := kubekit.NewNamespace(t, k8sClient), kubekit.NewNamespace(t, k8sClient)

	withOlderCRDs(t, "remotetoolimports.cantus.dev", "skillservers.cantus.dev")
	createUnvalidated(t, importYAML("url: http://127.0.0.1:1/mcp\n  refreshInterval: banana"), badNS)
	createUnvalidated(t, strings.ReplaceAll(skillServerYAML("bad-memory", `memory: {trashRetention: forever, size: "1e-99999999999"}`), "NAMESPACE", badNS), badNS)
	restoreCRDs(t)

	// The upgraded API server now refuses what it stored before.
	_, err := createManifest(ctx, importYAML("url: http://127.0.0.1:1/mcp\n  refreshInterval: banana"), goodNS)
	g.Expect(err).To(MatchError(ContainSubstring(`must be a duration such as "30s"`)))

	kubekit.AllowLoopback(t, k8sClient, goodNS)
	srv := testkit.NewCountingServer(t, adapterHandler(t, "", "search_book"))
	startImportManager(t, 0)
	startManager(t, workload.NewKubernetes(nil, "example.com/cantus:test", "cluster.local"))

	good := kubekit.NewImport(goodNS, "good", srv.URL+"/mcp")
	g.Expect(k8sClient.Create(ctx, good)).To(Succeed())
	ss := kubekit.NewSkillServer(goodNS, "library", kubekit.TemplateSkill("search_book", "found {{ .title }}"))
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	g.Eventually(func() *cantusv1alpha1.RemoteToolImport {
		got := &cantusv1alpha1.RemoteToolImport{}
		_ = k8sClient.Get(ctx, crclient.ObjectKeyFromObject(good), got)
		return got
	}, 30*time.Second).Should(HaveField("Status.ToolCount", int32(1)))
	g.Eventually(func() error {
		return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: goodNS, Name: "library"}, &appsv1.Deployment{})
	}, 30*time.Second).Should(Succeed())

	g.Eventually(func() *metav1.Condition {
		got := &cantusv1alpha1.RemoteToolImport{}
		_ = k8sClient.Get(ctx, crclient.ObjectKey{Namespace: badNS, Name: "bad"}, got)
		return apimeta.FindStatusCondition(got.Status.Conditions, cantusv1alpha1.ConditionStalled)
	}, 30*time.Second).Should(And(
		HaveField("Reason", cantusv1alpha1.ReasonInvalidSpec),
		HaveField("Message", ContainSubstring(`spec.refreshInterval: "banana" is not a duration`)),
	))
	g.Eventually(func() *metav1.Condition {
		got, _ := kubekit.GetSkillServer(ctx, k8sClient, badNS, "bad-memory")()
		return kubekit.FindCondition(got, cantusv1alpha1.ConditionStalled)
	}, 30*time.Second).Should(And(
		HaveField("Reason", cantusv1alpha1.ReasonInvalidSpec),
		HaveField("Message", ContainSubstring(`spec.memory.trashRetention: "forever" is not a duration`)),
		HaveField("Message", ContainSubstring(`spec.memory.size: "1e-99999999999" is not a size`)),
	))
	// Nothing was built for the bad server.
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: badNS, Name: "bad-memory"}, &appsv1.Deployment{})).NotTo(Succeed())
}

// The API server refuses durations and sizes that can never work, naming the fix.
func TestAPIServerRefusesBadDurationsAndSizes(t *testing.T) {
	ns := kubekit.NewNamespace(t, k8sClient)
	cases := []struct{ name, manifest, want string }{
		{"refresh not a duration", importYAML("url: http://x.example.com/mcp\n  refreshInterval: banana"), `must be a duration such as "30s"`},
		{"refresh too short", importYAML("url: http://x.example.com/mcp\n  refreshInterval: 1ms"), "refreshInterval must be between 10s and 24h"},
		{"negative timeout", importYAML("url: http://x.example.com/mcp\n  timeout: -5s"), "must be a duration"},
		{"timeout too long", importYAML("url: http://x.example.com/mcp\n  timeout: 1h"), "timeout must be between 1s and 5m"},
		{"trash kept forever", skillServerYAML("s1", "memory: {trashRetention: forever}"), "must be a duration"},
		{"trash kept a second", skillServerYAML("s2", "memory: {trashRetention: 1s}"), "trashRetention must be between 1m and 8760h"},
		{"size with an extreme exponent", skillServerYAML("s3", `memory: {size: "1e-99999999999"}`), "must be a positive size"},
		{"size zero", skillServerYAML("s4", `memory: {size: "0Gi"}`), "must be a positive size"},
		{"http timeout of an hour", skillServerYAML("s5", ""), "timeout must be between 1ms and 10m"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			manifest := tc.manifest
			if tc.name == "http timeout of an hour" {
				manifest = strings.Replace(manifest, `template: {text: "ok"}`, `http: {url: "http://b.example.com/x", timeout: 1h}`, 1)
			}
			obj, err := createManifest(context.Background(), manifest, ns)
			if err == nil {
				_ = k8sClient.Delete(context.Background(), obj)
				t.Fatalf("the API server accepted:\n%s", manifest)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused, but the message does not say %q:\n%v", tc.want, err)
			}
		})
	}
}

func skillServerYAML(name, extra string) string {
	spec := "apiVersion: cantus.dev/v1alpha1\nkind: SkillServer\nmetadata:\n  name: " + name + "\n  namespace: NAMESPACE\nspec:\n" +
		"  skills:\n  - name: t\n    template: {text: \"ok\"}\n"
	if extra != "" {
		spec += "  " + extra + "\n"
	}
	return spec
}

func createManifest(ctx context.Context, manifest, ns string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(manifest, "NAMESPACE", ns)), &obj.Object); err != nil {
		return nil, err
	}
	return obj, k8sClient.Create(ctx, obj)
}

// createUnvalidated stores a manifest the current CRDs would refuse; the older CRDs take
// a moment to be served, so it retries.
func createUnvalidated(t *testing.T, manifest, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		_, err := createManifest(context.Background(), manifest, ns)
		return err
	}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
}

var savedCRDs []*unstructured.Unstructured

// withOlderCRDs replaces the named CRDs with copies that lack every CEL rule and length
// limit, as an older release of the operator would have installed.
func withOlderCRDs(t *testing.T, names ...string) {
	t.Helper()
	ctx := context.Background()
	savedCRDs = nil
	for _, name := range names {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(crdKind)
		if err := k8sClient.Get(ctx, crclient.ObjectKey{Name: name}, crd); err != nil {
			t.Fatalf("get CRD %s: %v", name, err)
		}
		savedCRDs = append(savedCRDs, crd.DeepCopy())
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			stripValidations(v)
		}
		_ = unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
		if err := k8sClient.Update(ctx, crd); err != nil {
			t.Fatalf("install older CRD %s: %v", name, err)
		}
	}
	t.Cleanup(func() { restoreCRDs(t) })
}

// restoreCRDs puts back the CRDs withOlderCRDs replaced: the upgrade.
func restoreCRDs(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, saved := range savedCRDs {
		current := &unstructured.Unstructured{}
		current.SetGroupVersionKind(crdKind)
		if err := k8sClient.Get(ctx, crclient.ObjectKeyFromObject(saved), current); err != nil {
			t.Fatalf("get CRD %s: %v", saved.GetName(), err)
		}
		current.Object["spec"] = saved.Object["spec"]
		if err := k8sClient.Update(ctx, current); err != nil {
			t.Fatalf("restore CRD %s: %v", saved.GetName(), err)
		}
	}
	savedCRDs = nil
	// Wait until the restored validation is served.
	probe := importYAML("url: http://x.example.com/mcp\n  refreshInterval: banana")
	ns := kubekit.NewNamespace(t, k8sClient)
	NewWithT(t).Eventually(func() error {
		obj, err := createManifest(ctx, probe, ns)
		if err == nil {
			_ = k8sClient.Delete(ctx, obj)
		}
		return err
	}, 20*time.Second, 200*time.Millisecond).Should(HaveOccurred())
}

func stripValidations(node any) {
	switch n := node.(type) {
	case map[string]any:
		delete(n, "x-kubernetes-validations")
		delete(n, "maxLength")
		for _, v := range n {
			stripValidations(v)
		}
	case []any:
		for _, v := range n {
			stripValidations(v)
		}
	}
}
