package subscribe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/wake"
)

// Resource subscriptions of protocol 2026-07-28. A client subscribes with
// subscriptions/listen, whose params.notifications.resourceSubscriptions lists URIs;
// the server acknowledges, in notifications/subscriptions/acknowledged (the first
// message on the request's response stream), the ones it established, and writes
// notifications/resources/updated about them onto that stream until the client
// closes it. Every message on it carries the request's id in
// _meta["io.modelcontextprotocol/subscriptionId"].
//
// The rest of the listen request (tools, prompts and resources list_changed) is
// mcp-go's, and stays so: the gateway takes the resource subscriptions out of the body
// (withoutResourceSubscriptions), subscribes the request's stream to each URI an
// import serves, as a subscriber of its own in gateway.Subscriptions (the same
// subscription at the remote as sessions share), and hands the request to mcp-go
// through a listenStream, which adds the established URIs to mcp-go's acknowledgement
// and writes the updates between mcp-go's events. Since the stream is the request's
// own, a stateless gateway relays these too: the update reaches the replica holding
// the stream. Refused URIs are left out of the acknowledgement (the spec has no place
// to say why; the gateway logs it).

// listenRequest is what the gateway reads of a subscriptions/listen: its id, and the
// distinct resource subscriptions it asks for, in their first order.
type listenRequest struct {
	id   json.RawMessage
	uris []string
}

// listenParams is a subscriptions/listen as encoding/json reads it, which is how mcp-go
// reads it too: keys match case-insensitively, and of duplicates the last one wins.
type listenParams struct {
	ID     json.RawMessage `json:"id"`
	Params struct {
		Notifications struct {
			ResourceSubscriptions boundedURIs `json:"resourceSubscriptions"`
		} `json:"notifications"`
	} `json:"params"`
}

// boundedURIs is a list of URIs that stops being read past bound entries, so that a
// long list costs no more than scanning it; over says it went past.
type boundedURIs struct {
	bound int
	uris  []string
	over  bool
}

// UnmarshalJSON reads the distinct non-empty URIs of a JSON list (null: none), up to
// bound entries, de-duplicating with a set.
func (b *boundedURIs) UnmarshalJSON(raw []byte) error {
	b.uris, b.over = nil, false // a later duplicate key replaces an earlier one
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return fmt.Errorf("resourceSubscriptions is not a list of URIs")
	}
	seen := map[string]struct{}{}
	for n := 0; dec.More(); n++ {
		if n == b.bound {
			b.over, b.uris = true, nil
			return nil
		}
		var uri string
		if err := dec.Decode(&uri); err != nil {
			return fmt.Errorf("resourceSubscriptions[%d]: %w", n, err)
		}
		if _, dup := seen[uri]; uri == "" || dup {
			continue
		}
		seen[uri] = struct{}{}
		b.uris = append(b.uris, uri)
	}
	return nil
}

// errTooManyListenSubscriptions refuses a subscriptions/listen that asks for more
// resource subscriptions than one request may hold.
type errTooManyListenSubscriptions struct{ bound int }

func (e errTooManyListenSubscriptions) Error() string {
	return fmt.Sprintf("subscriptions/listen may ask for at most %d resource subscriptions (params.notifications.resourceSubscriptions), "+
		"and this one asks for more: split them over several requests", e.bound)
}

// parseListen reads a subscriptions/listen body. A list of more than bound URIs is
// refused (errTooManyListenSubscriptions) as soon as it is seen to be longer, before
// any of its URIs is compared or subscribed. A body that does not parse as a listen
// request asks for nothing (mcp-go answers it).
func parseListen(body []byte, bound int) (listenRequest, error) {
	var p listenParams
	p.Params.Notifications.ResourceSubscriptions.bound = bound
	err := json.Unmarshal(body, &p)
	list := p.Params.Notifications.ResourceSubscriptions
	if list.over {
		return listenRequest{id: p.ID}, errTooManyListenSubscriptions{bound: bound}
	}
	if err != nil {
		return listenRequest{}, nil
	}
	return listenRequest{id: p.ID, uris: list.uris}, nil
}

