// Package subscribe relays resource subscriptions to the remotes of a gateway's
// imported resources: resources/subscribe of a session (protocol 2025-11-25 and older)
// and the resource subscriptions of a subscriptions/listen stream (2026-07-28). The
// subscriptions themselves are gateway.Subscriptions; this package answers the
// requests and checks each one like a read.
package subscribe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// A gateway relays resource subscriptions to the remotes of its imported resources
// (gateway/subscriptions.go holds them). The adapter answers resources/subscribe and
// resources/unsubscribe itself, where it reads each streamable HTTP POST before mcp-go:
// mcp-go would acknowledge any URI, and cannot answer a handler's failure with the
// remote's error. A subscription belongs to the caller's session, so only a stateful
// gateway relays them (protocol 2025-11-25 and older); a stateless one answers that it
// cannot. A caller of protocol 2026-07-28 subscribes with subscriptions/listen, whose
// response stream carries the updates: those are relayed by stateless gateways too
// (listen.go).

// headerSessionID is the streamable HTTP transport's session header.
const headerSessionID = "Mcp-Session-Id"

// Content is what the relay asks of the content the server serves now.
type Content struct {
	// Subscribable is the imported item that serves uri and whose remote offers
	// subscriptions; otherwise why uri cannot be subscribed to.
	Subscribable func(uri string) (*gateway.Item, string)
	// MayRead says whether the caller of ctx may read uri.
	MayRead func(ctx context.Context, uri string) bool
	// LogRead writes the audit line of a request of method about uri.
	LogRead func(ctx context.Context, method, uri, outcome string)
	// OffersListen says whether the server reads each request before mcp-go and an
	// import it serves offers subscriptions.
	OffersListen func() bool
}

// Relay answers the subscription requests of one server.
type Relay struct {
	cfg      *adapterconfig.Config
	subs     *gateway.Subscriptions
	log      logr.Logger
	refusals *admission.RefusalLog
	content  Content
}

// NewRelay is the relay of the server of cfg; notify sends a session the update of uri
// (gateway.ErrSessionEnded when the session is gone), and a caller holds at most share
// of the subscriptions.
func NewRelay(cfg *adapterconfig.Config, log logr.Logger, refusals *admission.RefusalLog, share float64, notify func(session, uri string) error, content Content) *Relay {
	subs := gateway.NewSubscriptions(log, notify)
	subs.LimitCallerShare(share)
	return &Relay{cfg: cfg, subs: subs, log: log, refusals: refusals, content: content}
}

// NotifySession is a notify for NewRelay that sends with mcp-go's per-session
// notification.
func NotifySession(mcpServer func() *server.MCPServer) func(session, uri string) error {
	return func(session, uri string) error {
		err := mcpServer().SendNotificationToSpecificClient(session, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri})
		if errors.Is(err, server.ErrSessionNotFound) {
			return gateway.ErrSessionEnded
		}
		return err
	}
}

// Relays says whether the server relays resource subscriptions, and so declares
// resources.subscribe; fixed when it starts.
func (r *Relay) Relays() bool { return adapterconfig.RelaysSubscriptions(r.cfg) }

// Hooks tell the subscriptions which sessions exist: only those may subscribe, and an
// ended one's subscriptions end with it.
func (r *Relay) Hooks(hooks *server.Hooks) {
	if !r.Relays() {
		return
	}
	hooks.AddOnRegisterSession(func(_ context.Context, session server.ClientSession) {
		r.subs.SessionStarted(session.SessionID())
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, session server.ClientSession) {
		r.subs.SessionEnded(session.SessionID())
	})
}

// Answer answers the request id, resources/subscribe and resources/unsubscribe when this
// server relays subscriptions, or could but is stateless, and reports whether it did.
// Otherwise mcp-go answers, as it always has (the capability is not declared).
func (r *Relay) Answer(w http.ResponseWriter, req *http.Request, id json.RawMessage, method, uri string, modern bool) bool {
	if method != string(mcp.MethodResourcesSubscribe) && method != string(mcp.MethodResourcesUnsubscribe) {
		return false
	}
	if modern {
		return false // mcp-go: removed in 2026-07-28, which subscribes with subscriptions/listen
	}
	if r.cfg.Stateless {
		if !adapterconfig.SubscribableImports(r.cfg) {
			return false
		}
		jsonrpc.WriteAnswer(w, id, &jsonrpc.Answer{Error: &jsonrpc.Error{Code: mcp.METHOD_NOT_FOUND,
			Message: method + " needs a session, and this gateway is stateless (spec.stateless: true), so its updates could reach another replica: " +
				"set stateless: false (one replica) to relay resource subscriptions, or read the resource again when you need it"}})
		return true
	}
	if !r.Relays() {
		return false
	}
	session := req.Header.Get(headerSessionID)
	if uri == "" {
		jsonrpc.WriteAnswer(w, id, jsonrpc.InvalidParams("uri is required"))
		return true
	}
	if method == string(mcp.MethodResourcesUnsubscribe) {
		r.subs.Unsubscribe(session, uri)
		jsonrpc.WriteAnswer(w, id, &jsonrpc.Answer{Result: struct{}{}})
		return true
	}
	// The session's own upstream sessions hold its subscriptions on a stateful gateway.
	ctx := gateway.WithDownstreamSession(gateway.WithCallerKey(req.Context(), admission.CallerKey(req)), session)
	jsonrpc.WriteAnswer(w, id, r.subscribe(ctx, session, uri))
	return true
}

