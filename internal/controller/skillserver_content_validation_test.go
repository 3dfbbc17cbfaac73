package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
)

// createSkillServerSpec creates a SkillServer from the YAML of its spec.
func createSkillServerSpec(ctx context.Context, ns, name, spec string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	manifest := "apiVersion: cantus.dev/v1alpha1\nkind: SkillServer\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nspec:" + spec
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		return nil, err
	}
	return obj, k8sClient.Create(ctx, obj)
}

// TestAPIServerRefusesBadContent: agent skills, resources, resource templates, prompts
// and the authorization rules' new kinds are checked by the API server with messages
// that say what to fix.
func TestAPIServerRefusesBadContent(t *testing.T) {
	ns := kubekit.NewNamespace(t, k8sClient)
	cases := []struct {
		name, spec, want string
	}{
		{"skill without a source", `
  agentSkills: [{name: pdf-forms}]`, "an agent skill needs exactly one source: set either configMap or image"},
		{"skill with two sources", `
  agentSkills: [{name: pdf-forms, configMap: {name: pdf}, image: {reference: "r.example/pdf:1"}}]`, "an agent skill needs exactly one source"},
		{"skill name in capitals", `
  agentSkills: [{name: PDF, configMap: {name: pdf}}]`, "an agent skill name is lowercase letters, digits and single hyphens"},
		{"skill name with a double hyphen", `
  agentSkills: [{name: pdf--forms, configMap: {name: pdf}}]`, "an agent skill name is lowercase letters"},
		{"skill name longer than 64", `
  agentSkills: [{name: ` + strings.Repeat("a", 65) + `, configMap: {name: pdf}}]`, "may not be more than 64"},
		{"skill path with ..", `
  agentSkills: [{name: pdf, path: "acme/../x", configMap: {name: pdf}}]`, "spec.agentSkills[0].path in body should match"},
		{"skill path with a leading /", `
  agentSkills: [{name: pdf, path: "/acme", configMap: {name: pdf}}]`, "spec.agentSkills[0].path in body should match"},
		{"item path that climbs out", `
  agentSkills: [{name: pdf, configMap: {name: pdf, items: [{key: a, path: "../a"}]}}]`, "spec.agentSkills[0].configMap.items[0].path in body should match"},
		{"item path that is absolute", `
  agentSkills: [{name: pdf, configMap: {name: pdf, items: [{key: a, path: "/etc/a"}]}}]`, "spec.agentSkills[0].configMap.items[0].path in body should match"},
		{"image path that climbs out", `
  agentSkills: [{name: pdf, image: {reference: "r.example/pdf:1", path: "skills/../../etc"}}]`, "spec.agentSkills[0].image.path in body should match"},
		{"image path that is absolute", `
  agentSkills: [{name: pdf, image: {reference: "r.example/pdf:1", path: "/etc"}}]`, "spec.agentSkills[0].image.path in body should match"},
		{"item key with a /", `
  agentSkills: [{name: pdf, configMap: {name: pdf, items: [{key: "a/b", path: "a/b"}]}}]`, "items[0].key in body should match"},
		{"resource without content", `
  resources: [{uri: "docs://a", name: a}]`, "a resource needs exactly one content: set either text or configMapKeyRef"},
		{"resource with a relative URI", `
  resources: [{uri: "guide", name: a, text: hi}]`, "spec.resources[0].uri in body should match"},
		{"resource at a skill URI", `
  resources: [{uri: "skill://a/SKILL.md", name: a, text: hi}]`, "skill:// URIs are the files of agentSkills"},
		{"duplicate resource URIs", `
  resources: [{uri: "docs://a", name: a, text: hi}, {uri: "docs://a", name: b, text: ho}]`, "Duplicate value"},
		{"resource priority above 1", `
  resources: [{uri: "docs://a", name: a, text: hi, annotations: {priority: "1.5"}}]`, "annotations.priority in body should match"},
		{"resource audience nobody knows", `
  resources: [{uri: "docs://a", name: a, text: hi, annotations: {audience: [robot]}}]`, `Unsupported value: "robot"`},
		{"resource template without a backend", `
  resourceTemplates: [{uriTemplate: "docs://{page}", name: page}]`, "a resource template needs exactly one backend"},
		{"prompt without messages or http", `
  prompts: [{name: greet}]`, "a prompt needs exactly one of messages and http"},
		{"prompt message of a role nobody knows", `
  prompts: [{name: greet, messages: [{role: system, content: {type: text, text: hi}}]}]`, `Unsupported value: "system"`},
		{"image content without data", `
  prompts: [{name: greet, messages: [{role: user, content: {type: image, mimeType: image/png}}]}]`, "an image or audio content needs data (base64) and mimeType"},
		{"text content without text", `
  prompts: [{name: greet, messages: [{role: user, content: {type: text}}]}]`, "a text content needs text"},
		{"embedded resource with text and blob", `
  prompts: [{name: greet, messages: [{role: user, content: {type: resource, resource: {uri: "docs://a", text: a, blob: YQ==}}}]}]`, "an embedded resource needs exactly one of text and blob"},
		{"rule that allows nothing", `
  auth: {serviceAccountTokens: {}}
  authorization: {rules: [{groups: [readers]}]}
  prompts: [{name: greet, messages: [{role: user, content: {type: text, text: hi}}]}]`, "an authorization rule must allow something: set tools, prompts, resources or skills"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := createSkillServerSpec(context.Background(), ns, "bad", tc.spec)
			if err == nil {
				_ = k8sClient.Delete(context.Background(), obj)
				t.Fatalf("the API server accepted:%s", tc.spec)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused, but the message does not say %q:\n%v", tc.want, err)
			}
		})
	}
}

