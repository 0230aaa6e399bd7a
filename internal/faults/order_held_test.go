package faults

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/testpg"
	"voucherd/internal/testproc"
	"voucherd/internal/testredis"
)

// TestFaults_AnOrderHeldElsewhereIsNeverRefusedWithoutTheDatabase: an
// orderId held on an ordinary voucher whose claim Redis no longer has (a
// failover to a replica that lagged, a restart; here the claim is deleted
// from the test's own Redis), sent to a sold-out flash voucher while
// PostgreSQL is stopped, is UNAVAILABLE, never OUT_OF_STOCK: only the
// database knows every orderId, and rule 2 (ORDER_CONFLICT) comes before the
// stock. Once PostgreSQL is back it is ORDER_CONFLICT. Explorer seeds 42,
// 112 and 123 found the kafka path answering OUT_OF_STOCK.
func TestFaults_AnOrderHeldElsewhereIsNeverRefusedWithoutTheDatabase(t *testing.T) {
	for _, mode := range []string{"kafka", "sync"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			pg := testpg.Start(t)
			rds := testredis.Start(t)
			extra := map[string]string{"FLASH_WRITE_PATH": mode}
			if mode == "kafka" {
				extra["KAFKA_BROKERS"] = testproc.Broker(t, nil).Addr
			}
			srv := testproc.Serve(t, serveEnv(pg.URL, rds.URL, extra))

			flash := createFlashVoucher(t, srv.URL, 1, 1)
			ordinary := createOrdinaryVoucher(t, srv.URL, 10)
			reserve := func(code, orderID string, customer int) answer {
				return call(ctx, http.MethodPost, srv.URL+"/vouchers/"+code+"/reservations", storefrontToken,
					map[string]any{"customerId": customer, "orderId": orderID, "orderAmount": 1000})
			}
			if a := reserve(flash, "sold-"+randomHex(6), 1); a.Status != http.StatusCreated {
				t.Fatalf("the flash voucher's one use: %d %s", a.Status, a.Raw)
			}
			order := "held-" + randomHex(6)
			if a := reserve(ordinary, order, 2); a.Status != http.StatusCreated {
				t.Fatalf("the order on the ordinary voucher: %d %s", a.Status, a.Raw)
			}
			// The flash voucher's sale is in the database (kafka: applied),
			// so its gate and the database agree that it is sold out.
			waitSoldOut(t, srv.URL, flash)

			rdb := redis.NewClient(&redis.Options{Addr: rds.Addr})
			defer rdb.Close()
			if err := rdb.Del(ctx, "order:{"+order+"}").Err(); err != nil {
				t.Fatal(err)
			}
			pg.Stop(t)
			a := reserve(flash, order, 2)
			pg.Start(t)
			if a.Status != http.StatusServiceUnavailable || a.Code != "UNAVAILABLE" {
				t.Errorf("an order held on another voucher, sent to a sold-out flash voucher with PostgreSQL down and its claim gone: %d %s, want 503 UNAVAILABLE (not a refusal of rule 3-5)", a.Status, a.Raw)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				a = reserve(flash, order, 2)
				if a.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if a.Code != "ORDER_CONFLICT" {
				t.Errorf("the same with PostgreSQL back: %d %s, want ORDER_CONFLICT", a.Status, a.Raw)
			}
		})
	}
}

// createOrdinaryVoucher creates a live voucher without a gate.
func createOrdinaryVoucher(t testing.TB, base string, total int) string {
	t.Helper()
	code := strings.ToUpper("N-" + randomHex(5))
	out := graphql(t, base, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code } error { code message field } } }`,
		map[string]any{"in": map[string]any{
			"code": code, "discountAmount": 500, "minOrderAmount": 0, "totalLimit": total, "perUserLimit": 1,
			"startsAt": time.Now().Add(-time.Hour).Format(time.RFC3339), "endsAt": time.Now().Add(24 * time.Hour).Format(time.RFC3339),
		}})
	if got := dig(out, "data", "createVoucher", "voucher", "code"); got != code {
		t.Fatalf("createVoucher: %v", out)
	}
	return code
}

// waitSoldOut waits until the voucher's database and gate both have no use
// left.
func waitSoldOut(t testing.TB, base, code string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		g, r, ok := gateAndDatabase(t, base, code)
		if ok && g == 0 && r == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not sold out in the gate and the database: gate %d, database %d", code, g, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
