package render

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The backend a gateway calls an import with carries the eras the import's status
// recorded, newest first and only those the adapter knows; an import over sse or stdio
// carries none (2025-11-25 only).
func TestRemoteBackend_CarriesTheErasOfTheImportsStatus(t *testing.T) {
	imp := &cantusv1alpha1.RemoteToolImport{ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: "team"}}
	imp.Spec.URL, imp.Spec.Transport = "http://up.team:8080/mcp", cantusv1alpha1.ImportTransportStreamableHTTP
	imp.Status.Eras = []string{"2025-11-25", "2099-01-01", "2026-07-28"}
	b, _ := remoteBackend(imp)
	if !slices.Equal(b.Eras, []string{adapterconfig.EraModern, adapterconfig.EraLegacy}) {
		t.Errorf("eras %v, want 2026-07-28 and 2025-11-25", b.Eras)
	}
	imp.Status.Eras = nil
	if b, _ := remoteBackend(imp); b.Eras != nil {
		t.Errorf("an import without recorded eras got %v, want none", b.Eras)
	}
	imp.Status.Eras = []string{"2026-07-28"}
	imp.Spec.Transport = cantusv1alpha1.ImportTransportSSE
	if b, _ := remoteBackend(imp); b.Eras != nil {
		t.Errorf("an sse import got %v, want none", b.Eras)
	}
}
