package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"voucherd/internal/accounts"
	"voucherd/internal/postgres"
	"voucherd/internal/testdb"
	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
)

// TestConfig_AppEnvIsDevelopmentOrProductionAndNothingElse: a misspelt
// production stops the start with a message naming APP_ENV, instead of
// running with the development defaults.
func TestConfig_AppEnvIsDevelopmentOrProductionAndNothingElse(t *testing.T) {
	t.Parallel()
	tokens := map[string]string{"STOREFRONT_TOKENS": "a-long-storefront-token", "ADMIN_TOKENS": "a-long-admin-token-01"}
	with := func(appEnv string) map[string]string {
		// A database nobody answers on: a start that got past the
		// settings fails at once instead of serving.
		m := map[string]string{"APP_ENV": appEnv, "DATABASE_URL": "postgres://voucher@127.0.0.1:1/none?connect_timeout=1"}
		for k, v := range tokens {
			m[k] = v
		}
		return m
	}
	for _, bad := range []string{"Production", "PRODUCTION", "prod", "staging", "dev", " production", "production ", "true"} {
		_, err := loadConfig(env(with(bad)))
		if err == nil || !strings.Contains(err.Error(), "APP_ENV must be development (or empty) or production") {
			t.Errorf("APP_ENV=%q: %v, want a refusal naming APP_ENV", bad, err)
		}
		// And so does the start, before it touches anything.
		if err := Run(context.Background(), []string{"serve"}, env(with(bad)), io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "APP_ENV") {
			t.Errorf("voucherd serve with APP_ENV=%q: %v, want a refusal naming APP_ENV", bad, err)
		}
	}
	for appEnv, production := range map[string]bool{"": false, "development": false, "production": true} {
		c, err := loadConfig(env(with(appEnv)))
		if err != nil || c.Production != production {
			t.Errorf("APP_ENV=%q: production %v, %v; want %v", appEnv, c.Production, err, production)
		}
	}
}

