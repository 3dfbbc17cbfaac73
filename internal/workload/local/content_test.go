package local

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// TestLocalContentFolder: the local runtime writes each file under its digest, points
// the config at the folder, and removes what a later config no longer names.
func TestLocalContentFolder(t *testing.T) {
	l := &Runtime{MemoryDir: t.TempDir()}
	key := types.NamespacedName{Namespace: "team", Name: "docs"}
	cfg := &adapterconfig.Config{}
	if err := l.writeLocalContent(key, cfg, map[string][]byte{"aa": []byte("one"), "bb": []byte("two")}, false); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(cfg.ContentDir, "aa")); err != nil || string(data) != "one" {
		t.Fatalf("read aa: %q %v", data, err)
	}
	if err := l.writeLocalContent(key, cfg, map[string][]byte{"bb": []byte("two")}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.ContentDir, "aa")); !os.IsNotExist(err) {
		t.Errorf("aa is still there: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(cfg.ContentDir, "bb")); err != nil || string(data) != "two" {
		t.Errorf("read bb: %q %v", data, err)
	}
}
