package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"voucherd/internal/accounts"
	"voucherd/internal/postgres"
	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
	"voucherd/migrations"
	"voucherd/server"
	"voucherd/web"
)

const (
	authStorefront = "auth-first-storefront-token"
	authAdmin      = "auth-first-admin-token-0001"
)

// authFirstServer is the whole HTTP surface over the test database, on a
// real TCP listener, as production wires it: /metrics behind a token, the
// codes export open to a token or a dashboard session.
func authFirstServer(t *testing.T) *httptest.Server {
	srv, _ := authFirstServerWithKey(t)
	return srv
}

// authFirstServerWithKey is authFirstServer with the API keys checked too,
// and an admin key of its own.
func authFirstServerWithKey(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	ctx := context.Background()
	url := testenv.DatabaseURL()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		t.Fatalf("needs PostgreSQL at TEST_DATABASE_URL: %v", err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	_, err = migrations.Up(ctx, db)
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := postgres.New(pool)
	svc := voucher.NewService(voucher.Deps{Store: store}, voucher.Config{Logger: quiet})
	accts := accounts.New(store, accounts.AccountsConfig{})
	ring := voucher.NewKeyRing(store, nil, voucher.KeyRingConfig{Logger: quiet})
	t.Cleanup(ring.Start(t.Context()))
	key, err := voucher.NewApiKeys(store, nil).Create(voucher.WithCaller(ctx, voucher.Caller{Role: voucher.RoleAdmin, Name: "test"}),
		voucher.NewApiKey{Name: "auth-first " + t.Name(), Role: voucher.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	h := server.NewServer(svc, server.Config{
		StorefrontTokens: []string{authStorefront},
		AdminTokens:      []string{authAdmin},
		Keys:             ring,
		Production:       true,
		Logger:           quiet,
		Metrics:          http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "# metrics\n") }),
		MetricsNeedToken: true,
		Session:          web.SessionCaller(accts),
		Backoffice:       voucher.NewBackoffice(svc, store),
	})
	srv := httptest.NewUnstartedServer(h)
	// The timeouts voucherd serve has: a server that waited for the body
	// would answer only after ReadTimeout.
	srv.Config.ReadHeaderTimeout = 5 * time.Second
	srv.Config.ReadTimeout = 15 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, key.Secret
}

// TestAuth_NoOrAnUnknownTokenIs401AtOnceWhateverTheBodyDeclares: a request
// without a token, or with an unknown one, that declares a body (up to the
// 1 MiB limit, far over it, a few bytes, or chunked) and never sends it is
// answered 401 at once, on every route behind a token: the GraphQL and REST
// routes, the codes export and /metrics. The server holds no body for it:
// it answers before reading one, and closes the connection (the body it did
// not read must not be taken for the next request).
func TestAuth_NoOrAnUnknownTokenIs401AtOnceWhateverTheBodyDeclares(t *testing.T) {
	t.Parallel()
	srv, key := authFirstServerWithKey(t)
	addr := srv.Listener.Addr().String()
	routes := []struct{ method, path string }{
		{http.MethodPost, "/graphql"},
		{http.MethodPost, "/vouchers/AUTHFIRST/reservations"},
		{http.MethodPost, "/vouchers/AUTHFIRST/reservations/o-1/confirm"},
		{http.MethodDelete, "/vouchers/AUTHFIRST/reservations/o-1"},
		{http.MethodPost, "/vouchers/AUTHFIRST/checks"},
		{http.MethodGet, "/campaigns/1/codes.csv"},
		{http.MethodGet, "/metrics"},
	}
	credentials := map[string]string{
		"no token":           "",
		"an unknown token":   "Authorization: Bearer not-a-token-of-this-server\r\n",
		"a malformed header": "Authorization: Basic dXNlcjpwYXNz\r\n",
		"an empty bearer":    "Authorization: Bearer \r\n",
		"a near miss":        "Authorization: Bearer " + authAdmin + "x\r\n",
		"an unknown API key": "Authorization: Bearer vk_live_" + strings.Repeat("k", 43) + "\r\n",
		"a key's near miss":  "Authorization: Bearer " + key[:len(key)-1] + "\r\n",
	}
	bodies := map[string]string{
		"1 MiB declared":   "Content-Length: 1048576\r\n",
		"100 MiB declared": "Content-Length: 104857600\r\n",
		"100 B declared":   "Content-Length: 100\r\n",
		"chunked":          "Transfer-Encoding: chunked\r\n",
	}
	t.Run("refused", func(t *testing.T) {
		for _, route := range routes {
			for cname, credential := range credentials {
				for bname, body := range bodies {
					t.Run(fmt.Sprintf("%s %s %s %s", route.method, route.path, cname, bname), func(t *testing.T) {
						t.Parallel()
						desc := fmt.Sprintf("%s %s with %s, %s and no body sent", route.method, route.path, cname, bname)
						sendHeadOnly(t, addr, desc, route.method, route.path, credential+body)
					})
				}
			}
		}
	})

	// The same routes with a known token (or key: /metrics takes the listed
	// tokens only) do read the body: a small one sent whole is answered
	// (not 401), so the 401s above are the token's.
	for _, route := range routes {
		for _, token := range []string{authAdmin, key} {
			if token == key && route.path == "/metrics" {
				continue
			}
			req, _ := http.NewRequest(route.method, srv.URL+route.path, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				t.Errorf("%s %s with the admin token %.12s: 401", route.method, route.path, token)
			}
		}
	}
}

// sendHeadOnly sends a request's head (with extra header lines) and no body,
// and wants a 401 at once that closes the connection.
func sendHeadOnly(t *testing.T, addr, desc, method, path, extra string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// At once: well under the server's ReadTimeout (15 s), the wait of a
	// server that reads the body first.
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	head := method + " " + path + " HTTP/1.1\r\nHost: voucherd\r\nContent-Type: application/json\r\n" + extra + "\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: no answer at once: %v", desc, err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(got), "UNAUTHENTICATED") {
		t.Errorf("%s: %d %s, want 401 UNAUTHENTICATED", desc, resp.StatusCode, got)
	}
	if !resp.Close {
		t.Errorf("%s: the connection stays open with an unread body on it", desc)
	}
}
