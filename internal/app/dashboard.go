package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"voucherd/internal/accounts"
	"voucherd/internal/postgres"
	"voucherd/internal/voucher"
	"voucherd/web"
)

// The development dashboard user that serve creates outside production.
const (
	devUserEmail    = "dev@localhost"
	devUserPassword = "dev-password"
)

// sampleInterval is how often the counters of open vouchers are sampled for
// the dashboard's chart of remaining uses.
const sampleInterval = 5 * time.Second

// dashboard is the /admin handler with what it runs on.
type dashboard struct {
	handler    http.Handler
	backoffice *voucher.Backoffice
	// session reads a dashboard session for routes outside /admin.
	session func(r *http.Request) (voucher.Caller, bool, error)
}

// devAccountAllowed says whether the development user may exist and sign
// in: outside production, on a server that listens on loopback only (its
// password is in this file). Elsewhere it is barred from signing in, also
// when an earlier development run against the same database left it there.
func devAccountAllowed(cfg config) bool {
	host, _, err := net.SplitHostPort(cfg.HTTPAddr)
	return !cfg.Production && err == nil && isLoopback(host)
}

// accountsConfig is the sign-in settings of the dashboard's accounts.
func accountsConfig(cfg config) accounts.AccountsConfig {
	var ac accounts.AccountsConfig
	if !devAccountAllowed(cfg) {
		ac.Barred = []string{devUserEmail}
	}
	return ac
}

// newDashboard builds the dashboard over the store and the service and,
// outside production on a loopback address, makes sure the development user
// exists and prints its credentials.
func newDashboard(ctx context.Context, cfg config, store *postgres.Store, svc *voucher.Service, apiKeys *voucher.ApiKeys, webhooks *voucher.Webhooks, logger *slog.Logger, stdout io.Writer) (dashboard, error) {
	accts := accounts.New(store, accountsConfig(cfg))
	backoffice := voucher.NewBackoffice(svc, store)
	if !cfg.Production && !devAccountAllowed(cfg) {
		fmt.Fprintf(stdout, "no development dashboard user: HTTP_ADDR %s is not loopback only (%s cannot sign in here)\n", cfg.HTTPAddr, devUserEmail)
	}
	if devAccountAllowed(cfg) {
		created, err := accts.EnsureUser(ctx, accounts.NewUser{
			Email: devUserEmail, Name: "Development admin", Role: voucher.RoleAdmin, Password: devUserPassword,
		})
		if err != nil {
			return dashboard{}, fmt.Errorf("development dashboard user: %w", err)
		}
		note := "exists"
		if created {
			note = "created"
		}
		fmt.Fprintf(stdout, "development dashboard user (%s): %s, password %q; sign in at /admin (never made, and refused, with APP_ENV=production or off loopback)\n", note, devUserEmail, devUserPassword)
	}
	deps := web.Deps{Accounts: accts, Vouchers: backoffice, Reservations: svc, Drift: backoffice, DeadLetterDesk: backoffice, Campaigns: backoffice, ApiKeys: apiKeys, Sales: svc}
	if webhooks != nil {
		deps.Webhooks = webhooks // a nil *voucher.Webhooks would be a non-nil interface
	}
	// Dead-lettered events are shown only once a store counts them.
	if dl, ok := any(store).(web.DeadLetterCounter); ok {
		deps.DeadLetters = dl
	}
	return dashboard{
		handler:    web.New(deps, web.Config{SecureCookies: cfg.Production, Logger: logger, DefaultCurrency: cfg.DefaultCurrency, ClientAddresses: cfg.TrustedProxies}),
		backoffice: backoffice,
		session:    web.SessionCaller(accts),
	}, nil
}
