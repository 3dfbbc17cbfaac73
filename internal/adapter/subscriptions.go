package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

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

// relaysSubscriptions says whether this server relays resource subscriptions, and so
// declares resources.subscribe; fixed when it starts.
func (s *Server) relaysSubscriptions() bool { return adapterconfig.RelaysSubscriptions(&s.cfg) }

// newSubscriptions is the server's set of subscriptions; updates reach a session with
// mcp-go's per-session notification.
func (s *Server) newSubscriptions() *gateway.Subscriptions {
	return gateway.NewSubscriptions(s.log, func(session, uri string) error {
		err := s.mcp.SendNotificationToSpecificClient(session, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri})
		if errors.Is(err, server.ErrSessionNotFound) {
			return gateway.ErrSessionEnded
		}
		return err
	})
}

// subscriptionHooks tell the subscriptions which sessions exist: only those may
// subscribe, and an ended one's subscriptions end with it.
func (s *Server) subscriptionHooks(hooks *server.Hooks) {
	if !s.relaysSubscriptions() {
		return
	}
	hooks.AddOnRegisterSession(func(_ context.Context, session server.ClientSession) {
		s.subs.SessionStarted(session.SessionID())
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, session server.ClientSession) {
		s.subs.SessionEnded(session.SessionID())
	})
}

// answerSubscription answers resources/subscribe and resources/unsubscribe when this
// server relays subscriptions, or could but is stateless, and reports whether it did.
// Otherwise mcp-go answers, as it always has (the capability is not declared).
func (s *Server) answerSubscription(w http.ResponseWriter, r *http.Request, req *contentRequest) bool {
	if req.Method != string(mcp.MethodResourcesSubscribe) && req.Method != string(mcp.MethodResourcesUnsubscribe) {
		return false
	}
	if req.modern {
		return false // mcp-go: removed in 2026-07-28, which subscribes with subscriptions/listen
	}
	if s.cfg.Stateless {
		if !adapterconfig.SubscribableImports(&s.cfg) {
			return false
		}
		jsonrpc.WriteAnswer(w, req.ID, &jsonrpc.Answer{Error: &jsonrpc.Error{Code: mcp.METHOD_NOT_FOUND,
			Message: req.Method + " needs a session, and this gateway is stateless (spec.stateless: true), so its updates could reach another replica: " +
				"set stateless: false (one replica) to relay resource subscriptions, or read the resource again when you need it"}})
		return true
	}
	if !s.relaysSubscriptions() {
		return false
	}
	session := r.Header.Get(headerSessionID)
	uri := req.Params.URI
	if uri == "" {
		jsonrpc.WriteAnswer(w, req.ID, jsonrpc.InvalidParams("uri is required"))
		return true
	}
	if req.Method == string(mcp.MethodResourcesUnsubscribe) {
		s.subs.Unsubscribe(session, uri)
		jsonrpc.WriteAnswer(w, req.ID, &jsonrpc.Answer{Result: struct{}{}})
		return true
	}
	jsonrpc.WriteAnswer(w, req.ID, s.subscribe(gateway.WithCallerKey(r.Context(), admission.CallerKey(r)), session, uri))
	return true
}

// subscribe subscribes the session to uri at the remote that serves it: the answer is
// the empty result, or an error naming why not.
func (s *Server) subscribe(ctx context.Context, session, uri string) *jsonrpc.Answer {
	it, refusal := s.subscribable(uri)
	if refusal != "" {
		answer := jsonrpc.InvalidParams(refusal)
		answer.Error.Data = map[string]string{"uri": uri}
		return answer
	}
	if kind, name := s.resourceItem(uri); !s.allows(ctx, kind, name) {
		s.logRead(ctx, string(mcp.MethodResourcesSubscribe), uri, jsonrpc.OutcomeRefused)
		return jsonrpc.Refused("resource " + uri)
	}
	ctx, cancel := context.WithTimeout(ctx, it.Backend.Timeout.Duration)
	defer cancel()
	err := s.subs.Subscribe(ctx, session, it, uri)
	s.logRead(ctx, string(mcp.MethodResourcesSubscribe), uri, jsonrpc.OutcomeOf(err))
	var refusedHere *gateway.SubscriptionError
	switch {
	case err == nil:
		return &jsonrpc.Answer{Result: struct{}{}}
	case errors.As(err, &refusedHere):
		return jsonrpc.InvalidParams(fmt.Sprintf("cannot subscribe to %s: %s", uri, refusedHere.Message))
	}
	return jsonrpc.ForwardFailure(err)
}

// subscribable is the imported item that serves uri and whose remote offers
// subscriptions; otherwise why uri cannot be subscribed to.
func (s *Server) subscribable(uri string) (*gateway.Item, string) {
	set := s.content.Load()
	if set.files[uri] != nil || (set.matchesTemplate(uri) && set.imported.resources[uri] == nil) {
		return nil, fmt.Sprintf("resource %s is this server's own: it changes only when the server's config does, which notifications/resources/list_changed announces; subscriptions are relayed to the remotes of imported resources only", uri)
	}
	it := set.imported.resourceFor(uri)
	if it == nil {
		return nil, fmt.Sprintf("resource %s is not served by any import of this gateway, so there is nothing to subscribe to: list the resources again", uri)
	}
	if err := set.imported.ambiguity(uri); err != nil {
		return nil, err.Error()
	}
	if !it.Backend.Subscribe {
		return nil, fmt.Sprintf("resource %s comes from import %s, whose remote does not offer subscriptions (it did not declare resources.subscribe)", uri, it.Backend.Import)
	}
	return it, ""
}

// retargetSubscriptions moves the subscriptions to the remotes that serve their URIs in
// next, before a reload closes the remotes no longer used.
func (s *Server) retargetSubscriptions(next *contentSet) {
	if s.subs == nil {
		return
	}
	s.subs.Retarget(func(uri string) *gateway.Item {
		if next.imported.ambiguity(uri) != nil {
			return nil
		}
		return next.importedServing(uri)
	})
}

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
