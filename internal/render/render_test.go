package render

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

func schema(raw string) *cantusv1alpha1.ToolInputSchema {
	s := &cantusv1alpha1.ToolInputSchema{}
	if err := json.Unmarshal([]byte(raw), s); err != nil {
		panic(err)
	}
	return s
}

func TestAdapterConfigRendersDefaultsAndBackends(t *testing.T) {
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "library", Namespace: "default"},
		Spec: cantusv1alpha1.SkillServerSpec{
			Skills: []cantusv1alpha1.Skill{
				{Name: "a", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}},
				{Name: "b", InputSchema: schema(`{"type":"object","title":"B"}`), HTTP: &cantusv1alpha1.HTTPBackend{
					URL: "http://b.svc/x", Timeout: cantusv1alpha1.DurationFrom(3 * time.Second), MaxResponseBytes: ptr.To(int64(10)),
				}},
			},
		},
	}
	got := adapterConfig(ss)
	want := &adapterconfig.Config{
		Server:    adapterconfig.ServerInfo{Name: "library", Version: "0.0.0"},
		Transport: "streamable-http",
		Port:      8765,
		Stateless: true,
		Tools: []adapterconfig.Tool{
			{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`), Template: &adapterconfig.TemplateBackend{Text: "x"}},
			{Name: "b", InputSchema: json.RawMessage(`{"type":"object","title":"B"}`), HTTP: &adapterconfig.HTTPBackend{
				URL: "http://b.svc/x", Timeout: adapterconfig.Duration{Duration: 3 * time.Second}, MaxResponseBytes: 10,
			}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(want)
		t.Fatalf("rendered\n%s\nwant\n%s", gotJSON, wantJSON)
	}
}

func TestHashChangesWithTheConfig(t *testing.T) {
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: cantusv1alpha1.SkillServerSpec{
		Skills: []cantusv1alpha1.Skill{{Name: "a", Template: &cantusv1alpha1.TemplateBackend{Text: "x"}}},
	}}
	h1, _ := hashOf(adapterConfig(ss))
	h2, _ := hashOf(adapterConfig(ss))
	ss.Spec.Skills[0].Template.Text = "y"
	h3, _ := hashOf(adapterConfig(ss))
	if h1 != h2 || h1 == h3 {
		t.Fatalf("hash must be stable and follow the config: %s %s %s", h1, h2, h3)
	}
}

func TestNonPortableKeys(t *testing.T) {
	cases := []struct {
		name   string
		schema string
		want   []string
	}{
		{"portable", `{"type":"object","properties":{"title":{"type":"string"}}}`, nil},
		{"property named title is not the keyword", `{"type":"object","properties":{"title":{"type":"string"}},"additionalProperties":true}`, nil},
		{"pydantic model", `{"type":"object","title":"Args","additionalProperties":false,"properties":{"q":{"type":"string","title":"Q","examples":["x"]}}}`,
			[]string{`skill "s": /title`, `skill "s": /additionalProperties=false`, `skill "s": /properties/q/title`, `skill "s": /properties/q/examples`}},
		{"nested in $defs and anyOf", `{"type":"object","$defs":{"Book":{"type":"object","title":"Book"}},"properties":{"x":{"anyOf":[{"type":"string","examples":["a"]}]}}}`,
			[]string{`skill "s": /properties/x/anyOf/0/examples`, `skill "s": /$defs/Book/title`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := nonPortableKeys([]cantusv1alpha1.Skill{{Name: "s", InputSchema: schema(tc.schema)}})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
