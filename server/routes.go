package server

import (
	"net/http"

	"voucherd/graph"
	"voucherd/internal/voucher"
)

// addRoutes lists every route of the service in one place.
func addRoutes(mux *http.ServeMux, svc *voucher.Service, cfg Config) {
	tokens := newTokenAuth(cfg.StorefrontTokens, cfg.AdminTokens)
	tokens.keys = cfg.Keys
	// The token first: a request without a known one is refused before its
	// body is read, so nobody without a token makes the server hold one.
	// Then, under overload, the excess is refused (shed.go), also before
	// its body is read. These are the storefront's routes: health, metrics,
	// the dashboard and the codes export are never shed.
	api := func(route string, h http.Handler) {
		mux.Handle(route, cfg.Observe(route, tokens.require(shedding(cfg.Shedding, route, limitBody(h)))))
	}

	mux.Handle("GET /healthz", handleHealthz())
	mux.Handle("GET /readyz", handleReadyz(cfg.Ready, cfg.Logger))
	mux.Handle("GET /openapi.yaml", handleOpenAPI())
	if cfg.Metrics != nil {
		metrics := cfg.Metrics
		if cfg.MetricsNeedToken {
			// Any token of the two lists: the metrics handler ignores the role.
			metrics = newTokenAuth(nil, append(append([]string{}, cfg.MetricsTokens...), cfg.AdminTokens...)).require(metrics)
		}
		mux.Handle("GET /metrics", metrics)
	}

	api("POST /graphql", refuseReplacedText(graph.NewHandler(svc, graph.Options{Logger: cfg.Logger, Production: cfg.Production, Backoffice: cfg.Backoffice, ApiKeys: cfg.ApiKeys, Webhooks: cfg.Webhooks})))
	if !cfg.Production {
		mux.Handle("GET /graphql", graph.Playground("/graphql", cfg.GraphiQLHeaders))
		mux.Handle("GET "+graph.GraphiQLAssets, graph.PlaygroundAssets())
	}

	api("POST /vouchers/{code}/reservations", handleReserve(svc, cfg.Logger))
	api("POST /vouchers/{code}/reservations/{orderId}/confirm", handleConfirm(svc, cfg.Logger))
	api("DELETE /vouchers/{code}/reservations/{orderId}", handleRelease(svc, cfg.Logger))
	api("POST /vouchers/{code}/reservations/{orderId}/rollback", handleRollback(svc, cfg.Logger))
	api("POST /vouchers/{code}/checks", handleCheck(svc, cfg.Logger))
	// The codes export is also a download link for a signed-in dashboard user.
	const codesRoute = "GET /campaigns/{id}/codes.csv"
	mux.Handle(codesRoute, cfg.Observe(codesRoute, tokens.requireTokenOrSession(cfg.Session, cfg.Logger, limitBody(handleCampaignCodes(svc, cfg.Logger)))))

	if cfg.Dashboard != nil {
		mux.Handle("/admin", cfg.Dashboard)
		mux.Handle("/admin/", cfg.Dashboard)
	}
}
