package workload

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// TestContentShards: files are packed in digest order into shards of at most
// contentShardBytes, a larger file alone, and every file lands in exactly one shard.
func TestContentShards(t *testing.T) {
	files := map[string][]byte{
		"a": bytes.Repeat([]byte{1}, 500<<10),
		"b": bytes.Repeat([]byte{2}, 500<<10),
		"c": bytes.Repeat([]byte{3}, 100<<10),
		"d": bytes.Repeat([]byte{4}, 1000<<10),
		"e": []byte("small"),
	}
	shards := contentShards(files)
	want := [][]string{{"a"}, {"b", "c"}, {"d"}, {"e"}}
	if len(shards) != len(want) {
		t.Fatalf("%d shards, want %d", len(shards), len(want))
	}
	for i, keys := range want {
		if len(shards[i]) != len(keys) {
			t.Errorf("shard %d holds %d files, want %v", i, len(shards[i]), keys)
		}
		for _, k := range keys {
			if !bytes.Equal(shards[i][k], files[k]) {
				t.Errorf("shard %d lacks %s", i, k)
			}
		}
	}
	if contentShards(nil) != nil {
		t.Error("no files should make no shard")
	}
}

// TestLocalContentFolder: the local runtime writes each file under its digest, points
// the config at the folder, and removes what a later config no longer names.
func TestLocalContentFolder(t *testing.T) {
	l := &Local{MemoryDir: t.TempDir()}
	key := types.NamespacedName{Namespace: "team", Name: "docs"}
	cfg := &adapterconfig.Config{}
	if err := l.writeLocalContent(key, cfg, map[string][]byte{"aa": []byte("one"), "bb": []byte("two")}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(cfg.ContentDir, "aa")); err != nil || string(data) != "one" {
		t.Fatalf("read aa: %q %v", data, err)
	}
	if err := l.writeLocalContent(key, cfg, map[string][]byte{"bb": []byte("two")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.ContentDir, "aa")); !os.IsNotExist(err) {
		t.Errorf("aa is still there: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(cfg.ContentDir, "bb")); err != nil || string(data) != "two" {
		t.Errorf("read bb: %q %v", data, err)
	}
}
