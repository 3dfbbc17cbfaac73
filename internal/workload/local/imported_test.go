package local

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// An imported resource's remote reads its header files on this host, as an imported
// tool's does: the path in the rendered config is where a pod would have them.
func TestLocalImportedContentReadsItsHeaderFilesOnThisHost(t *testing.T) {
	l := &Runtime{MemoryDir: t.TempDir()}
	const podPath = "/var/run/cantus/imports/everything/bridge-authorization"
	remote := adapterconfig.RemoteBackend{Import: "ns/everything", URL: "http://127.0.0.1:1/mcp", HeaderFiles: map[string]string{"Authorization": podPath}}
	cfg := &adapterconfig.Config{
		Tools:    []adapterconfig.Tool{{Name: "echo", Remote: &remote}},
		Imported: &adapterconfig.ImportedContent{Resources: []adapterconfig.ImportedItem{{Key: "demo://a", Remote: remote}}},
	}
	got, err := l.localConfig(types.NamespacedName{Namespace: "ns", Name: "gw"}, cfg, map[string][]byte{podPath: []byte("Bearer t")}, false)
	if err != nil {
		t.Fatal(err)
	}
	for what, r := range map[string]adapterconfig.RemoteBackend{"tool": *got.Tools[0].Remote, "resource": got.Imported.Resources[0].Remote} {
		path := r.HeaderFiles["Authorization"]
		if data, err := os.ReadFile(path); err != nil || string(data) != "Bearer t" {
			t.Errorf("the %s's header file %q: %q, %v", what, path, data, err)
		}
	}
	if cfg.Imported.Resources[0].Remote.HeaderFiles["Authorization"] != podPath {
		t.Error("the rendered config was changed in place")
	}
}