// TestConfig_OneTokenListSetLeavesTheOtherEmpty: outside production the
// development tokens are the default only when neither list is set; a
// server given one list does not also accept the public development token
// of the other.
func TestConfig_OneTokenListSetLeavesTheOtherEmpty(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env(map[string]string{"ADMIN_TOKENS": "my-admin-token"}))
	if err != nil || len(c.StorefrontTokens) != 0 || c.DevTokens || len(c.AdminTokens) != 1 {
		t.Errorf("ADMIN_TOKENS alone: storefront %v, admin %v, development %v, %v; want no storefront token", c.StorefrontTokens, c.AdminTokens, c.DevTokens, err)
	}
	c, err = loadConfig(env(map[string]string{"STOREFRONT_TOKENS": "my-storefront-token"}))
	if err != nil || len(c.AdminTokens) != 0 || c.DevTokens || len(c.StorefrontTokens) != 1 {
		t.Errorf("STOREFRONT_TOKENS alone: storefront %v, admin %v, development %v, %v; want no admin token", c.StorefrontTokens, c.AdminTokens, c.DevTokens, err)
	}
	c, err = loadConfig(env(map[string]string{"APP_ENV": "development"}))
	if err != nil || !c.DevTokens || len(c.StorefrontTokens) != 1 || len(c.AdminTokens) != 1 {
		t.Errorf("neither set: %v %v, %v; want both development tokens", c.StorefrontTokens, c.AdminTokens, err)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// dashboardSignIn signs in through a dashboard handler's form as a browser
// does: it returns the status and the session cookie set, if any.
func dashboardSignIn(t *testing.T, h http.Handler, email, password string) (int, *http.Cookie) {
	t.Helper()
	page := httptest.NewRecorder()
	h.ServeHTTP(page, httptest.NewRequest(http.MethodGet, "/admin/sign-in", nil))
	m := csrfField.FindStringSubmatch(page.Body.String())
	if m == nil {
		t.Fatalf("no sign-in form: %d", page.Code)
	}
	form := url.Values{"email": {email}, "password": {password}, "csrf": {m[1]}}
	req := httptest.NewRequest(http.MethodPost, "/admin/sign-in", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range page.Result().Cookies() {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.Name == "voucherd_session" && c.Value != "" {
			return rec.Code, c
		}
	}
	return rec.Code, nil
}

// openPage is GET target with a session cookie: 200, or 303 to sign in.
func openPage(h http.Handler, target string, session *http.Cookie) int {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.AddCookie(session)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestDashboard_TheDevelopmentAccountSignsInOnlyOnALoopbackDevelopmentServer:
// the dashboard as serve builds it, over a database of its own. A
// development run on loopback makes dev@localhost and it signs in; a
// production start on the same database (the row still there, enabled)
// refuses its password and the session it opened, while other users sign
// in; a development server on every interface neither makes it nor lets an
// earlier one in.
func TestDashboard_TheDevelopmentAccountSignsInOnlyOnALoopbackDevelopmentServer(t *testing.T) {
	t.Parallel()
	base := testenv.DatabaseURL()
	ctx := context.Background()
	dbURL := testdb.Own(t, base)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	boot := func(settings map[string]string) (dashboard, *postgres.Store, string) {
		t.Helper()
		settings["DATABASE_URL"] = dbURL
		cfg, err := loadConfig(env(settings))
		if err != nil {
			t.Fatal(err)
		}
		pool, err := openMigrated(ctx, cfg, quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		store := postgres.New(pool)
		svc := voucher.NewService(voucher.Deps{Store: store}, voucher.Config{Logger: quiet})
		var out strings.Builder
		dash, err := newDashboard(ctx, cfg, store, svc, voucher.NewApiKeys(store, nil), nil, quiet, &out)
		if err != nil {
			t.Fatal(err)
		}
		return dash, store, out.String()
	}

	dev, store, out := boot(map[string]string{"HTTP_ADDR": "127.0.0.1:0"})
	if !strings.Contains(out, devUserEmail) {
		t.Errorf("development on loopback printed %q, want the development user", out)
	}
	status, devSession := dashboardSignIn(t, dev.handler, devUserEmail, devUserPassword)
	if status != http.StatusSeeOther || devSession == nil {
		t.Fatalf("the development user on a loopback development server: %d, want 303 with a session", status)
	}
	// Another user, to tell a refusal of the development account from a
	// broken sign-in.
	other := accounts.New(store, accounts.AccountsConfig{})
	const otherEmail, otherPassword = "mia@example.com", "a long enough password"
	if _, err := other.AddUser(ctx, accounts.NewUser{Email: otherEmail, Role: voucher.RoleAdmin, Password: otherPassword}); err != nil {
		t.Fatal(err)
	}

	prod, _, out := boot(map[string]string{"APP_ENV": "production", "HTTP_ADDR": "127.0.0.1:0",
		"STOREFRONT_TOKENS": "a-long-storefront-token", "ADMIN_TOKENS": "a-long-admin-token-01"})
	if strings.Contains(out, devUserPassword) {
		t.Errorf("production printed the development password: %q", out)
	}
	if status, s := dashboardSignIn(t, prod.handler, devUserEmail, devUserPassword); status == http.StatusSeeOther || s != nil {
		t.Errorf("the development user (still in the database, enabled) on a production server: %d, session %v; want refused", status, s != nil)
	}
	if status := openPage(prod.handler, "/admin/vouchers", devSession); status != http.StatusSeeOther {
		t.Errorf("the development user's earlier session on a production server: %d, want 303 to sign in", status)
	}
	if status, s := dashboardSignIn(t, prod.handler, otherEmail, otherPassword); status != http.StatusSeeOther || s == nil {
		t.Errorf("another user on the production server: %d, want 303 with a session", status)
	}
	if status := openPage(dev.handler, "/admin/vouchers", devSession); status != http.StatusOK {
		t.Errorf("the same session on the development server: %d, want 200 (only production refuses it)", status)
	}

	open, _, out := boot(map[string]string{"HTTP_ADDR": ":0"})
	if !strings.Contains(out, "no development dashboard user") {
		t.Errorf("development on every interface printed %q, want that it made no development user", out)
	}
	if status, s := dashboardSignIn(t, open.handler, devUserEmail, devUserPassword); status == http.StatusSeeOther || s != nil {
		t.Errorf("the development user on a development server on every interface: %d, want refused", status)
	}

	// A fresh database and a server on every interface: no account is made.
	fresh := testdb.Own(t, base)
	cfg, err := loadConfig(env(map[string]string{"DATABASE_URL": fresh, "HTTP_ADDR": ":0"}))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := openMigrated(ctx, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := newDashboard(ctx, cfg, postgres.New(pool), voucher.NewService(voucher.Deps{Store: postgres.New(pool)}, voucher.Config{Logger: quiet}), voucher.NewApiKeys(postgres.New(pool), nil), nil, quiet, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.New(pool).UserByEmail(ctx, devUserEmail); voucher.ErrorCodeOf(err) != voucher.NotFound {
		t.Errorf("the development user on a fresh database of a server on every interface: %v, want none made", err)
	}
}
