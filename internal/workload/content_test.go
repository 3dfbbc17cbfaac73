package workload

import (
	"bytes"
	"testing"
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
