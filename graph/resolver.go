// Package graph is the GraphQL transport: thin resolvers over the voucher
// service, generated code under generated/ and model/.
package graph

import (
	"log/slog"

	"voucherd/internal/voucher"
)

// Resolver is the one place the GraphQL layer's dependencies are injected.
type Resolver struct {
	Service *voucher.Service
	// Backoffice serves the admin mutations; nil refuses them.
	Backoffice *voucher.Backoffice
	// ApiKeys serves the API key operations; nil refuses them.
	ApiKeys *voucher.ApiKeys
	// Webhooks serves the webhook operations; nil refuses them.
	Webhooks *voucher.Webhooks
	Logger   *slog.Logger
	// Production: answers quote no value of the request.
	Production bool
}
