package server_test

// Benchmarks of the reserve hot path through the whole HTTP surface
// (server.NewServer) without the network: what one request costs the
// server's CPU on top of net/http. They run against the real PostgreSQL and
// Redis (TEST_DATABASE_URL, TEST_REDIS_URL), like the end-to-end tests:
//
//	go test -run '^$' -bench Reserve -benchmem ./server/
//
// cmd/flashbench measures the same paths over loopback under load.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"voucherd/internal/gate"
	"voucherd/internal/postgres"
	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
	"voucherd/migrations"
	"voucherd/server"
)

const (
	benchStorefront = "bench-storefront-token-0123456789"
	benchAdmin      = "bench-admin-token-0123456789abcdef"
)

// benchEnv is one service over the test database and Redis, with the
// HTTP surface twice: with the sold-out cache (the default) and without it,
// so every sold-out answer asks the gate.
type benchEnv struct {
	handler, noCache http.Handler
	soldOut          string // a flash voucher whose one use is taken
}

var (
	benchOnce   sync.Once
	benchShared *benchEnv
	benchErr    error
)

func setUpBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	benchOnce.Do(func() { benchShared, benchErr = newBenchEnv(context.Background()) })
	if benchErr != nil {
		b.Skipf("needs PostgreSQL and Redis: %v", benchErr)
	}
	return benchShared
}

func newBenchEnv(ctx context.Context) (*benchEnv, error) {
	pool, err := pgxpool.New(ctx, testenv.DatabaseURL())
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		return nil, err
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	_, err = migrations.Up(ctx, sqlDB)
	_ = sqlDB.Close()
	if err != nil {
		return nil, err
	}
	rdb, err := gate.NewClient(testenv.RedisURL())
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	newHandler := func(cfg voucher.Config) http.Handler {
		cfg.Logger = quiet
		svc := voucher.NewService(voucher.Deps{Store: postgres.New(pool), Gate: gate.New(rdb)}, cfg)
		return server.NewServer(svc, server.Config{StorefrontTokens: []string{benchStorefront}, AdminTokens: []string{benchAdmin}, Logger: quiet})
	}
	s := &benchEnv{handler: newHandler(voucher.Config{}), noCache: newHandler(voucher.Config{SoldOutTTL: -1})}

	code := make([]byte, 5)
	_, _ = rand.Read(code)
	s.soldOut = "bench-" + hex.EncodeToString(code)
	now := time.Now().UTC()
	create := fmt.Sprintf(`{"query":"mutation($in: CreateVoucherInput!){createVoucher(input:$in){voucher{code} error{code}}}","variables":{"in":{"code":%q,"discountAmount":1000,"totalLimit":1,"perUserLimit":1,"startsAt":%q,"endsAt":%q,"flash":true}}}`,
		s.soldOut, now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	if w := benchServe(s.handler, http.MethodPost, "/graphql", benchAdmin, []byte(create)); w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"error":{`)) {
		return nil, fmt.Errorf("create voucher: %d %s", w.Code, w.Body)
	}
	if w := benchServe(s.handler, http.MethodPost, "/vouchers/"+s.soldOut+"/reservations", benchStorefront, benchRESTBody(1, s.soldOut+"-first")); w.Code != http.StatusCreated {
		return nil, fmt.Errorf("first reserve: %d %s", w.Code, w.Body)
	}
	return s, nil
}

func benchServe(h http.Handler, method, path, token string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func benchRESTBody(customer int64, orderID string) []byte {
	return []byte(`{"customerId":` + strconv.FormatInt(customer, 10) + `,"orderId":"` + orderID + `","orderAmount":25000}`)
}

const benchReserveMutation = `mutation Reserve($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { reservation { orderId status discountAmount expiresAt } error { code } } }`

func benchGraphQLBody(code string, customer int64, orderID string) []byte {
	return []byte(`{"operationName":"Reserve","query":` + strconv.Quote(benchReserveMutation) + `,"variables":{"input":{"code":"` + code +
		`","customerId":"` + strconv.FormatInt(customer, 10) + `","orderId":"` + orderID + `","orderAmount":25000}}}`)
}

// benchCustomers gives every request of every benchmark its own customer.
var benchCustomers atomic.Int64

// benchRunParallel serves one request per iteration from many goroutines (a flash
// sale is concurrent: locks and pools show up) and checks each answer.
func benchRunParallel(b *testing.B, h http.Handler, path string, body func(customer int64) []byte, want int, wantBody string) {
	b.ReportAllocs()
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c := benchCustomers.Add(1) + 1_000_000
			w := benchServe(h, http.MethodPost, path, benchStorefront, body(c))
			if w.Code != want || !bytes.Contains(w.Body.Bytes(), []byte(wantBody)) {
				b.Errorf("HTTP %d %s, want %d with %s", w.Code, w.Body, want, wantBody)
				return
			}
		}
	})
}

// BenchmarkReserve: the late crowd of a sold-out flash voucher (the bulk of a
// flash sale's requests) over REST and GraphQL, the transport alone (an
// invalid body, refused before the service), and the ceiling (decode the
// same body, encode a similar answer, nothing else) as the yardstick.
func BenchmarkReserve(b *testing.B) {
	b.Run("ceiling", func(b *testing.B) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				CustomerID  json.RawMessage `json:"customerId"`
				OrderID     string          `json:"orderId"`
				OrderAmount int64           `json:"orderAmount"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			var buf bytes.Buffer
			_ = json.NewEncoder(&buf).Encode(map[string]any{"orderId": body.OrderID, "status": "RESERVED", "discountAmount": 1000, "expiresAt": time.Now().UTC()})
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(buf.Bytes())
		})
		benchRunParallel(b, h, "/vouchers/x/reservations", func(c int64) []byte { return benchRESTBody(c, "o-"+strconv.FormatInt(c, 10)) }, http.StatusCreated, "RESERVED")
	})
	b.Run("REST/invalid-input", func(b *testing.B) {
		s := setUpBenchEnv(b)
		benchRunParallel(b, s.handler, "/vouchers/"+s.soldOut+"/reservations", func(c int64) []byte { return benchRESTBody(c, "") }, http.StatusBadRequest, "INVALID_INPUT")
	})
	b.Run("REST/sold-out", func(b *testing.B) {
		s := setUpBenchEnv(b)
		benchRunParallel(b, s.handler, "/vouchers/"+s.soldOut+"/reservations", func(c int64) []byte { return benchRESTBody(c, s.soldOut+"-"+strconv.FormatInt(c, 10)) }, http.StatusConflict, "OUT_OF_STOCK")
	})
	b.Run("REST/sold-out-gate", func(b *testing.B) {
		s := setUpBenchEnv(b)
		benchRunParallel(b, s.noCache, "/vouchers/"+s.soldOut+"/reservations", func(c int64) []byte { return benchRESTBody(c, s.soldOut+"-"+strconv.FormatInt(c, 10)) }, http.StatusConflict, "OUT_OF_STOCK")
	})
	b.Run("GraphQL/sold-out", func(b *testing.B) {
		s := setUpBenchEnv(b)
		benchRunParallel(b, s.handler, "/graphql", func(c int64) []byte { return benchGraphQLBody(s.soldOut, c, s.soldOut+"-"+strconv.FormatInt(c, 10)) }, http.StatusOK, "OUT_OF_STOCK")
	})
}
