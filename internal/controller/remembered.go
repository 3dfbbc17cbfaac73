package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// remembered is what a reconciler keeps about each object between its reconciles (the
// status it last wrote, the last render of a server's content, a probe's token), shared
// by all its workers. It holds only what this process saw; the reconciler forgets an
// object when it is gone. The zero value is ready.
type remembered[T any] struct {
	mu     sync.Mutex
	values map[types.NamespacedName]T
}

func (r *remembered[T]) load(key types.NamespacedName) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.values[key]
	return v, ok
}

func (r *remembered[T]) store(key types.NamespacedName, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.values == nil {
		r.values = map[types.NamespacedName]T{}
	}
	r.values[key] = v
}

func (r *remembered[T]) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.values, key)
}
