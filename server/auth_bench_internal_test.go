package server

// The cost of checking a bearer token: a listed token (STOREFRONT_TOKENS)
// and an API key without a rate (the listed tokens first, then a map
// lookup in the KeyRing: no database, no Redis), through require to a
// handler that does nothing.
//
//	go test -run '^$' -bench 'BearerCheck' -benchmem ./server/

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"voucherd/internal/postgres"
	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
	"voucherd/migrations"
)

func BenchmarkBearerCheck(b *testing.B) {
	ctx := b.Context()
	pool, err := pgxpool.New(ctx, testenv.DatabaseURL())
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		b.Fatalf("needs PostgreSQL at TEST_DATABASE_URL: %v", err)
	}
	b.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	_, err = migrations.Up(ctx, db)
	_ = db.Close()
	if err != nil {
		b.Fatal(err)
	}
	store := postgres.New(pool)
	key, err := voucher.NewApiKeys(store, nil).Create(voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "bench"}),
		voucher.NewApiKey{Name: "bench " + b.Name(), Role: voucher.RoleStorefront})
	if err != nil {
		b.Fatal(err)
	}
	ring := voucher.NewKeyRing(store, nil, voucher.KeyRingConfig{})
	b.Cleanup(ring.Start(ctx))
	tokens := newTokenAuth([]string{"bench-storefront-token-0123456789"}, []string{"bench-admin-token-0123456789abc"})
	tokens.keys = ring
	h := tokens.require(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, tc := range []struct{ name, token string }{
		{"listed token", "bench-storefront-token-0123456789"},
		{"API key", key.Secret},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, "/vouchers/X/reservations", nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			w := &benchDiscardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}
