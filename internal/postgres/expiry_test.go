package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"voucherd/internal/testdb"
	"voucherd/internal/voucher"
	"voucherd/migrations"
)

// ownDatabase makes a database of the test's own, migrated, and drops it at
// the end: the expiry sweep releases whatever is due in its database, and
// the shared test database has other tests' reservations.
func ownDatabase(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.Own(t, databaseURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := migrations.Up(ctx, stdlib.OpenDBFromPool(pool)); err != nil {
		t.Fatalf("migrations: %v", err)
	}
	return pool
}

// Sweeps racing on the same due reservations release each exactly once, give
// every use back to its voucher and customer, and do it a batch per
// transaction, not a row per transaction.
func TestExpireDue_ConcurrentSweepsReleaseEachReservationOnceInBatches(t *testing.T) {
	ctx := context.Background()
	pool := ownDatabase(t)
	s := New(pool)
	codes := []string{newFlashVoucher(t, s, 200, 2, 0), newFlashVoucher(t, s, 200, 2, 0)}
	orders := map[string]string{} // order -> voucher
	for _, code := range codes {
		for i := range 150 {
			r := voucher.ReserveRequest{Code: code, CustomerID: int64(1 + i/2), OrderID: unique("o"), OrderAmount: 500}
			if _, _, err := s.ReserveAdmitted(ctx, r, time.Millisecond, voucher.PathGateSync); err != nil {
				t.Fatal(err)
			}
			orders[r.OrderID] = code
		}
	}
	time.Sleep(10 * time.Millisecond) // every reservation is due

	var mu sync.Mutex
	released := map[string]int{}
	nonEmpty := 0
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				expired, err := s.ExpireDue(ctx, 40)
				if err != nil {
					t.Errorf("sweep: %v", err)
					return
				}
				if len(expired) == 0 {
					return
				}
				mu.Lock()
				nonEmpty++
				for _, res := range expired {
					released[res.OrderID]++
					if res.Status != voucher.StatusReleased || res.VoucherCode != orders[res.OrderID] {
						t.Errorf("expired %+v, want RELEASED of %s", res, orders[res.OrderID])
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	if len(released) != len(orders) {
		t.Fatalf("%d of %d reservations released", len(released), len(orders))
	}
	for order, n := range released {
		if n != 1 {
			t.Errorf("order %s released %d times", order, n)
		}
	}
	for _, code := range codes {
		var used, reserved, holding, events int
		var budgetUsed int64
		if err := pool.QueryRow(ctx, `SELECT used_count, reserved_count, budget_used FROM voucher WHERE code = $1`, code).Scan(&used, &reserved, &budgetUsed); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM voucher_customer WHERE voucher_code = $1 AND used_count <> 0`, code).Scan(&holding); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT count(DISTINCT order_id) FROM reservation_event WHERE voucher_code = $1 AND kind = 'expired'`, code).Scan(&events); err != nil {
			t.Fatal(err)
		}
		if used != 0 || reserved != 0 || budgetUsed != 0 || holding != 0 || events != 150 {
			t.Errorf("voucher %s after expiry: used %d, reserved %d, budget used %d, customers holding %d, expired events %d; want 0, 0, 0, 0, 150", code, used, reserved, budgetUsed, holding, events)
		}
	}
	var writers int
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM voucher_redemption WHERE status = 'RELEASED'`).Scan(&writers); err != nil {
		t.Fatal(err)
	}
	if writers != nonEmpty || writers >= len(orders)/10 {
		t.Fatalf("%d reservations released by %d transactions in %d sweeps that released any; want one transaction a sweep, far fewer than one a row", len(orders), writers, nonEmpty)
	}
	t.Logf("%d reservations released by %d transactions", len(orders), writers)
}
