package gateway

import (
	"context"
	"maps"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/periodic"
)

// A gateway serves the lists of its config, which the operator rewrites when the
// remote's lists change (its own watch of the import re-runs the handshake). That
// chain takes seconds: the handshake, the import's status, the render, the config
// reaching the pod. So that a caller hears of a change as soon as it would from the
// remote itself, the gateway listens to each remote whose backend says ListChanges
// and passes the remote's notifications/{tools,prompts,resources}/list_changed on to
// its callers at once. A caller that lists again before the config follows sees the
// lists it saw before; the reload that brings the change notifies again.
//
// One stream per remote and replica: over 2026-07-28 a subscriptions/listen request,
// else a session of the gateway's own with its GET stream (the pooled session's stream
// is the resource subscriptions'). A remote that sends notifications in a loop gets
// one of each kind passed on per ListChangedGap, the last one never lost.

// ListChangedGap is the least time between two notifications of one kind the gateway
// passes on for one remote.
const ListChangedGap = 500 * time.Millisecond

// listChangedMethods are the notifications passed on.
var listChangedMethods = []string{
	string(mcp.MethodNotificationToolsListChanged),
	string(mcp.MethodNotificationPromptsListChanged),
	string(mcp.MethodNotificationResourcesListChanged),
}

// OnListChanged sets what a remote's list_changed notification is passed to (its
// method) and starts listening to the remotes whose backends ask for it. Unset, the
// gateway listens to no remote.
func (p *Pool) OnListChanged(pass func(method string)) {
	p.mu.Lock()
	p.passListChanged = pass
	p.mu.Unlock()
	p.followListChanges()
}

// followListChanges makes every remote's list watch what the committed set asks.
func (p *Pool) followListChanges() {
	p.mu.Lock()
	remotes, modes, pass := maps.Clone(p.remotes), p.listModes, p.passListChanged
	p.mu.Unlock()
	for key, r := range remotes {
		r.followListChanges(modes[key], pass)
	}
}

// listMode is how a gateway listens to a remote for list changes.
type listMode int

const (
	listNone   listMode = iota // not at all
	listLegacy                 // the GET stream of a 2025-11-25 session of its own
	listModern                 // a 2026-07-28 subscriptions/listen request
)

// listModeOf is how the remote of a backend that passes list changes on is listened
// to: in 2026-07-28 where the remote serves it, since a dual-era server keeps no
// 2025-11-25 sessions.
func listModeOf(r *remote, servesModern bool) listMode {
	if r.callers != nil {
		return listNone // no account of the gateway's own to listen with
	}
	if servesModern {
		return listModern
	}
	return listLegacy
}

// listWatch is the stream a gateway keeps open to one remote for its list changes.
type listWatch struct {
	mode listMode
	stop context.CancelFunc
}

// followListChanges starts, stops or replaces the remote's list watch so that it
// listens in mode; the caller holds no lock.
func (r *remote) followListChanges(mode listMode, pass func(method string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || pass == nil {
		mode = listNone
	}
	if w := r.listWatch; w != nil {
		if w.mode == mode {
			return
		}
		w.stop()
		r.listWatch = nil
	}
	if mode == listNone {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	r.listWatch = &listWatch{mode: mode, stop: stop}
	go r.watchListChanges(ctx, mode, pass)
}

// stopListWatchLocked ends the remote's list watch, if any; r.mu is held.
func (r *remote) stopListWatchLocked() {
	if w := r.listWatch; w != nil {
		w.stop()
		r.listWatch = nil
	}
}

// watchListChanges keeps a stream open to the remote and passes its list_changed
// notifications on, opening the stream again after a pause growing from
// minReconnectWait to maxReconnectWait when it ends (from minReconnectWait again after
// one that lasted longer than that), until ctx ends or the remote turns out unable to
// send them.
func (r *remote) watchListChanges(ctx context.Context, mode listMode, pass func(method string)) {
	passes := map[string]*periodic.Spaced{}
	for _, method := range listChangedMethods {
		passes[method] = &periodic.Spaced{Gap: ListChangedGap, Do: func() { pass(method) }}
		defer passes[method].Stop()
	}
	heard := r.metrics.listChanges.WithLabelValues(r.name)
	wait := minReconnectWait
	for {
		started := time.Now()
		err := r.refresh(false).WatchListChanges(ctx, mode == listModern, func(method string) {
			if p := passes[method]; p != nil {
				heard.Inc()
				p.Signal()
			}
		})
		if ctx.Err() != nil {
			return
		}
		if mcpclient.SendsNoListChanges(err) {
			r.log.V(1).Info("not following the remote's list changes: callers hear of them when the operator has re-checked the import", "reason", err.Error())
			return
		}
		if time.Since(started) > maxReconnectWait {
			wait = minReconnectWait
		}
		r.log.V(1).Info("the stream of the remote's list changes ended; opening it again", "after", wait, "reason", errText(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, maxReconnectWait)
	}
}

func errText(err error) string {
	if err == nil {
		return "the remote ended it"
	}
	return err.Error()
}
