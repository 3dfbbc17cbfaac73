package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// spec.discovery is checked by the API server itself, each refusal saying what to fix,
// and a bare Search mode gets the documented defaults.
func TestDiscoveryAPIServerValidatesSpec(t *testing.T) {
	ns := newNamespace(t)
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
