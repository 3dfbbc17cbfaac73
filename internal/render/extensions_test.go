package render

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The backend a gateway calls an import with names the Tasks extension when the
// import's status found the remote announcing it and serving protocol 2026-07-28;
// not for a remote of 2025-11-25 only, nor for other extensions.
func TestRemoteBackend_CarriesTheTasksExtensionOfAModernRemote(t *testing.T) {
	imp := &cantusv1alpha1.RemoteToolImport{ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: "team"}}
	imp.Spec.URL, imp.Spec.Transport = "http://up.team:8080/mcp", cantusv1alpha1.ImportTransportStreamableHTTP
	imp.Status.Eras = []string{adapterconfig.EraModern}
	imp.Status.ServerInfo = &cantusv1alpha1.RemoteServerInfo{Extensions: []string{"io.modelcontextprotocol/skills", adapterconfig.ExtensionTasks}}
	if b, _ := remoteBackend(imp); !slices.Equal(b.Extensions, []string{adapterconfig.ExtensionTasks}) {
		t.Errorf("extensions %v, want the Tasks extension only", b.Extensions)
	}
	imp.Status.Eras = []string{adapterconfig.EraLegacy}
	if b, _ := remoteBackend(imp); b.Extensions != nil {
		t.Errorf("a 2025-11-25 remote got %v, want none", b.Extensions)
	}
	imp.Status.Eras = []string{adapterconfig.EraModern}
	imp.Status.ServerInfo.Extensions = []string{"io.modelcontextprotocol/skills"}
	if b, _ := remoteBackend(imp); b.Extensions != nil {
		t.Errorf("a remote without tasks got %v, want none", b.Extensions)
	}
}
