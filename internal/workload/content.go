package workload

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
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

// applyContent writes the shards, before the config that names their files.
func (k *Kubernetes) applyContent(ctx context.Context, ss *cantusv1alpha1.SkillServer, shards []map[string][]byte) error {
	for i, shard := range shards {
		cm := corev1ac.ConfigMap(ContentConfigMapName(ss, i), ss.Namespace).
			WithLabels(Labels(ss)).
			WithOwnerReferences(ownerOf(ss)).
			WithBinaryData(shard)
		if err := k.apply(ctx, &corev1.ConfigMap{}, cm); err != nil {
			return fmt.Errorf("apply content ConfigMap %s: %w", ContentConfigMapName(ss, i), err)
		}
	}
	return nil
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
