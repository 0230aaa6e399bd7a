// Package server is the HTTP transport: routes, REST handlers, bearer-token
// auth, request limits and health. It calls the voucher service and nothing
// below it.
package server

import (
	"context"
	"log/slog"
	"net/http"

	"voucherd/internal/clientaddr"
	"voucherd/internal/voucher"
)

// MaxBodyBytes is the largest request body accepted (the contract's 1 MiB).
const MaxBodyBytes = 1 << 20

// Config is what the HTTP server needs besides the service.
type Config struct {
	// StorefrontTokens and AdminTokens are the accepted bearer tokens.
	StorefrontTokens []string
	AdminTokens      []string
	// Keys checks the API keys admins made, besides the listed tokens;
	// nil: the listed tokens only.
	Keys KeyChecker
	// ApiKeys serves the API key operations (createApiKey and the rest);
	// nil refuses them.
	ApiKeys *voucher.ApiKeys
	// Webhooks serves the webhook operations; nil refuses them.
	Webhooks *voucher.Webhooks
	// Production turns off GraphiQL and introspection.
	Production bool
	// GraphiQLHeaders is the JSON that GraphiQL's headers pane starts with
	// (outside production): the development token, where it is in use.
	GraphiQLHeaders string
	Logger          *slog.Logger
	// Ready reports whether the dependencies answer (GET /readyz).
	Ready func(ctx context.Context) error
	// Metrics serves GET /metrics; nil: not mounted.
	Metrics http.Handler
	// MetricsNeedToken puts /metrics behind a bearer token of MetricsTokens
	// or AdminTokens (it lists voucher codes); else it is open.
	MetricsNeedToken bool
	MetricsTokens    []string
	// Dashboard serves /admin; nil: not mounted.
	Dashboard http.Handler
	// Session reads a dashboard session, for the routes a signed-in user
	// may open outside /admin (the campaign codes export); nil: tokens only.
	Session SessionCaller
	// Backoffice serves the admin mutations (updateVoucher, endVoucher).
	Backoffice *voucher.Backoffice
	// Observe wraps every route for metrics; nil: none.
	Observe func(route string, next http.Handler) http.Handler
	// Shedding refuses the excess of the storefront routes under
	// overload (shed.go); nil: none.
	Shedding *Shedding
	// ClientAddresses finds each request's client address (TRUSTED_PROXIES)
	// for the logs and the dashboard; the zero value: the peer's.
	ClientAddresses clientaddr.Resolver
}

// NewServer returns the service's whole HTTP surface.
func NewServer(svc *voucher.Service, cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observe == nil {
		cfg.Observe = func(_ string, next http.Handler) http.Handler { return next }
	}
	mux := http.NewServeMux()
	addRoutes(mux, svc, cfg)
	var h http.Handler = mux
	if cfg.Production {
		h = withProduction(h)
	}
	h = recoverPanics(cfg.Logger, h)
	h = cfg.ClientAddresses.Middleware(h)
	return h
}
