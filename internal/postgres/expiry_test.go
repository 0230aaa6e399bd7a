package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"voucherd/internal/testdb"
	"voucherd/internal/voucher"
)

// ownDatabase makes a database of the test's own, migrated, and drops it at
// the end: the expiry sweep releases whatever is due in its database, and
// the shared test database has other tests' reservations.
func ownDatabase(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return testdb.Migrated(t, databaseURL)
}

// allDue makes every reservation of a test's own database held for less
// than an hour due: their times move two hours back, in the order they had,
// instead of a wait for short TTLs on the database's clock.
func allDue(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE voucher_redemption
		SET created_at = created_at - interval '2 hours', expires_at = expires_at - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
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
	allDue(t, pool)

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

// TestDueReservations_AGateThatCannotDecideStopsNoOtherVouchersExpiry: in
// kafka mode a flash voucher's due reservations wait for its gate (paused,
// not due on its clock, an admission pending) and stay due meanwhile. A
// pass's list must still reach the ordinary vouchers' due reservations,
// however many flash rows are older. Before, the list was the oldest due
// rows of every voucher: limit of them from one flash voucher whose gate
// could not decide filled every pass, and no other reservation expired
// (issue 30, item 8).
func TestDueReservations_AGateThatCannotDecideStopsNoOtherVouchersExpiry(t *testing.T) {
	ctx := context.Background()
	pool := ownDatabase(t)
	s := New(pool)
	flashCode := newFlashVoucher(t, s, 100, 10, 0)
	ordinary := strings.ToUpper(unique("ORD"))
	if _, err := s.CreateVoucher(ctx, voucher.NewVoucher{
		Code: ordinary, DiscountType: voucher.DiscountFixed, DiscountAmount: 100, Currency: "USD", TotalLimit: 10, PerUserLimit: 10,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	const limit = 5
	for i := range limit + 2 { // older than the ordinary one, and more than a list holds
		r := voucher.ReserveRequest{Code: flashCode, CustomerID: 1, OrderID: unique("f"), OrderAmount: 500}
		if _, _, err := s.ReserveAdmitted(ctx, r, time.Duration(i+1)*time.Millisecond, voucher.PathKafka); err != nil {
			t.Fatal(err)
		}
	}
	ordinaryOrder := unique("o")
	// Due after every flash one (an hour's TTL, two hours back).
	if _, _, err := s.Reserve(ctx, voucher.ReserveRequest{Code: ordinary, CustomerID: 1, OrderID: ordinaryOrder, OrderAmount: 500}, time.Hour, voucher.PathDatabase); err != nil {
		t.Fatal(err)
	}
	allDue(t, pool)

	due, err := s.DueReservations(ctx, limit)
	if err != nil {
		t.Fatal(err)
	}
	var flashDue int
	var ordinaryListed bool
	for _, d := range due {
		switch d.VoucherCode {
		case flashCode:
			flashDue++
			if !d.Flash {
				t.Errorf("flash order %s listed as the database's to expire", d.OrderID)
			}
		case ordinary:
			ordinaryListed = d.OrderID == ordinaryOrder && !d.Flash
		}
	}
	if !ordinaryListed {
		t.Errorf("the ordinary voucher's due reservation is not listed behind %d older flash ones (list: %d rows)", flashDue, len(due))
	}
	if flashDue != limit {
		t.Errorf("%d flash reservations listed, want the limit %d", flashDue, limit)
	}
}