// subscribe subscribes the session to uri at the remote that serves it: the answer is
// the empty result, or an error naming why not.
func (r *Relay) subscribe(ctx context.Context, session, uri string) *jsonrpc.Answer {
	refusal, allowed, err := r.subscribeChecked(ctx, string(mcp.MethodResourcesSubscribe), uri, func(ctx context.Context, it *gateway.Item) error {
		return r.subs.Subscribe(ctx, session, it, uri)
	})
	var refusedHere *gateway.SubscriptionError
	switch {
	case refusal != "":
		answer := jsonrpc.InvalidParams(refusal)
		answer.Error.Data = map[string]string{"uri": uri}
		return answer
	case !allowed:
		return jsonrpc.Refused("resource " + uri)
	case err == nil:
		return &jsonrpc.Answer{Result: struct{}{}}
	case errors.As(err, &refusedHere):
		return jsonrpc.InvalidParams(fmt.Sprintf("cannot subscribe to %s: %s", uri, refusedHere.Message))
	}
	return jsonrpc.ForwardFailure(err)
}

// subscribeChecked subscribes to uri with subscribe, within the timeout of the import
// that serves it, checked like a read and audited as method: refusal says why uri
// cannot be subscribed to, allowed is false when the caller may not read it, and err
// is subscribe's.
func (r *Relay) subscribeChecked(ctx context.Context, method, uri string, subscribe func(context.Context, *gateway.Item) error) (refusal string, allowed bool, err error) {
	it, refusal := r.content.Subscribable(uri)
	if refusal != "" {
		return refusal, true, nil
	}
	if !r.content.MayRead(ctx, uri) {
		r.content.LogRead(ctx, method, uri, jsonrpc.OutcomeRefused)
		return "", false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, it.Backend.Timeout.Duration)
	defer cancel()
	err = subscribe(ctx, it)
	r.content.LogRead(ctx, method, uri, jsonrpc.OutcomeOf(err))
	return "", true, err
}

// Retarget moves the subscriptions to the remotes that serve their URIs after a reload
// (serving, nil where none or several do), before the reload closes the remotes no
// longer used.
func (r *Relay) Retarget(serving func(uri string) *gateway.Item) {
	r.subs.Retarget(serving)
}

// Close ends every subscription.
func (r *Relay) Close() { r.subs.Close() }

// withoutResourceSubscriptions is body, a subscriptions/listen of protocol 2026-07-28,
// without the resource subscriptions it asks for, which the gateway answers itself
// (listen.go). Anything that does not parse as such a request is left as it is.
func withoutResourceSubscriptions(body []byte) []byte {
	if !bytes.Contains(body, []byte(resourceSubscriptionsKey)) {
		return body
	}
	return editNotifications(body, func(notifications map[string]json.RawMessage) bool {
		if _, asked := notifications[resourceSubscriptionsKey]; !asked {
			return false
		}
		delete(notifications, resourceSubscriptionsKey)
		return true
	})
}

// resourceSubscriptionsKey names the resource subscriptions among a listen request's
// (and its acknowledgement's) notifications.
const resourceSubscriptionsKey = "resourceSubscriptions"

// editNotifications is msg, a JSON-RPC message, with params.notifications changed by
// edit (which says whether it changed anything); msg itself when it does not parse or
// edit changed nothing. Missing notifications are edited as an empty object.
func editNotifications(msg []byte, edit func(notifications map[string]json.RawMessage) bool) []byte {
	var envelope, params map[string]json.RawMessage
	notifications := map[string]json.RawMessage{}
	if json.Unmarshal(msg, &envelope) != nil || json.Unmarshal(envelope["params"], &params) != nil {
		return msg
	}
	if raw := params["notifications"]; len(raw) > 0 && json.Unmarshal(raw, &notifications) != nil {
		return msg
	}
	if !edit(notifications) {
		return msg
	}
	var err error
	if params["notifications"], err = json.Marshal(notifications); err != nil {
		return msg
	}
	if envelope["params"], err = json.Marshal(params); err != nil {
		return msg
	}
	out, err := json.Marshal(envelope)
	if err != nil {
		return msg
	}
	return out
}
