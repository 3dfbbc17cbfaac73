package render

import (
	"os"
	"strconv"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestCRDMemoryDefaultsMatchTheStore pins the memory defaults the API server fills in
// (the +kubebuilder:default markers, which cannot name Go constants) to the memory
// store's constants that render and the adapter use, so that the two cannot drift.
func TestCRDMemoryDefaultsMatchTheStore(t *testing.T) {
	data, err := os.ReadFile("../../config/crd/bases/cantus.dev_skillservers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	memory := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["memory"].Properties
	defaultOf := func(field string) string {
		d := memory[field].Default
		if d == nil {
			t.Fatalf("spec.memory.%s has no default in the CRD", field)
		}
		var s string
		if err := yaml.Unmarshal(d.Raw, &s); err == nil {
			return s
		}
		return string(d.Raw)
	}
	if got := defaultOf("toolName"); got != DefaultMemoryToolName {
		t.Errorf("toolName default %q, the store's %q", got, DefaultMemoryToolName)
	}
	if got := defaultOf("maxFileBytes"); got != strconv.FormatInt(DefaultMemoryMaxFileBytes, 10) {
		t.Errorf("maxFileBytes default %s, the store's %d", got, DefaultMemoryMaxFileBytes)
	}
	if got := defaultOf("maxTotalBytes"); got != strconv.FormatInt(DefaultMemoryMaxTotalBytes, 10) {
		t.Errorf("maxTotalBytes default %s, the store's %d", got, DefaultMemoryMaxTotalBytes)
	}
	retention, err := time.ParseDuration(defaultOf("trashRetention"))
	if err != nil || retention != DefaultMemoryTrashRetention {
		t.Errorf("trashRetention default %s (%v), the store's %s", defaultOf("trashRetention"), err, DefaultMemoryTrashRetention)
	}
}
