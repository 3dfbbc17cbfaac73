package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// TestSampleConfigHashesArePinned holds the config hashes of the samples, defaulted as
// the API server defaults them, to fixed values. A change of Hash rewrites every
// adapter's config and a change of RolloutHash rolls every pod, on every cluster, at the
// operator's upgrade: a new config field must be `omitempty` (absent when unset) so that
// these stay. Change a value here only for a change meant to roll every server, and say
// so in the release notes.
func TestSampleConfigHashesArePinned(t *testing.T) {
	pinned := map[string]struct{ hash, rollout string }{
		"cantus_v1alpha1_skillserver.yaml":        {hash: "4f4b6b2f846a8430", rollout: "4f4b6b2f846a8430"},
		"cantus_v1alpha1_skillserver_memory.yaml": {hash: "efba1931307b1df4", rollout: "dc0a044f8e214bd6"},
	}
	schema := skillServerSchema(t)
	for file, want := range pinned {
		t.Run(file, func(t *testing.T) {
			ss := defaultedSample(t, filepath.Join("../../config/samples", file), schema)
			got, err := SkillServer(ss, Inputs{})
			if err != nil || got.Report.Invalid != nil {
				t.Fatalf("render: %v, %v", err, got.Report.Invalid)
			}
			if got.Hash != want.hash || got.RolloutHash != want.rollout {
				t.Errorf("hash %s, rollout hash %s; pinned %s and %s: this upgrade would roll every server", got.Hash, got.RolloutHash, want.hash, want.rollout)
			}
		})
	}
}

// skillServerSchema is the CRD's structural schema, which the API server defaults with.
func skillServerSchema(t *testing.T) *structuralschema.Structural {
	t.Helper()
	data, err := os.ReadFile("../../config/crd/bases/cantus.dev_skillservers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// defaultedSample reads one sample and defaults it as the API server would store it.
func defaultedSample(t *testing.T, path string, schema *structuralschema.Structural) *cantusv1alpha1.SkillServer {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	defaulting.Default(obj, schema)
	ss := &cantusv1alpha1.SkillServer{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, ss); err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(ss.Kind, "SkillServer") {
		t.Fatalf("%s holds a %s", path, ss.Kind)
	}
	return ss
}
