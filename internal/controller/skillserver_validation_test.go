package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
)

// Every manifest here must be refused by the API server itself (OpenAPI schema and CEL
// rules in the CRD), with a message that says what to fix.
func TestAPIServerRefusesBadSkillServers(t *testing.T) {
	ns := kubekit.NewNamespace(t, k8sClient)
	validSkill := `
    - name: search_book
      template: {text: "found: {{ .title }}"}`
	cases := []struct {
		name string
		spec string
		want string
	}{
		{"tool name with a space", `
  skills:
    - name: search book
      template: {text: hi}`, "tool names may use only A-Z, a-z, 0-9, '_', '-' and '.'"},
		{"tool name longer than 128", `
  skills:
    - name: ` + strings.Repeat("a", 129) + `
      template: {text: hi}`, "may not be more than 128"},
		{"duplicate tool names", `
  skills:` + validSkill + validSkill, "Duplicate value"},
		{"skill without a backend", `
  skills:
    - name: search_book`, "a skill needs exactly one backend: set either template or http"},
		{"skill with two backends", `
  skills:
    - name: search_book
      template: {text: hi}
      http: {url: "http://books.default.svc/search"}`, "a skill needs exactly one backend"},
		{"http backend with a file URL", `
  skills:
    - name: search_book
      http: {url: "file:///etc/passwd"}`, "url must be an absolute http:// or https:// URL"},
		{"http backend with a relative URL", `
  skills:
    - name: search_book
      http: {url: "/search"}`, "url must be an absolute http:// or https:// URL"},
		{"http backend with credentials in the URL", `
  skills:
    - name: search_book
      http: {url: "https://user:secret@books.example.com/search"}`, "url must not carry credentials"},
		{"http backend without a host", `
  skills:
    - name: search_book
      http: {url: "http://:8080/search"}`, "url must name a host"},
		{"port 0", `
  port: 0
  skills:` + validSkill, "spec.port: Invalid value: 0: spec.port in body should be greater than or equal to 1"},
		{"port above 65535", `
  port: 70000
  skills:` + validSkill, "should be less than or equal to 65535"},
		{"negative replicas", `
  replicas: -1
  skills:` + validSkill, "spec.replicas in body should be greater than or equal to 0"},
		{"inputSchema whose type is not object", `
  skills:
    - name: search_book
      inputSchema: {type: string}
      template: {text: hi}`, `spec.skills[0].inputSchema.type: Unsupported value: "string": supported values: "object"`},
		{"inputSchema without type", `
  skills:
    - name: search_book
      inputSchema: {properties: {title: {type: string}}}
      template: {text: hi}`, "spec.skills[0].inputSchema.type: Required value"},
		{"auth without any kind", `
  auth: {}
  skills:` + validSkill, "auth needs at least one of bearerTokenSecretRef, serviceAccountTokens or oidc"},
		{"authorization without auth", `
  authorization: {rules: [{tools: ["*"]}]}
  skills:` + validSkill, "authorization needs auth"},
		{"oidc issuer over plain http", `
  auth: {oidc: {issuerURL: "http://login.example.com", audiences: [cantus]}}
  skills:` + validSkill, "spec.auth.oidc.issuerURL in body should match"},
		{"oidc without audiences", `
  auth: {oidc: {issuerURL: "https://login.example.com", audiences: []}}
  skills:` + validSkill, "spec.auth.oidc.audiences in body should have at least 1 items"},
		{"oidc groupsPrefix s, which spells system: with a group", `
  auth: {oidc: {issuerURL: "https://login.example.com", audiences: [cantus], groupsPrefix: "s"}}
  skills:` + validSkill, "groupsPrefix must not begin with system:, nor begin it"},
		{"oidc groupsPrefix sys, which spells system: with a group", `
  auth: {oidc: {issuerURL: "https://login.example.com", audiences: [cantus], groupsPrefix: "sys"}}
  skills:` + validSkill, "groupsPrefix must not begin with system:, nor begin it"},
		{"oidc groupsPrefix system, which spells system: with a group", `
  auth: {oidc: {issuerURL: "https://login.example.com", audiences: [cantus], groupsPrefix: "system"}}
  skills:` + validSkill, "groupsPrefix must not begin with system:, nor begin it"},
		{"oidc groupsPrefix system-colon, which spells system: with a group", `
  auth: {oidc: {issuerURL: "https://login.example.com", audiences: [cantus], groupsPrefix: "system:"}}
  skills:` + validSkill, "groupsPrefix must not begin with system:, nor begin it"},
		{"oidc groupsPrefix system:x, which spells system: with a group", `
  auth: {oidc: {issuerURL: "https://login.example.com", audiences: [cantus], groupsPrefix: "system:x"}}
  skills:` + validSkill, "groupsPrefix must not begin with system:, nor begin it"},
		{"service account without a namespace", `
  auth: {serviceAccountTokens: {}}
  authorization: {rules: [{tools: ["*"], serviceAccounts: [librarian]}]}
  skills:` + validSkill, "spec.authorization.rules[0].serviceAccounts[0] in body should match"},
		{"rule without tools", `
  auth: {serviceAccountTokens: {}}
  authorization: {rules: [{tools: [], groups: [readers]}]}
  skills:` + validSkill, "spec.authorization.rules[0].tools in body should have at least 1 items"},
		{"unknown transport", `
  transport: websocket
  skills:` + validSkill, `spec.transport: Unsupported value: "websocket"`},
		{"stateful server with several replicas", `
  stateless: false
  replicas: 3
  skills:` + validSkill, "set stateless: true or replicas: 1"},
		{"sse server with several replicas", `
  transport: sse
  replicas: 2
  skills:` + validSkill, "an sse server keeps each session's stream in one pod"},
		{"server that serves nothing", `
  port: 8080`, "a SkillServer must serve something: add skills, memory, imports, agentSkills, resources, resourceTemplates or prompts"},
		{"empty allowFrom peer", `
  allowFrom: [{}]
  skills:` + validSkill, "each allowFrom peer needs a podSelector, a namespaceSelector or an ipBlock"},
		{"allowFrom ipBlock with a podSelector", `
  allowFrom: [{ipBlock: {cidr: 10.0.0.0/8}, podSelector: {}}]
  skills:` + validSkill, "may not also set podSelector or namespaceSelector"},
		{"too many allowFrom peers", `
  allowFrom: [` + strings.Repeat("{podSelector: {}},", 16) + `{podSelector: {}}]
  skills:` + validSkill, "must have at most 16 items"},
		{"empty template", `
  skills:
    - name: search_book
      template: {text: ""}`, "spec.skills[0].template.text in body should be at least 1 chars long"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			manifest := "apiVersion: cantus.dev/v1alpha1\nkind: SkillServer\nmetadata:\n  name: bad\n  namespace: " + ns + "\nspec:" + tc.spec
			if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
				t.Fatalf("test manifest does not parse: %v", err)
			}
			err := k8sClient.Create(context.Background(), obj)
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
