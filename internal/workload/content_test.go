package workload

import (
	"bytes"
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
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

// The manager's cache holds ConfigMaps without their data (WithoutConfigMapData), so
// the content shards and the adapter config are compared by the digest it keeps: a
// restarted operator (empty write cache) rewrites none of them; a runtime handed the
// files unread (their bytes not read again) writes nothing and checks its shards are
// as it wrote them; a shard whose data someone changed is written again.
func TestConfigMapsCachedWithoutDataAreComparedByDigest(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cantusv1alpha1.AddToScheme(scheme)
	base := fake.NewClientBuilder().WithScheme(scheme).Build()
	var applied []string
	c := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			_, err := WithoutConfigMapData(obj) // as the manager's cache does
			return err
		},
		// A ConfigMap that does not exist yet is created, not applied (R17).
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				applied = append(applied, cm.Name)
			}
			return c.Create(ctx, obj, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if cm, ok := obj.(*corev1ac.ConfigMapApplyConfiguration); ok {
				applied = append(applied, *cm.GetName())
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	ctx := context.Background()
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "books", UID: "uid-books"}}
	files := map[string][]byte{"aa": []byte("one"), "bb": []byte("two")}
	unread := map[string][]byte{"aa": nil, "bb": nil}

	k := NewKubernetes(c, adapterImage, "cluster.local")
	if n, err := k.applyContent(ctx, ss, files, false); err != nil || n != 1 || len(applied) != 1 {
		t.Fatalf("first apply: %d shards, %v, applied %v", n, err, applied)
	}
	config := corev1ac.ConfigMap("books-adapter", "team-a").WithLabels(Labels(ss)).WithOwnerReferences(ownerOf(ss)).
		WithData(map[string]string{"config.json": "{}"})
	if _, err := k.applyConfigMap(ctx, config); err != nil {
		t.Fatal(err)
	}

	applied = nil
	restarted := NewKubernetes(c, adapterImage, "cluster.local")
	if n, err := restarted.applyContent(ctx, ss, files, false); err != nil || n != 1 {
		t.Fatalf("restarted: %d shards, %v", n, err)
	}
	if _, err := restarted.applyConfigMap(ctx, config); err != nil {
		t.Fatal(err)
	}
	if len(applied) != 0 {
		t.Errorf("a restarted operator rewrote unchanged ConfigMaps: %v", applied)
	}
	if n, err := k.applyContent(ctx, ss, unread, true); err != nil || n != 1 || len(applied) != 0 {
		t.Errorf("unread files, shards as written: %d shards, %v, applied %v", n, err, applied)
	}
	if _, err := NewKubernetes(c, adapterImage, "cluster.local").applyContent(ctx, ss, unread, true); !errors.Is(err, ErrContentNotRead) {
		t.Errorf("unread files on a runtime that did not write them: %v, want ErrContentNotRead", err)
	}

	shard := &corev1.ConfigMap{}
	if err := base.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "books-content-0"}, shard); err != nil {
		t.Fatal(err)
	}
	shard.BinaryData["aa"] = []byte("not one")
	if err := base.Update(ctx, shard); err != nil {
		t.Fatal(err)
	}
	if _, err := k.applyContent(ctx, ss, unread, true); !errors.Is(err, ErrContentNotRead) {
		t.Errorf("unread files, a shard edited: %v, want ErrContentNotRead", err)
	}
	if _, err := k.applyContent(ctx, ss, files, false); err != nil || len(applied) != 1 {
		t.Errorf("an edited shard is not written again: %v, applied %v", err, applied)
	}
}

// DataDigest tells apart ConfigMaps that hold different data, however the bytes are
// split between keys, values and the two maps.
func TestDataDigestTellsConfigMapsApart(t *testing.T) {
	digests := map[string]string{}
	for name, cm := range map[string]corev1.ConfigMap{
		"empty":           {},
		"data a=bc":       {Data: map[string]string{"a": "bc"}},
		"data ab=c":       {Data: map[string]string{"ab": "c"}},
		"binary a=bc":     {BinaryData: map[string][]byte{"a": []byte("bc")}},
		"data a=b, c=":    {Data: map[string]string{"a": "b", "c": ""}},
		"data a=, bc=":    {Data: map[string]string{"a": "", "bc": ""}},
		"data and binary": {Data: map[string]string{"a": "bc"}, BinaryData: map[string][]byte{"a": []byte("bc")}},
	} {
		d := DataDigest(cm.Data, cm.BinaryData)
		if other, ok := digests[d]; ok {
			t.Errorf("%s and %s share the digest %s", name, other, d)
		}
		digests[d] = name
	}
	if DataDigest(nil, nil) != DataDigest(map[string]string{}, map[string][]byte{}) {
		t.Error("nil and empty maps differ")
	}
}

// WithoutConfigMapData keeps the digest of the data it dropped when applied again, as
// client-go does to what a streamed initial list brought; a ConfigMap with data gets the
// digest of its own, whatever annotation it carried.
func TestWithoutConfigMapDataIsIdempotent(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationCachedDataDigest: "sha256:planted"}},
		Data:       map[string]string{"a": "b"}, BinaryData: map[string][]byte{"c": {1}},
	}
	want := DataDigest(cm.Data, cm.BinaryData)
	for range 2 {
		if _, err := WithoutConfigMapData(cm); err != nil {
			t.Fatal(err)
		}
		if cm.Data != nil || cm.BinaryData != nil || cm.Annotations[AnnotationCachedDataDigest] != want {
			t.Fatalf("after the transform: data %v, binaryData %v, digest %q; want no data and %q", cm.Data, cm.BinaryData, cm.Annotations[AnnotationCachedDataDigest], want)
		}
	}
}
