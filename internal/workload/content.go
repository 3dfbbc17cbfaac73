package workload

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// Content files reach the adapter pods through ConfigMaps the operator owns: one
// source ConfigMap holds at most 1 MiB, so a skill is at most about 1 MiB; a server's
// files are packed into shards of at most contentShardBytes, each key the hex digest of
// its bytes and every value in binaryData so that the bytes are exact. The shards are
// mutable and updated in place: the kubelet refreshes the projected volume (atomically,
// all shards at once) and the adapter reloads, so an edit reaches running pods without
// a restart. Only validated content is ever written to them, so a tenant breaking its
// own ConfigMap cannot take content from running or restarting pods.
const contentShardBytes = 900 << 10

// ContentConfigMapName is the name of a SkillServer's i-th content shard.
func ContentConfigMapName(ss *cantusv1alpha1.SkillServer, i int) string {
	return fmt.Sprintf("%s-content-%d", ss.Name, i)
}

// contentShards packs the files, in digest order so that the packing is stable, into
// shards of at most contentShardBytes (a larger file gets a shard of its own).
func contentShards(files map[string][]byte) []map[string][]byte {
	var shards []map[string][]byte
	var size int
	for _, digest := range slices.Sorted(maps.Keys(files)) {
		data := files[digest]
		if len(shards) == 0 || size+len(data) > contentShardBytes {
			shards = append(shards, map[string][]byte{})
			size = 0
		}
		shards[len(shards)-1][digest] = data
		size += len(data)
	}
	return shards
}

// applyContent writes the shards of files, before the config that names their files, and
// returns how many there are. With unread (the controller did not read the content's
// bytes, since no ConfigMap it renders changed) nothing is written: the shards this
// runtime last wrote for the same files must still hold them, else it is
// ErrContentNotRead and the caller reads the bytes.
func (k *Kubernetes) applyContent(ctx context.Context, ss *cantusv1alpha1.SkillServer, files map[string][]byte, unread bool) (int, error) {
	if unread {
		return k.contentStillWritten(ctx, ss, files)
	}
	shards := contentShards(files)
	written := make([]writtenShard, len(shards))
	for i, shard := range shards {
		written[i].digest = DataDigest(nil, shard)
		rv, err := k.applyConfigMap(ctx, contentShard(ss, i, shard))
		if err != nil {
			return 0, fmt.Errorf("apply content ConfigMap %s: %w", ContentConfigMapName(ss, i), err)
		}
		written[i].resourceVersion = rv
	}
	k.shards.remember(ss, files, written)
	return len(shards), nil
}

func contentShard(ss *cantusv1alpha1.SkillServer, i int, shard map[string][]byte) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(ContentConfigMapName(ss, i), ss.Namespace).
		WithLabels(Labels(ss)).
		WithOwnerReferences(ownerOf(ss)).
		WithBinaryData(shard)
}

// contentStillWritten checks that the shards written last for these files are there as
// written, and returns how many there are: by the cache's metadata and digest, or,
// where the cache has not caught up with the write yet, by the resourceVersion the
// write left on the API server.
func (k *Kubernetes) contentStillWritten(ctx context.Context, ss *cantusv1alpha1.SkillServer, files map[string][]byte) (int, error) {
	written, ok := k.shards.recall(ss, files)
	if !ok {
		return 0, ErrContentNotRead
	}
	for i, shard := range written {
		desired := contentShard(ss, i, nil)
		holds, rv, err := k.cachedConfigMapHolds(ctx, desired, shard.digest)
		if err != nil {
			return 0, err
		}
		if holds {
			continue
		}
		if rv == shard.resourceVersion {
			return 0, ErrContentNotRead
		}
		if unchanged, err := k.unchangedSince(ctx, desired, shard.resourceVersion); err != nil || !unchanged {
			return 0, errors.Join(err, ErrContentNotRead)
		}
	}
	return len(written), nil
}

// unchangedSince says whether the ConfigMap desired names is on the API server at
// resourceVersion, by its metadata.
func (k *Kubernetes) unchangedSince(ctx context.Context, desired *corev1ac.ConfigMapApplyConfiguration, resourceVersion string) (bool, error) {
	if k.APIReader == nil || resourceVersion == "" {
		return false, nil
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	err := k.APIReader.Get(ctx, types.NamespacedName{Namespace: *desired.GetNamespace(), Name: *desired.GetName()}, meta)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get the metadata of ConfigMap %s: %w", *desired.GetName(), err)
	}
	return meta.ResourceVersion == resourceVersion, nil
}

