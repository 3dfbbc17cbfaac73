package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/periodic"
	"github.com/cantus-dev/cantus-operator/internal/policy"
)

// ListChangeWatcher keeps one session open with the remote of each import whose
// definitions are pinned (spec.approval.mode Manual) or that a gateway re-exports
// (streamable-http or sse), and re-runs the import's handshake when the remote says a
// list changed, so that a change is held (or approved definitions come back, or a
// gateway's clients see it) without waiting for refreshInterval.
// stdio imports are not watched: the bridge shares one child among callers and does
// not pass list_changed on; they are re-checked every refreshInterval.
type ListChangeWatcher struct {
	// MaxWatches bounds the sessions held open; imports past it are re-checked every
	// refreshInterval only.
	MaxWatches int
	// MinGap is the least time between two handshakes one remote's notifications
	// trigger, however often it sends them.
	MinGap time.Duration

	events chan event.GenericEvent

	mu      sync.Mutex
	base    context.Context
	watches map[types.NamespacedName]*listWatch
}

// Defaults of a ListChangeWatcher.
const (
	DefaultMaxListWatches    = 256
	DefaultListChangeMinGap  = 10 * time.Second
	listWatchRetryBase       = 5 * time.Second
	listWatchRetryCap        = 5 * time.Minute
	listChangeEventsCapacity = 1024
)

// NewListChangeWatcher returns a watcher with the defaults.
func NewListChangeWatcher() *ListChangeWatcher {
	return &ListChangeWatcher{
		MaxWatches: DefaultMaxListWatches,
		MinGap:     DefaultListChangeMinGap,
		events:     make(chan event.GenericEvent, listChangeEventsCapacity),
		base:       context.Background(),
		watches:    map[types.NamespacedName]*listWatch{},
	}
}

// listWatch is the session kept with one remote.
type listWatch struct {
	fingerprint string
	cancel      context.CancelFunc
	// recheck enqueues the import's reconcile, at most once per MinGap: a remote that
	// sends notifications in a loop costs one handshake per MinGap.
	recheck *periodic.Spaced
}

// Start ends every watch when the manager stops (or loses the lease).
func (w *ListChangeWatcher) Start(ctx context.Context) error {
	w.mu.Lock()
	w.base = ctx
	w.mu.Unlock()
	<-ctx.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, lw := range w.watches {
		lw.stop()
		delete(w.watches, key)
	}
	return nil
}

// watchable says whether an import's remote can be watched for list changes: not
// through a stdio bridge, which does not pass them on.
func watchable(imp *cantusv1alpha1.RemoteToolImport) bool {
	return imp.Spec.Transport != cantusv1alpha1.ImportTransportStdio
}

// pinned says whether an import's definitions wait for approval when they change.
func pinned(imp *cantusv1alpha1.RemoteToolImport) bool {
	return imp.Spec.Approval.ModeOrDefault() == cantusv1alpha1.ApprovalManual
}

// Ensure watches the import's remote with opts, in protocol 2026-07-28 when modern
// (a subscriptions/listen, which a stateless remote serves too), replacing a watch
// made otherwise (a new URL, header value, CA, policy or era).
func (w *ListChangeWatcher) Ensure(ctx context.Context, key types.NamespacedName, opts mcpclient.Options, modern bool, checker *policy.Checker) {
	fingerprint := watchFingerprint(opts, modern, checker)
	w.mu.Lock()
	defer w.mu.Unlock()
	if lw, ok := w.watches[key]; ok {
		if lw.fingerprint == fingerprint {
			return
		}
		lw.stop()
		delete(w.watches, key)
	}
	if len(w.watches) >= w.MaxWatches {
		ctrl.LoggerFrom(ctx).V(1).Info("not watching the remote for list changes: the watcher holds its maximum of sessions", "max", w.MaxWatches)
		return
	}
	watchCtx, cancel := context.WithCancel(w.base)
	lw := &listWatch{fingerprint: fingerprint, cancel: cancel, recheck: &periodic.Spaced{Gap: w.MinGap, Do: func() { w.enqueue(key) }}}
	w.watches[key] = lw
	log := ctrl.LoggerFrom(ctx).WithName("listchanges")
	go w.run(ctrl.LoggerInto(watchCtx, log), key, lw, opts, modern)
}

// Stop ends the watch of the import, if any.
func (w *ListChangeWatcher) Stop(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if lw, ok := w.watches[key]; ok {
		lw.stop()
		delete(w.watches, key)
	}
}

// run keeps a session open until the watch ends, opening it again with backoff when
// the remote drops it; a remote without sessions is not retried.
func (w *ListChangeWatcher) run(ctx context.Context, key types.NamespacedName, lw *listWatch, opts mcpclient.Options, modern bool) {
	log := ctrl.LoggerFrom(ctx)
	backoff := wait.Backoff{Duration: listWatchRetryBase, Factor: 2, Jitter: 0.2, Steps: 32, Cap: listWatchRetryCap}
	for {
		started := time.Now()
		err := mcpclient.WatchListChanges(ctx, opts, modern, func(method string) {
			log.V(1).Info("the remote says a list changed; checking it again", "import", key, "method", method)
			lw.recheck.Signal()
		})
		if ctx.Err() != nil {
			return
		}
		if mcpclient.SendsNoListChanges(err) {
			log.V(1).Info("not watching the remote for list changes", "import", key, "reason", err.Error())
			return
		}
		if time.Since(started) > listWatchRetryCap {
			backoff = wait.Backoff{Duration: listWatchRetryBase, Factor: 2, Jitter: 0.2, Steps: 32, Cap: listWatchRetryCap}
		}
		delay := backoff.Step()
		log.V(1).Info("the list-change session ended; opening it again", "import", key, "after", delay, "reason", fmt.Sprint(err))
		// The remote may have changed while no session listened.
		lw.recheck.Signal()
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// enqueue asks for the import's reconcile.
func (w *ListChangeWatcher) enqueue(key types.NamespacedName) {
	obj := &cantusv1alpha1.RemoteToolImport{}
	obj.Namespace, obj.Name = key.Namespace, key.Name
	select {
	case w.events <- event.GenericEvent{Object: obj}:
	default: // the queue is full of triggers already; the refresh interval still applies
	}
}

// stop ends the watch's session and drops a reconcile it has due.
func (lw *listWatch) stop() {
	lw.cancel()
	lw.recheck.Stop()
}

// watchFingerprint identifies what a watch was opened with, secrets hashed: the URL,
// transport, header values, CA bundle and the policies that allowed it.
func watchFingerprint(opts mcpclient.Options, modern bool, checker *policy.Checker) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%x\x00%t\x00", opts.URL, opts.Transport, opts.CABundle, modern)
	for _, k := range slices.Sorted(maps.Keys(opts.Headers)) {
		fmt.Fprintf(h, "%s=%s\x00", k, opts.Headers[k])
	}
	if checker != nil {
		for _, p := range checker.Policies {
			fmt.Fprintf(h, "%s/%d\x00", p.Name, p.Generation)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