// Resetter is a request body that can be handed other bytes to read.
type Resetter interface{ Reset(b []byte) }

// RelaysListen says whether the server answers the resource subscriptions of a
// subscriptions/listen itself: streamable HTTP, where it reads each request before
// mcp-go, stateful or not, with an import whose remote offers subscriptions. Any other
// server leaves the whole request to mcp-go, unread.
func (r *Relay) RelaysListen() bool { return r.content.OffersListen() }

// ListenHandler is the handler of a subscriptions/listen whose body gb holds: next,
// mcp-go, or relayListen in front of it when the request (of protocol 2026-07-28; an
// older session subscribes with resources/subscribe) asks for resource subscriptions.
// Their URIs are taken out of the body either way: mcp-go, seeing resources.subscribe
// declared, would acknowledge them and deliver nothing. A request asking for more than
// one request may hold is refused before anything else is done with it.
func (r *Relay) ListenHandler(gb Resetter, body []byte, next http.Handler) http.Handler {
	if !r.RelaysListen() {
		return next
	}
	req, err := parseListen(body, gateway.MaxSessionSubscriptions)
	if err != nil {
		return answering(req.id, jsonrpc.InvalidParams(err.Error()))
	}
	stripped := withoutResourceSubscriptions(body)
	if len(req.uris) > 0 {
		if left, _ := parseListen(stripped, gateway.MaxSessionSubscriptions); len(left.uris) > 0 {
			// Spelled so that the gateway could not take them out (a case variant of
			// a key it edits): mcp-go would acknowledge what nobody delivers.
			return answering(req.id, jsonrpc.InvalidParams("subscriptions/listen: write params.notifications.resourceSubscriptions with these exact keys, once each"))
		}
	}
	gb.Reset(stripped)
	if len(req.uris) > 0 && jsonrpc.ModernRequest(body) {
		return r.relayListen(next, req.id, req.uris)
	}
	return next
}

// answering is a handler that answers every request with answer, under id.
func answering(id json.RawMessage, answer *jsonrpc.Answer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		jsonrpc.WriteAnswer(w, id, answer)
	})
}

// relayListen serves a subscriptions/listen asking for the resource subscriptions uris
// (already taken out of its body): next, mcp-go, serves the rest of it.
func (r *Relay) relayListen(next http.Handler, id json.RawMessage, uris []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		stream := newListenStream(w, id)
		key := r.subs.OpenStream(stream.notify)
		defer r.subs.CloseStream(key)
		// Established before mcp-go acknowledges: the acknowledgement must name them.
		stream.established = r.subscribeListen(req.Context(), admission.CallerKey(req), key, uris)
		if len(stream.established) == 0 {
			next.ServeHTTP(w, req)
			return
		}
		defer stream.deliverWhile(req.Context())() // stopped before w goes with this handler
		next.ServeHTTP(stream, req)
		if stream.acknowledged() {
			// mcp-go answers at once when nothing else was asked for; the stream stays
			// open for the updates until the client closes it or shutdown ends it.
			<-req.Context().Done()
		}
	})
}

// subscribeListen subscribes the listen stream key of caller (an admission.CallerKey) to each of
// uris it may read and an import serves with subscriptions, and returns those
// established. The refused ones are logged in one line, at most one per caller per
// admission.RefusalLogEvery.
func (r *Relay) subscribeListen(ctx context.Context, caller, key string, uris []string) []string {
	ctx = gateway.WithCallerKey(ctx, caller)
	var established, refused []string
	var firstWhy string
	for _, uri := range uris {
		if err := r.subscribeListenTo(ctx, key, uri); err != nil {
			if refused = append(refused, uri); firstWhy == "" {
				firstWhy = err.Error()
			}
			continue
		}
		established = append(established, uri)
	}
	if len(refused) > 0 {
		r.refusals.Note(r.log, caller, time.Now(), "resource subscriptions of subscriptions/listen were not established",
			"refused", len(refused), "firstURI", clip.Line(refused[0], 200), "why", clip.Line(firstWhy, 300))
	}
	return established
}