// ErrContentNotRead says that a runtime needs the bytes of content the caller passed
// unread: it does not hold them as they were last written.
var ErrContentNotRead = errors.New("the runtime needs the content's bytes: what it wrote last is gone or was changed")

// applyConfigMap applies a ConfigMap the operator owns unless the cache says it already
// holds it, and returns the resourceVersion of the ConfigMap that does (empty when
// unknown). The cache holds ConfigMaps without their data (the manager's cache
// transform, WithoutConfigMapData), only a digest of it, so the generic comparison of
// apply (which needs the data) would find every one different after a restart; here the
// metadata is compared as apply does and the data by digest.
func (k *Kubernetes) applyConfigMap(ctx context.Context, desired *corev1ac.ConfigMapApplyConfiguration) (string, error) {
	holds, rv, err := k.cachedConfigMapHolds(ctx, desired, DataDigest(desired.Data, desired.BinaryData))
	if err != nil || holds {
		return rv, err
	}
	if err := k.apply(ctx, &corev1.ConfigMap{}, desired); err != nil {
		return "", err
	}
	return resourceVersionOf(desired), nil
}

// cachedConfigMapHolds says whether the ConfigMap desired names is in the cache with the
// metadata desired sets (labels, owner: someone else's never holds it) and data of
// that digest, and returns the resourceVersion the cache has (empty when none).
// desired's own data is not looked at.
func (k *Kubernetes) cachedConfigMapHolds(ctx context.Context, desired *corev1ac.ConfigMapApplyConfiguration, digest string) (bool, string, error) {
	live := &corev1.ConfigMap{}
	err := k.Client.Get(ctx, types.NamespacedName{Namespace: *desired.GetNamespace(), Name: *desired.GetName()}, live)
	if apierrors.IsNotFound(err) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("get ConfigMap %s: %w", *desired.GetName(), err)
	}
	if liveDataDigest(live) != digest {
		return false, live.ResourceVersion, nil
	}
	metadataOnly := *desired
	metadataOnly.Data, metadataOnly.BinaryData = nil, nil
	request, err := json.Marshal(&metadataOnly)
	if err != nil {
		return false, "", fmt.Errorf("encode apply request for ConfigMap %s: %w", *desired.GetName(), err)
	}
	live.Data, live.BinaryData = nil, nil
	return holdsRequest(live, request), live.ResourceVersion, nil
}

// AnnotationCachedDataDigest is where the manager's cache keeps the digest of the data
// it dropped from a ConfigMap (WithoutConfigMapData). It exists only in the cache: the
// operator never writes it, and the one a ConfigMap on the API server may carry is
// replaced as it enters the cache.
const AnnotationCachedDataDigest = "cantus.dev/cached-data-digest"

