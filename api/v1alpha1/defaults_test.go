package v1alpha1

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestCRDDefaultsAreTheGoDefaults holds every +kubebuilder:default marker, as the CRD
// carries it, to the Go constant the *OrDefault methods use: markers cannot name a
// constant, so this is what keeps the two from drifting.
func TestCRDDefaultsAreTheGoDefaults(t *testing.T) {
	cases := []struct {
		crd, path string
		want      any
	}{
		{"skillservers", "spec.transport", string(DefaultTransport)},
		{"skillservers", "spec.port", DefaultPort},
		{"skillservers", "spec.replicas", DefaultReplicas},
		{"skillservers", "spec.stateless", DefaultStateless},
		{"skillservers", "spec.skills[].http.timeout", DefaultHTTPTimeout},
		{"skillservers", "spec.skills[].http.maxResponseBytes", DefaultMaxResponseBytes},
		{"skillservers", "spec.memory.toolName", DefaultMemoryToolName},
		{"skillservers", "spec.memory.size", DefaultMemorySize},
		{"skillservers", "spec.memory.accessMode", string(DefaultMemoryAccessMode)},
		{"skillservers", "spec.memory.maxFileBytes", DefaultMemoryMaxFileBytes},
		{"skillservers", "spec.memory.maxTotalBytes", DefaultMemoryMaxTotalBytes},
		{"skillservers", "spec.memory.trashRetention", DefaultMemoryTrashRetention},
		{"skillservers", "spec.auth.bearerTokenSecretRef.key", DefaultSecretKey},
		{"skillservers", "spec.limits.concurrentCalls", DefaultConcurrentCalls},
		{"skillservers", "spec.limits.queueLength", DefaultQueueLength},
		{"skillservers", "spec.limits.queueWait", DefaultQueueWait},
		{"remotetoolimports", "spec.transport", string(DefaultImportTransport)},
		{"remotetoolimports", "spec.refreshInterval", DefaultRefreshInterval},
		{"remotetoolimports", "spec.timeout", DefaultProbeTimeout},
		{"remotetoolimports", "spec.headers[].valueFrom.key", DefaultSecretKey},
		{"remotetoolimports", "spec.tls.caBundle.configMapRef.key", DefaultCABundleKey},
	}
	schemas := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, tc := range cases {
		t.Run(tc.crd+"/"+tc.path, func(t *testing.T) {
			if schemas[tc.crd] == nil {
				schemas[tc.crd] = crdSchema(t, tc.crd)
			}
			got := defaultAt(t, schemas[tc.crd], tc.path)
			want := fmt.Sprint(tc.want)
			if d, ok := tc.want.(time.Duration); ok {
				parsed, err := time.ParseDuration(got)
				if err != nil || parsed != d {
					t.Errorf("the CRD defaults %s to %q, Go to %s", tc.path, got, d)
				}
				return
			}
			if got != want {
				t.Errorf("the CRD defaults %s to %s, Go to %s", tc.path, got, want)
			}
		})
	}
}

func crdSchema(t *testing.T, plural string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile("../../config/crd/bases/cantus.dev_" + plural + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// defaultAt returns the default of the field at a dotted path ("[]" steps into a list's
// items), as text.
func defaultAt(t *testing.T, schema *apiextensionsv1.JSONSchemaProps, path string) string {
	t.Helper()
	for _, step := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(step, "[]")
		next, ok := schema.Properties[name]
		if !ok {
			t.Fatalf("no field %s in %s", name, path)
		}
		schema = &next
		if list {
			schema = schema.Items.Schema
		}
	}
	if schema.Default == nil {
		t.Fatalf("%s has no default in the CRD", path)
	}
	var s string
	if err := yaml.Unmarshal(schema.Default.Raw, &s); err == nil {
		return s
	}
	return string(schema.Default.Raw)
}
