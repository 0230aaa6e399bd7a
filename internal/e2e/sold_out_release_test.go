package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/gate"
	"voucherd/internal/testenv"
	"voucherd/internal/testredis"
	"voucherd/internal/voucher"
)

// TestFlash_AReleasedUseSellsAgainAtOnceOnEveryInstance: with sold-out
// snapshots that would answer from memory for a minute (SOLD_OUT_TTL), a
// release makes the voucher sellable at once on the instance that released
// it, for another customer and for the customer who released, and within
// moments on another instance (the release is announced over Redis). On both
// write paths.
func TestFlash_AReleasedUseSellsAgainAtOnceOnEveryInstance(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "kafka"} {
		t.Run(mode, func(t *testing.T) {
			env := map[string]string{"SOLD_OUT_TTL": "1m"}
			start := startServer
			if mode == "kafka" {
				_, brokers := testBroker(t)
				env["KAFKA_BROKERS"] = brokers
				start = kafkaServer
			}
			a, b := restAPI{start(t, env)}, restAPI{start(t, env)}
			code := createVoucher(t, a.s, flash(voucherSpec{TotalLimit: 2}))
			first, second := uniqueOrder(), uniqueOrder()
			for i, o := range []string{first, second} {
				if r := a.reserve(t, code, int64(1+i), o, 100); r.Error != "" {
					t.Fatalf("reserve %d: %s", i, r.Error)
				}
			}
			// Both instances hold a sold-out snapshot now.
			if r := a.reserve(t, code, 10, uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
				t.Fatalf("sold out on A: %q", r.Error)
			}
			if r := b.reserve(t, code, 11, uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
				t.Fatalf("sold out on B: %q", r.Error)
			}

			if r := a.release(t, code, first); r.Error != "" {
				t.Fatalf("release: %s", r.Error)
			}
			// At once on A, and for the customer who released too.
			if r := a.reserve(t, code, 1, uniqueOrder(), 100); r.Error != "" {
				t.Errorf("the customer who released, right after the release on the same instance: %q", r.Error)
			}

			if r := a.release(t, code, second); r.Error != "" {
				t.Fatalf("release: %s", r.Error)
			}
			// B's snapshot would answer OUT_OF_STOCK for a minute: only the
			// announcement makes it ask the gate again.
			order := uniqueOrder()
			testenv.Eventually(t, "the released use sold on the other instance", func() (bool, string) {
				r := b.reserve(t, code, 12, order, 100)
				return r.Error == "", fmt.Sprint(r.Error)
			})
		})
	}
}

// TestFlash_AUseGivenBackByReconciliationSellsOnEveryInstance: a use that
// goes back to the gate other than by a release (here reconciliation
// forgets a winner whose write never started) reaches every instance's
// sold-out memory too: an order admitted with it on B is answered the same
// reservation on its identical retry on A, whose snapshot (one minute) was
// taken before. Each give-back is announced by the script that makes it;
// before, only a release announced one, and A answered OUT_OF_STOCK.
func TestFlash_AUseGivenBackByReconciliationSellsOnEveryInstance(t *testing.T) {
	t.Parallel()
	// A database and a Redis of its own: a reconciliation pass goes over
	// every flash voucher it finds, and every 300 ms it must reach this one.
	rs := testredis.Start(t)
	dbURL, _ := ownDatabase(t)
	env := map[string]string{"SOLD_OUT_TTL": "1m", "RECONCILE_INTERVAL": "300ms", "REDIS_URL": rs.URL, "DATABASE_URL": dbURL}
	a, b := restAPI{startServer(t, env)}, restAPI{startServer(t, env)}
	code := createVoucher(t, a.s, flash(voucherSpec{TotalLimit: 2}))
	if r := a.reserve(t, code, 1, uniqueOrder(), 100); r.Error != "" {
		t.Fatalf("reserve: %s", r.Error)
	}
	// A winner whose database write never started: admitted at the gate
	// only, as by an instance that died right after the gate.
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ghost := uniqueOrder()
	if verdict, err := gate.New(rdb).Reserve(context.Background(), code, 1, 0, voucher.ReserveRequest{Code: code, CustomerID: 2, OrderID: ghost, OrderAmount: 100}); err != nil || verdict != voucher.GateAdmitted {
		t.Fatalf("the gate-only winner: %v %v", verdict, err)
	}
	// A holds a sold-out snapshot now, with the ghost in it.
	if r := a.reserve(t, code, 3, uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
		t.Fatalf("sold out on A: %q", r.Error)
	}
	// Reconciliation gives the ghost's use back; B sells it.
	order := uniqueOrder()
	var won result
	testenv.Eventually(t, "the ghost's use sold on B", func() (bool, string) {
		won = b.reserve(t, code, 4, order, 100)
		return won.Error == "", won.Error
	})
	retry := a.reserve(t, code, 4, order, 100)
	if retry.Error != "" {
		t.Fatalf("the winner's identical retry on A: %s, want its reservation", retry.Error)
	}
	assertSameReservation(t, won, retry)
}

// TestFlash_ARetryOfAReleasedOrderIsReleasedAfterTheGateIsReloaded: sync
// mode, a sold-out flash voucher whose gate Redis lost and reloaded from
// the database: the identical retry of an order released before is
// RESERVATION_RELEASED, as the contract says, not OUT_OF_STOCK. The reload
// holds the released orders too; before, it held only the live ones, and
// the sold-out gate refused the retry it did not know (found by the fault
// explorer, seed 10).
func TestFlash_ARetryOfAReleasedOrderIsReleasedAfterTheGateIsReloaded(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	dbURL, _ := ownDatabase(t)
	api := restAPI{startServer(t, map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": dbURL})}
	code := createVoucher(t, api.s, flash(voucherSpec{TotalLimit: 1}))
	released := uniqueOrder()
	if r := api.reserve(t, code, 1, released, 100); r.Error != "" {
		t.Fatalf("reserve: %s", r.Error)
	}
	if r := api.release(t, code, released); r.Error != "" {
		t.Fatalf("release: %s", r.Error)
	}
	if r := api.reserve(t, code, 2, uniqueOrder(), 100); r.Error != "" {
		t.Fatalf("the released use sold again: %s", r.Error)
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the released order's retry answered from the reloaded gate", func() (bool, string) {
		r := api.reserve(t, code, 1, released, 100)
		return r.Error != "UNAVAILABLE", r.Error
	})
	if r := api.reserve(t, code, 1, released, 100); r.Error != "RESERVATION_RELEASED" {
		t.Errorf("the identical retry of a released order on a sold-out, reloaded gate: %q, want RESERVATION_RELEASED", r.Error)
	}
}