// subscribeListenTo subscribes the listen stream key to uri, checked like a read.
func (r *Relay) subscribeListenTo(ctx context.Context, key, uri string) error {
	refusal, allowed, err := r.subscribeChecked(ctx, string(mcp.MethodSubscriptionsListen), uri, func(ctx context.Context, it *gateway.Item) error {
		return r.subs.SubscribeStream(ctx, key, it, uri)
	})
	switch {
	case refusal != "":
		return fmt.Errorf("%s", refusal)
	case !allowed:
		return jsonrpc.ErrNotAllowed("resource " + uri)
	case err != nil:
		return fmt.Errorf("subscribe at the remote: %w", err)
	}
	return nil
}

// listenStream is the response of a subscriptions/listen whose resource
// subscriptions the gateway established: mcp-go writes its events through it, and the
// gateway's updates go between them. It adds the established URIs to mcp-go's
// acknowledgement, holds the updates until that went out (it must be the first
// message), and drops mcp-go's answer once acknowledged (relayListen keeps the stream
// open).
//
// An update is only queued by notify and written by the stream's own goroutine
// (deliverWhile): a client that does not read blocks that goroutine alone, not the
// fan-out of its remote's updates to everyone else. The queue is a set of URIs (an
// update says only that the resource changed, so two pending ones are one), no larger
// than the URIs established.
type listenStream struct {
	w           http.ResponseWriter
	id          json.RawMessage
	established []string

	mu      sync.Mutex // every write to w, mcp-go's and the updates'
	partial []byte     // the start of an event mcp-go has not finished writing
	acked   bool

	queueMu sync.Mutex // never held while writing
	queued  []string
	closed  bool
	wake    wake.Signal // poked when updates are queued or may be written
}

func newListenStream(w http.ResponseWriter, id json.RawMessage) *listenStream {
	return &listenStream{w: w, id: id, wake: wake.NewSignal()}
}

func (l *listenStream) Header() http.Header { return l.w.Header() }

func (l *listenStream) WriteHeader(code int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.WriteHeader(code)
}

// Write passes mcp-go's events on, event by event (see listenStream). An answer that
// is not an event stream (mcp-go refused the request) passes unchanged.
func (l *listenStream) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !isEventStream(l.w.Header()) {
		return l.w.Write(p)
	}
	l.partial = append(l.partial, p...)
	for {
		end := bytes.Index(l.partial, []byte("\n\n"))
		if end < 0 {
			break
		}
		event := l.partial[:end+2]
		if err := l.passEventLocked(event); err != nil {
			return 0, err
		}
		l.partial = l.partial[end+2:]
	}
	if len(l.partial) == 0 {
		l.partial = nil
	}
	return len(p), nil
}

// passEventLocked writes one event of mcp-go's.
func (l *listenStream) passEventLocked(event []byte) error {
	msg := eventData(event)
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(msg, &head)
	answer := head.Method == "" && len(head.ID) > 0
	switch {
	case head.Method == string(mcp.MethodNotificationSubscriptionsAcknowledged) && !l.acked:
		return l.acknowledgeLocked(msg)
	case answer && l.acked:
		return nil // mcp-go's answer: the stream stays open (see relayListen)
	case answer && len(head.Error) == 0:
		// mcp-go, asked for nothing else, answered at once, and may have lost its
		// acknowledgement on the way (its forwarder can take it off the session's queue
		// and then find the request done): acknowledge here, with what it established.
		return l.acknowledgeLocked(l.emptyAcknowledgement())
	}
	_, err := l.w.Write(event)
	return err
}