// WithoutConfigMapData is a cache transform: a ConfigMap enters the cache without its
// data and binaryData, which a tenant can make as large as etcd allows for every
// ConfigMap the cache selects, and with the digest of what it dropped
// (AnnotationCachedDataDigest). Other objects pass unchanged.
//
// It is idempotent, as client-go wants of a transform: the informer applies it once
// more to what the streamed initial list already transformed. So a ConfigMap without
// data that carries the annotation keeps it. One on the API server could carry one too,
// written by whoever may write it; it says nothing about data that is not there, and at
// worst keeps the operator from rewriting that ConfigMap for a tenant who emptied it in
// its own namespace.
func WithoutConfigMapData(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	if _, transformed := cm.Annotations[AnnotationCachedDataDigest]; transformed && cm.Data == nil && cm.BinaryData == nil {
		return cm, nil
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[AnnotationCachedDataDigest] = DataDigest(cm.Data, cm.BinaryData)
	cm.Data, cm.BinaryData = nil, nil
	return cm, nil
}

// liveDataDigest is the digest of a ConfigMap's data: computed when it holds its data
// (a client without the cache), else the one the cache recorded.
func liveDataDigest(cm *corev1.ConfigMap) string {
	if cm.Data == nil && cm.BinaryData == nil {
		if digest, ok := cm.Annotations[AnnotationCachedDataDigest]; ok {
			return digest
		}
	}
	return DataDigest(cm.Data, cm.BinaryData)
}

// DataDigest is the sha256 of a ConfigMap's data and binaryData: every key and value in
// key order, each length-prefixed and tagged with the map it is in, so that no two
// different ConfigMaps share one. A nil map and an empty one are the same.
func DataDigest(data map[string]string, binaryData map[string][]byte) string {
	h := sha256.New()
	field := func(tag byte, key string, value []byte) {
		var n [8]byte
		h.Write([]byte{tag})
		binary.BigEndian.PutUint64(n[:], uint64(len(key)))
		h.Write(n[:])
		h.Write([]byte(key))
		binary.BigEndian.PutUint64(n[:], uint64(len(value)))
		h.Write(n[:])
		h.Write(value)
	}
	for _, key := range slices.Sorted(maps.Keys(data)) {
		field('d', key, []byte(data[key]))
	}
	for _, key := range slices.Sorted(maps.Keys(binaryData)) {
		field('b', key, binaryData[key])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// shardPlans remember, per SkillServer, which files the runtime last wrote to its shards
// and the digest of each shard: what lets a reconcile whose content did not change skip
// reading the content's bytes. One entry per SkillServer, a few hundred bytes.
type shardPlans struct {
	mu    sync.Mutex
	plans map[types.NamespacedName]shardPlan
}

type shardPlan struct {
	server  types.UID
	files   string
	written []writtenShard
}

// writtenShard is a shard as this runtime wrote it (or found it holding what it would
// write).
type writtenShard struct {
	digest, resourceVersion string
}

func newShardPlans() *shardPlans { return &shardPlans{plans: map[types.NamespacedName]shardPlan{}} }

func (p *shardPlans) remember(ss *cantusv1alpha1.SkillServer, files map[string][]byte, written []writtenShard) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans[types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name}] = shardPlan{server: ss.UID, files: fileSet(files), written: written}
}

func (p *shardPlans) recall(ss *cantusv1alpha1.SkillServer, files map[string][]byte) ([]writtenShard, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	plan, ok := p.plans[types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name}]
	if !ok || plan.server != ss.UID || plan.files != fileSet(files) {
		return nil, false
	}
	return plan.written, true
}

func (p *shardPlans) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.plans, key)
}

// fileSet names a set of content files by one digest: their keys are the digests of
// their bytes.
func fileSet(files map[string][]byte) string {
	h := sha256.New()
	for _, key := range slices.Sorted(maps.Keys(files)) {
		h.Write([]byte(key))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// deleteContentShardsFrom deletes the shards numbered from n on that this server owns.
// The pods' projections are optional, so a pod still running the old template is not
// broken by a shard that went away.
func (k *Kubernetes) deleteContentShardsFrom(ctx context.Context, ss *cantusv1alpha1.SkillServer, n int) error {
	for i := n; ; i++ {
		deleted, err := k.deleteIfControlled(ctx, "ConfigMap", &corev1.ConfigMap{}, ContentConfigMapName(ss, i), ss, "that no content needs any more")
		if err != nil || !deleted {
			return err
		}
	}
}

// ServesImageVolumes says that the kubernetes runtime mounts images as volumes (agent
// skills from images).
func (k *Kubernetes) ServesImageVolumes() bool { return true }

// withContentVolumes mounts the content shards (one projected volume at the config's
// ContentDir) and the image skills into the adapter pods.
func withContentVolumes(dep *appsv1ac.DeploymentApplyConfiguration, ss *cantusv1alpha1.SkillServer, shards int, images []render.ImageSkill) {
	pod := dep.Spec.Template.Spec
	container := &pod.Containers[0]
	if shards > 0 {
		projected := corev1ac.ProjectedVolumeSource().WithDefaultMode(0o444)
		for i := range shards {
			projected.WithSources(corev1ac.VolumeProjection().WithConfigMap(
				corev1ac.ConfigMapProjection().WithName(ContentConfigMapName(ss, i)).WithOptional(true)))
		}
		pod.WithVolumes(corev1ac.Volume().WithName("content").WithProjected(projected))
		container.WithVolumeMounts(corev1ac.VolumeMount().WithName("content").WithMountPath(render.ContentMountPath).WithReadOnly(true))
	}
	for _, img := range images {
		source := corev1ac.ImageVolumeSource().WithReference(img.Source.Reference)
		if img.Source.PullPolicy != "" {
			source.WithPullPolicy(img.Source.PullPolicy)
		}
		pod.WithVolumes(corev1ac.Volume().WithName(img.Volume).WithImage(source))
		container.WithVolumeMounts(corev1ac.VolumeMount().WithName(img.Volume).WithMountPath(img.MountPath).WithReadOnly(true))
	}
}