// TestAPIServerAcceptsContentOnlyServers: a server may serve only skills, only prompts,
// only resources, or any mix, and rules may name only the new kinds.
func TestAPIServerAcceptsContentOnlyServers(t *testing.T) {
	ns := kubekit.NewNamespace(t, k8sClient)
	for name, spec := range map[string]string{
		"skills-only": `
  agentSkills: [{name: pdf-forms, path: acme/billing, configMap: {name: pdf, items: [{key: SKILL.md, path: SKILL.md}, {key: references.FORMS.md, path: references/FORMS.md}]}}]`,
		"image-skill": `
  agentSkills: [{name: pdf-forms, image: {reference: "registry.example.com/skills/pdf:1", pullPolicy: IfNotPresent, path: skills/pdf-forms}}]`,
		"resources-only": `
  resources: [{uri: "docs://team/guide", name: guide, mimeType: text/markdown, text: "# Guide", annotations: {audience: [user, assistant], priority: "0.8"}},
              {uri: "docs://team/logo", name: logo, configMapKeyRef: {name: logo, key: logo.png}}]
  resourceTemplates: [{uriTemplate: "docs://{team}/{page}", name: page, template: {text: "{{ .page }}"}}]`,
		"prompts-only": `
  auth: {serviceAccountTokens: {}}
  authorization: {rules: [{prompts: ["*"]}, {resources: ["docs://*"], skills: ["acme/*"], groups: [readers]}]}
  prompts: [{name: greet, arguments: [{name: who, required: true}], messages: [
    {role: user, content: {type: text, text: "hello {{ .who }}"}},
    {role: assistant, content: {type: image, data: iVBORw0KGgo=, mimeType: image/png}},
    {role: user, content: {type: resource, resource: {uri: "docs://{{ .who }}", mimeType: text/plain, text: "about {{ .who }}"}}}]}]`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := createSkillServerSpec(context.Background(), ns, name, spec); err != nil {
				t.Fatalf("refused a valid spec: %v\n%s", err, spec)
			}
		})
	}
}
