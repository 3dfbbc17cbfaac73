package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/listing"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// definitionsConfig is a rendered config with a tool, an imported tool served as its
// remote defined it, a prompt and an Agent Skill.
func definitionsConfig() *adapterconfig.Config {
	readOnly := true
	return &adapterconfig.Config{
		Server: adapterconfig.ServerInfo{Name: "library", Version: "1"},
		Tools: []adapterconfig.Tool{
			{Name: "search", Description: "Search the library.", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
				Annotations: &adapterconfig.ToolAnnotations{ReadOnlyHint: &readOnly}, Template: &adapterconfig.TemplateBackend{Text: "found"}},
			{Name: "w_forecast", Description: "Forecast", InputSchema: json.RawMessage(`{"type":"object"}`), Remote: &adapterconfig.RemoteBackend{
				Import: "weather", URL: "http://weather/mcp", RemoteName: "forecast",
				Definition: json.RawMessage(`{"name":"forecast","description":"Forecast","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"celsius":{"type":"number"}}}}`),
			}},
		},
		Prompts: []adapterconfig.Prompt{{Name: "greet", Description: "Say hello", Arguments: []adapterconfig.PromptArgument{{Name: "who", Required: true}}}},
		AgentSkills: []adapterconfig.AgentSkill{{
			Path: "acme/refunds", Frontmatter: json.RawMessage(`{"name":"refunds","description":"Refund policy"}`),
			Files: []adapterconfig.SkillFile{
				{Path: "SKILL.md", Digest: "sha256:" + strings.Repeat("a", 64), Size: 70},
				{Path: "templates/email.md", Digest: "sha256:" + strings.Repeat("b", 64), Size: 12},
			},
		}},
	}
}

// definitionsOf renders cfg's definitions, failing the test on an error.
func definitionsOf(t *testing.T, cfg *adapterconfig.Config) renderedDefinitions {
	t.Helper()
	defs, err := renderedDefinitionsOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return defs
}

// allDifferences compares every kind of what pods serving served list with rendered.
func allDifferences(rendered, served renderedDefinitions) []string {
	return append(append(
		definitionDifferences(definition.ToolKind, rendered.tools, served.tools),
		definitionDifferences(definition.PromptKind, rendered.prompts, served.prompts)...),
		definitionDifferences(definition.SkillKind, rendered.skills, served.skills)...)
}

// TestDefinitionDifferences: pods that serve an older config whose items keep their
// names are found out, with the item and the member that differ named; the same
// definitions, and missing or unexpected items (the names check's), say nothing.
func TestDefinitionDifferences(t *testing.T) {
	rendered := definitionsOf(t, definitionsConfig())
	for _, tc := range []struct {
		name  string
		older func(*adapterconfig.Config)
		want  []string
	}{
		{"identical", func(*adapterconfig.Config) {}, nil},
		{"items only one side has", func(c *adapterconfig.Config) {
			c.Tools = c.Tools[:1]
			c.Prompts = append(c.Prompts, adapterconfig.Prompt{Name: "bye"})
		}, nil},
		{"a description", func(c *adapterconfig.Config) { c.Tools[0].Description = "Search." },
			[]string{`tool "search": description differs`}},
		{"an input schema", func(c *adapterconfig.Config) {
			c.Tools[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","maxLength":64}}}`)
		}, []string{`tool "search": inputSchema differs`}},
		{"annotations", func(c *adapterconfig.Config) { c.Tools[0].Annotations = nil },
			[]string{`tool "search": annotations differs`}},
		{"a title and a description", func(c *adapterconfig.Config) {
			c.Tools[0].Description = "Search."
			c.Tools[0].Annotations = &adapterconfig.ToolAnnotations{Title: "Search", ReadOnlyHint: c.Tools[0].Annotations.ReadOnlyHint}
		}, []string{`tool "search": description, annotations differ`}},
		{"an imported tool's output schema", func(c *adapterconfig.Config) {
			remote := *c.Tools[1].Remote
			remote.Definition = json.RawMessage(`{"name":"forecast","description":"Forecast","inputSchema":{"type":"object"}}`)
			c.Tools[1].Remote = &remote
		}, []string{`tool "w_forecast": outputSchema differs`}},
		{"a prompt's arguments", func(c *adapterconfig.Config) { c.Prompts[0].Arguments[0].Required = false },
			[]string{`prompt "greet": arguments differs`}},
		{"a skill's file", func(c *adapterconfig.Config) {
			c.AgentSkills[0].Files[1].Digest = "sha256:" + strings.Repeat("c", 64)
		}, []string{`skill "skill://acme/refunds/SKILL.md": resources (skill://acme/refunds/templates/email.md) differs`}},
		{"a skill's frontmatter", func(c *adapterconfig.Config) {
			c.AgentSkills[0].Frontmatter = json.RawMessage(`{"name":"refunds","description":"Refunds"}`)
		}, []string{`skill "skill://acme/refunds/SKILL.md": frontmatter differs`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			older := definitionsConfig()
			tc.older(older)
			got := allDifferences(rendered, definitionsOf(t, older))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("differences\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestDefinitionsMismatchMessageIsBounded: many differing items are not all named.
func TestDefinitionsMismatchMessageIsBounded(t *testing.T) {
	var differences []string
	for range 200 {
		differences = append(differences, `tool "`+strings.Repeat("x", 128)+`": description differs`)
	}
	msg := definitionsMismatchMessage(differences)
	if len(msg) > 1500 || !strings.Contains(msg, "and 195 more") {
		t.Errorf("message of %d bytes: %s", len(msg), msg)
	}
	if definitionsMismatchMessage(nil) != "" {
		t.Error("no difference gave a message")
	}
}

// servingLister lists the tools of a config as pods serving it do.
type servingLister struct{ cfg *adapterconfig.Config }

func (l servingLister) ListTools(context.Context, VerifyTarget) ([]mcpclient.Tool, error) {
	listed, err := listing.Tools(l.cfg)
	if err != nil {
		return nil, err
	}
	var tools []mcpclient.Tool
	for name, entry := range listed {
		tools = append(tools, mcpclient.Tool{Name: name, Raw: entry})
	}
	return tools, nil
}

// TestVerifyComparesDefinitionsNotNames: pods that list the rendered tools by name but
// with an older description are not Verified; the message names the tool and the
// member. Pods serving the rendered config are.
func TestVerifyComparesDefinitionsNotNames(t *testing.T) {
	rendered := definitionsConfig()
	older := definitionsConfig()
	older.Tools[0].Description = "Search."
	ss := &cantusv1alpha1.SkillServer{Status: cantusv1alpha1.SkillServerStatus{Tools: []cantusv1alpha1.ServedTool{{Name: "search"}, {Name: "w_forecast"}}}}
	obs := workload.Observation{Available: true, ProbeURL: "http://10.0.0.1:8765/mcp"}

	r := &SkillServerReconciler{Verifier: servingLister{older}}
	r.verify(context.Background(), ss, obs, rendered)
	c := kubekit.FindCondition(ss, cantusv1alpha1.ConditionVerified)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != cantusv1alpha1.ReasonDefinitionsMismatch ||
		!strings.Contains(c.Message, `tool "search": description differs`) {
		t.Fatalf("pods serving an older description: Verified %+v", c)
	}

	r.Verifier = servingLister{rendered}
	r.verify(context.Background(), ss, obs, rendered)
	if c := kubekit.FindCondition(ss, cantusv1alpha1.ConditionVerified); c.Status != metav1.ConditionTrue || c.Reason != cantusv1alpha1.ReasonToolsServed {
		t.Fatalf("pods serving the rendered config: Verified %+v", c)
	}
}
