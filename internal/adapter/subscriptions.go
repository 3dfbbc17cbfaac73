package adapter

import (
	"context"
	"fmt"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapter/subscribe"
)

// subscribable is the imported item of set that serves uri and whose remote offers
// subscriptions; otherwise why uri cannot be subscribed to.
func (set *contentSet) subscribable(uri string) (*gateway.Item, string) {
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

// subscriptionContent is what the subscriptions relay asks of the content s serves.
func subscriptionContent(s *Server) subscribe.Content {
	return subscribe.Content{
		Subscribable: func(uri string) (*gateway.Item, string) {
			return s.content.Load().subscribable(uri)
		},
		MayRead: func(ctx context.Context, uri string) bool {
			kind, name := s.content.Load().resourceItem(uri)
			return s.filter.Allows(ctx, kind, name)
		},
		LogRead: s.filter.LogRead,
		OffersListen: func() bool {
			return s.streamable != nil && s.content.Load().imported.offersSubscriptions()
		},
	}
}

// subscriptionTarget is the imported item that serves uri in set, nil where none or
// several do: where a subscription to uri goes after a reload to set.
func (set *contentSet) subscriptionTarget(uri string) *gateway.Item {
	if set.imported.ambiguity(uri) != nil {
		return nil
	}
	return set.importedServing(uri)
}

// offersSubscriptions says whether a resource or template of the set comes from a
// remote that offers subscriptions.
func (set *importedSet) offersSubscriptions() bool {
	for _, r := range set.resources {
		if r.item.Backend.Subscribe {
			return true
		}
	}
	for _, t := range set.templates {
		if t.item.Backend.Subscribe {
			return true
		}
	}
	return false
}
