package controller

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// writeCounter records every write a client sends to the API server.
type writeCounter struct {
	mu  sync.Mutex
	log []string
}

func (w *writeCounter) record(verb string, what any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, fmt.Sprintf("%s %T", verb, what))
}

func (w *writeCounter) writes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.log...)
}

func (w *writeCounter) count() int { return len(w.writes()) }

func (w *writeCounter) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = nil
}

func (w *writeCounter) wrap(c crclient.WithWatch) crclient.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c crclient.WithWatch, obj crclient.Object, opts ...crclient.CreateOption) error {
			w.record("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c crclient.WithWatch, obj crclient.Object, opts ...crclient.UpdateOption) error {
			w.record("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c crclient.WithWatch, obj crclient.Object, patch crclient.Patch, opts ...crclient.PatchOption) error {
			w.record("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c crclient.WithWatch, obj crclient.Object, opts ...crclient.DeleteOption) error {
			w.record("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
		Apply: func(ctx context.Context, c crclient.WithWatch, obj runtime.ApplyConfiguration, opts ...crclient.ApplyOption) error {
			w.record("apply", obj)
			return c.Apply(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c crclient.Client, sub string, obj crclient.Object, opts ...crclient.SubResourceUpdateOption) error {
			w.record("update/"+sub, obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c crclient.Client, sub string, obj crclient.Object, patch crclient.Patch, opts ...crclient.SubResourcePatchOption) error {
			w.record("patch/"+sub, obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
}
