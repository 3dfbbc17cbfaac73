// Package workload runs what the operator runs: the adapter of each SkillServer and the
// stdio bridge of each stdio RemoteToolImport. Two runtimes share one seam each:
// kubernetes (children owned by the SkillServer or import and applied server-side, with
// one set of labels, pod security settings, owner references and write cache) and local
// (adapters served in the manager process on 127.0.0.1, bridges as its child processes).
// The local adapters live in the subpackage local, which links the adapter itself, so that
// this package and the controllers stay free of the data plane.
package workload

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// Desired is what a runtime is asked to run for one SkillServer.
type Desired struct {
	SkillServer *cantusv1alpha1.SkillServer
	Config      *adapterconfig.Config
	// ConfigHash identifies the whole config; RolloutHash only what the adapter cannot
	// reload in place (pods roll when it changes).
	ConfigHash  string
	RolloutHash string
	// Files are the header values and CA bundles of re-exported imports.
	Files []render.File
	// Content are the files the config names by digest (key: the 64 hex digits).
	Content map[string][]byte
	// ContentUnread says that Content holds the digests only, not the bytes: the caller
	// did not read them since nothing they come from changed. A runtime that does not
	// hold them as it last wrote them returns ErrContentNotRead.
	ContentUnread bool
	// ImageSkills are agent skills mounted from images (kubernetes runtime only).
	ImageSkills []render.ImageSkill
}

// Observation is what a runtime found after applying: enough for the status.
type Observation struct {
	URL string
	// ProbeURL is where the operator reaches the pods to verify that they answer MCP: the
	// Service's cluster IP (which needs no cluster DNS), or the local listener. Empty
	// while there is no address yet.
	ProbeURL      string
	Selector      string
	Replicas      int32
	ReadyReplicas int32
	Available     bool
	// Reason and Message explain Available in the condition vocabulary.
	Reason  string
	Message string
}

// Runtime runs adapters.
type Runtime interface {
	// Apply makes the workload match desired and reports what it observes.
	Apply(ctx context.Context, desired Desired) (Observation, error)
	// Forget releases what Apply started for a SkillServer that no longer exists.
	// Owned objects of the kubernetes runtime are left to the garbage collector.
	Forget(ctx context.Context, key types.NamespacedName) error
	// OwnedTypes are the child kinds whose changes must re-reconcile their owner.
	OwnedTypes() []client.Object
}
