package saissuer

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StateConfigMapName is the ConfigMap, in the operator's own namespace, that keeps the
// revocations across restarts. The admission policy (config/admission/own_objects.yaml)
// lets the operator write it by this name, and its Role there (config/rbac) lets it
// update it by this name.
const StateConfigMapName = "cantus-operator-revocations"

// stateKey is the ConfigMap key of the kept State, as JSON.
const stateKey = "state.json"

// ConfigMapStore keeps the State of the revocations in a ConfigMap of the operator's own
// namespace, where no tenant can write (issue 39, R12: read back from the adapter
// configs, which a tenant may edit, a planted UID or refusal time was recalled).
type ConfigMapStore struct {
	// Reader reads from the API server: the manager's cache holds neither this
	// namespace (with --watch-namespaces) nor unlabelled ConfigMaps.
	Reader client.Reader
	// Writer applies the ConfigMap, as FieldOwner.
	Writer     client.Client
	Namespace  string
	FieldOwner string
	// Labels are put on the ConfigMap (the operator's managed-by label).
	Labels map[string]string
}

func (s *ConfigMapStore) key() types.NamespacedName {
	return types.NamespacedName{Namespace: s.Namespace, Name: StateConfigMapName}
}

// Recall reads the kept State; none kept is an empty State.
func (s *ConfigMapStore) Recall(ctx context.Context) (State, error) {
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, s.key(), cm); err != nil {
		if apierrors.IsNotFound(err) {
			return State{}, nil
		}
		return State{}, fmt.Errorf("read the kept revocations %s: %w", s.key(), err)
	}
	var state State
	if data, ok := cm.Data[stateKey]; ok {
		if err := json.Unmarshal([]byte(data), &state); err != nil {
			return State{}, fmt.Errorf("decode the kept revocations %s: %w", s.key(), err)
		}
	}
	return state, nil
}

// Save keeps state, replacing what was kept.
func (s *ConfigMapStore) Save(ctx context.Context, state State) error {
	data, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("encode the revocations: %w", err)
	}
	cm := corev1ac.ConfigMap(StateConfigMapName, s.Namespace).
		WithLabels(s.Labels).
		WithData(map[string]string{stateKey: string(data)})
	if err := s.Writer.Apply(ctx, cm, client.FieldOwner(s.FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("keep the revocations in %s: %w", s.key(), err)
	}
	return nil
}