// acknowledgeLocked writes the acknowledgement msg, naming the established URIs, and
// lets the updates follow.
func (l *listenStream) acknowledgeLocked(msg []byte) error {
	if _, err := l.w.Write(sseEvent(withResourceSubscriptions(msg, l.established))); err != nil {
		return fmt.Errorf("write the acknowledgement: %w", err)
	}
	l.acked = true
	l.wake.Poke() // the updates that came before
	return nil
}

// emptyAcknowledgement is an acknowledgement of no notifications, as mcp-go writes it.
func (l *listenStream) emptyAcknowledgement() []byte {
	msg, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"method":  mcp.MethodNotificationSubscriptionsAcknowledged,
		"params":  map[string]any{"_meta": map[string]any{mcp.MetaKeySubscriptionID: l.id}, "notifications": map[string]any{}},
	})
	return msg
}

// Flush flushes the stream.
func (l *listenStream) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
}

func (l *listenStream) flushLocked() {
	if f, ok := l.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is the response l wraps, for http.ResponseController.
func (l *listenStream) Unwrap() http.ResponseWriter { return l.w }

func (l *listenStream) acknowledged() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked
}

// notify queues notifications/resources/updated about uri for the stream; it is the
// stream's gateway.StreamNotifier, and never waits for the client.
func (l *listenStream) notify(uri string) error {
	l.queueMu.Lock()
	defer l.queueMu.Unlock()
	if l.closed {
		return gateway.ErrSessionEnded
	}
	if !slices.Contains(l.queued, uri) {
		l.queued = append(l.queued, uri)
	}
	l.wake.Poke()
	return nil
}

// deliverWhile writes the queued updates, once acknowledged, until ctx ends or the
// returned stop is called; stop returns when nothing more will be written.
func (l *listenStream) deliverWhile(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-l.wake:
				l.writeQueued()
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
		l.queueMu.Lock()
		l.closed = true
		l.queueMu.Unlock()
	}
}

// writeQueued writes the queued updates, when the acknowledgement went out.
func (l *listenStream) writeQueued() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.acked {
		return // passEventLocked pokes once it has
	}
	l.queueMu.Lock()
	uris := l.queued
	l.queued = nil
	l.queueMu.Unlock()
	for _, uri := range uris {
		if err := l.writeUpdateLocked(uri); err != nil {
			return // the client is gone; its request ends with it
		}
	}
	l.flushLocked()
}

func (l *listenStream) writeUpdateLocked(uri string) error {
	msg, err := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"method":  mcp.MethodNotificationResourceUpdated,
		"params":  map[string]any{"_meta": map[string]any{mcp.MetaKeySubscriptionID: l.id}, "uri": uri},
	})
	if err != nil {
		return fmt.Errorf("encode an update of %s: %w", uri, err)
	}
	if _, err := l.w.Write(sseEvent(msg)); err != nil {
		return fmt.Errorf("write an update of %s: %w", uri, err)
	}
	return nil
}

// eventData is the data of one server-sent event (its data lines joined), nil for
// none.
func eventData(event []byte) []byte {
	var data []byte
	for line := range bytes.SplitSeq(event, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		if data != nil {
			data = append(data, '\n')
		}
		data = append(data, bytes.TrimPrefix(rest, []byte(" "))...)
	}
	return data
}

// sseEvent is msg as a message event, as mcp-go writes them.
func sseEvent(msg []byte) []byte {
	out := make([]byte, 0, len(msg)+24)
	out = append(out, "event: message\ndata: "...)
	out = append(out, msg...)
	return append(out, "\n\n"...)
}

// withResourceSubscriptions is the acknowledgement msg naming uris among the
// notifications established; msg itself when it does not parse as one.
func withResourceSubscriptions(msg []byte, uris []string) []byte {
	return editNotifications(msg, func(notifications map[string]json.RawMessage) bool {
		raw, err := json.Marshal(uris)
		if err != nil {
			return false
		}
		notifications[resourceSubscriptionsKey] = raw
		return true
	})
}

// isEventStream says whether the response h heads is a stream of server-sent events.
func isEventStream(h http.Header) bool {
	mediaType, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(mediaType), "text/event-stream")
}
