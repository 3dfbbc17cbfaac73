package adapter

import (
	"context"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapter/subscribe"
)

// subscriptionContent is what the subscriptions relay asks of the content s serves.
func subscriptionContent(s *Server) subscribe.Content {
	return subscribe.Content{
		Subscribable: func(uri string) (*gateway.Item, string) {
			return s.content.Set().Subscribable(uri)
		},
		MayRead: func(ctx context.Context, uri string) bool {
			return s.content.MayRead(ctx, uri)
		},
		LogRead: s.filter.LogRead,
		OffersListen: func() bool {
			return s.streamable != nil && s.content.OffersSubscriptions()
		},
	}
}
