package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// spec.discovery is checked by the API server itself, each refusal saying what to fix,
// and a bare Search mode gets the documented defaults.
func TestDiscoveryAPIServerValidatesSpec(t *testing.T) {
	ns := kubekit.NewNamespace(t, k8sClient)
	const skill = `
  skills:
    - name: search_book
      template: {text: hi}`
	create := func(name, spec string) error {
		obj := &unstructured.Unstructured{}
		manifest := "apiVersion: cantus.dev/v1alpha1\nkind: SkillServer\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nspec:" + spec
		if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
			t.Fatalf("test manifest does not parse: %v", err)
		}
		return k8sClient.Create(context.Background(), obj)
	}
	refused := []struct{ name, spec, want string }{
		{"unknown mode", "\n  discovery: {mode: Some}" + skill, `supported values: "All", "Search"`},
		{"same meta-tool names", "\n  discovery: {mode: Search, findToolName: x, callToolName: x}" + skill, "findToolName and callToolName must differ"},
		{"bad meta-tool name", "\n  discovery: {mode: Search, findToolName: 'find tools'}" + skill, "findToolName may use only A-Z"},
		{"default over max", "\n  discovery: {mode: Search, limit: {default: 30, max: 10}}" + skill, "limit.default must not exceed limit.max"},
		{"limit over 100", "\n  discovery: {mode: Search, limit: {max: 500}}" + skill, "should be less than or equal to 100"},
		{"bad pin", "\n  discovery: {mode: Search, pinned: ['a b']}" + skill, "spec.discovery.pinned[0]"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			err := create("bad", tc.spec)
			if err == nil {
				t.Fatalf("the API server accepted %s", tc.spec)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused, but the message does not say %q:\n%v", tc.want, err)
			}
		})
	}
	if err := create("searching", "\n  discovery: {mode: Search}"+skill); err != nil {
		t.Fatalf("a bare Search mode was refused: %v", err)
	}
	got := &cantusv1alpha1.SkillServer{}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "searching"}, got); err != nil {
		t.Fatal(err)
	}
	d := got.Spec.Discovery
	if d.FindToolName != "find_tools" || d.CallToolName != "call_tool" || d.Limit.Default != 5 || d.Limit.Max != 20 {
		t.Fatalf("defaults not applied: %+v", d)
	}
}

// A server in Search mode is Verified when its pods list the pinned tools and the
// meta-tools, and its status and kubectl get -o wide show the mode and the index size.
func TestDiscoverySearchModeIsVerifiedAndShown(t *testing.T) {
	requireRoot(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	routes := newServiceRoutes()
	startManagerVerifying(t, workload.NewKubernetes(nil, "example.com/cantus:test", "cluster.local"), &MCPVerifier{Dial: routes.Dial, Timeout: 2 * time.Second})

	ss := kubekit.NewSkillServer(ns, "books", kubekit.TemplateSkill("search_book", "found: {{ .title }}"), kubekit.TemplateSkill("checkout_book", "checked out"))
	ss.Spec.Discovery = &cantusv1alpha1.DiscoverySpec{Mode: cantusv1alpha1.DiscoverySearch, Pinned: []string{"search_*"}}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	dep, svc := &appsv1.Deployment{}, &corev1.Service{}
	for _, obj := range []crclient.Object{dep, svc} {
		g.Eventually(func() error { return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "books"}, obj) }).Should(Succeed())
	}
	markDeploymentAvailable(g, ctx, dep)
	routes.route(t, svc, startAsPodBehindService(t, ctx, dep).BaseURL)
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "books"), 45*time.Second).Should(verifiedFor(ss.Generation, metav1.ConditionTrue, cantusv1alpha1.ReasonToolsServed))
	got, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "books")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Status.Discovery).To(Equal(&cantusv1alpha1.DiscoveryStatus{Mode: cantusv1alpha1.DiscoverySearch, IndexedTools: 2}))
	g.Expect(kubekit.FindCondition(got, cantusv1alpha1.ConditionVerified).Message).To(ContainSubstring("with the 3 expected tools"))
}
