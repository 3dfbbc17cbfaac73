package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// applyConfiguration is what every typed apply configuration of client-go offers.
type applyConfiguration interface {
	GetName() *string
	GetNamespace() *string
	GetKind() *string
}

// apply sends a server-side apply unless the same request already succeeded against the
// same resourceVersion of the live object, so that reconciling an unchanged SkillServer
// sends no write to the API server. Anyone else's edit changes the resourceVersion and
// the next reconcile applies again, taking the fields back.
func (c *appliedCache) apply(ctx context.Context, cl client.Client, live client.Object, desired applyConfigurationObject) error {
	key := types.NamespacedName{Namespace: *desired.GetNamespace(), Name: *desired.GetName()}
	kind := *desired.GetKind()
	requestID, err := requestHash(desired)
	if err != nil {
		return err
	}
	if err := cl.Get(ctx, key, live); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	if live.GetResourceVersion() != "" && c.has(kind, key, live.GetResourceVersion(), requestID) {
		return nil
	}
	if err := cl.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, key, err)
	}
	if rv := resourceVersionOf(desired); rv != "" {
		c.add(kind, key, rv, requestID)
	}
	return nil
}

// resourceVersionOf reads the resourceVersion controller-runtime decoded into the apply
// configuration from the API server's answer.
func resourceVersionOf(applied any) string {
	var answer struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	data, err := json.Marshal(applied)
	if err != nil || json.Unmarshal(data, &answer) != nil {
		return ""
	}
	return answer.Metadata.ResourceVersion
}

// applyConfigurationObject is a client-go apply configuration of a named object.
type applyConfigurationObject interface {
	applyConfiguration
	IsApplyConfiguration()
}

func requestHash(desired any) (string, error) {
	data, err := json.Marshal(desired)
	if err != nil {
		return "", fmt.Errorf("encode apply request: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// appliedCache remembers which apply requests succeeded against which resourceVersion.
// The entries of one object are replaced on every apply, so it stays as large as the
// number of children.
type appliedCache struct {
	mu      sync.Mutex
	entries map[string]string
}

func newAppliedCache() *appliedCache { return &appliedCache{entries: map[string]string{}} }

func (c *appliedCache) has(kind string, key types.NamespacedName, resourceVersion, requestID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[kind+"/"+key.String()] == resourceVersion+"#"+requestID
}

func (c *appliedCache) add(kind string, key types.NamespacedName, resourceVersion, requestID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[kind+"/"+key.String()] = resourceVersion + "#" + requestID
}
