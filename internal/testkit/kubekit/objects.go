package kubekit

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// The objects the controller's tests and the integration tests start from. Each is
// built in memory; the test creates it.

// BookSchema is the input schema of the test remotes' tools: one required title, with
// the title and examples keys that strict clients refuse.
const BookSchema = `{"type":"object","title":"SearchArgs","properties":{"title":{"type":"string","examples":["Dune"]}},"required":["title"]}`

// FormsSkillMD is the SKILL.md of the Agent Skill pdf-forms that ContentSkillServer serves.
const FormsSkillMD = "---\nname: pdf-forms\ndescription: Fill PDF forms.\nenabled: yes\n---\n# PDF forms\nRead references/FORMS.md first.\n"

// TemplateSkill is a tool that renders text over one required argument, title.
func TemplateSkill(name, text string) cantusv1alpha1.Skill {
	return cantusv1alpha1.Skill{
		Name:        name,
		Description: "test skill " + name,
		InputSchema: &cantusv1alpha1.ToolInputSchema{Type: "object", Raw: []byte(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)},
		Template:    &cantusv1alpha1.TemplateBackend{Text: text},
	}
}

// NewSkillServer is a SkillServer ns/name serving skills, with every other field
// defaulted.
func NewSkillServer(ns, name string, skills ...cantusv1alpha1.Skill) *cantusv1alpha1.SkillServer {
	return &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       cantusv1alpha1.SkillServerSpec{Skills: skills},
	}
}

// ContentSkillServer serves the skill pdf-forms from the ConfigMap "pdf" (FormsSkillMD
// and references/FORMS.md), one prompt and one inline resource.
func ContentSkillServer(ns, name string) *cantusv1alpha1.SkillServer {
	text := "# Team guide"
	ss := NewSkillServer(ns, name)
	ss.Spec.AgentSkills = []cantusv1alpha1.AgentSkill{{Name: "pdf-forms", Path: "acme", ConfigMap: &cantusv1alpha1.SkillConfigMapSource{
		Name: "pdf", Items: []cantusv1alpha1.SkillFileItem{{Key: "SKILL.md", Path: "SKILL.md"}, {Key: "references.FORMS.md", Path: "references/FORMS.md"}},
	}}}
	ss.Spec.Prompts = []cantusv1alpha1.ServedPrompt{{Name: "greet", Messages: []cantusv1alpha1.PromptMessage{{Role: "user", Content: cantusv1alpha1.PromptContent{Type: "text", Text: "hello"}}}}}
	ss.Spec.Resources = []cantusv1alpha1.ServedResource{{URI: "docs://guide", Name: "guide", Text: &text}}
	return ss
}

// OIDCGateway is a SkillServer that authenticates callers with OIDC tokens (of an issuer
// nobody reaches) and re-exports the named imports.
func OIDCGateway(ns, name string, imports ...string) *cantusv1alpha1.SkillServer {
	gw := NewSkillServer(ns, name)
	gw.Spec.Auth = &cantusv1alpha1.AuthSpec{OIDC: &cantusv1alpha1.OIDCAuth{IssuerURL: "https://login.example.com", Audiences: []string{"gateway"}}}
	for _, i := range imports {
		gw.Spec.Imports = append(gw.Spec.Imports, cantusv1alpha1.SkillImport{Name: i})
	}
	return gw
}

// NewImport is a RemoteToolImport ns/name of the streamable HTTP server at url, with a
// two-second timeout so that a test of a failing remote does not wait long.
func NewImport(ns, name, url string) *cantusv1alpha1.RemoteToolImport {
	return &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStreamableHTTP,
			URL:       url,
			Timeout:   cantusv1alpha1.DurationFrom(2 * time.Second),
		},
	}
}

// SkillConfigMap is a ConfigMap ns/name holding data, labelled as skill content when
// labelled is set.
func SkillConfigMap(ns, name string, data map[string]string, labelled bool) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if labelled {
		cm.Labels = map[string]string{cantusv1alpha1.ContentLabel: "true"}
	}
	return cm
}

// CallerSecret is a per-caller Secret ns/name: caller's credential value for the import
// importName, under the key "token".
func CallerSecret(ns, name, importName, caller, value string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels:      map[string]string{cantusv1alpha1.LabelCallerCredentialsFor: importName},
			Annotations: map[string]string{cantusv1alpha1.AnnotationCaller: caller}},
		Data: map[string][]byte{"token": []byte(value)},
	}
}

// AllowStdio creates a ToolSourcePolicy that lets namespace ns run stdio imports of the
// given image prefixes and commands, and deletes it when the test ends.
func AllowStdio(t testing.TB, c client.Client, ns string, images, commands []string) {
	t.Helper()
	p := &cantusv1alpha1.ToolSourcePolicy{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "stdio-"},
		Spec: cantusv1alpha1.ToolSourcePolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Images:            images,
			Commands:          commands,
		},
	}
	if err := c.Create(context.Background(), p); err != nil {
		t.Fatalf("create policy: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
}
