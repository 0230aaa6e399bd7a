package e2e

import (
	"context"
	"testing"
	"time"

	"voucherd/internal/testenv"
)

// TestFlash_AnOrderHeldElsewhereIsAConflictBeforeAnyRefusal: the contract's
// rule 2 (an orderId reserved before with another code, customer or amount
// is ORDER_CONFLICT) comes before rules 3-5. A flash voucher's gate knows
// only its own orders, so an orderId held on an ordinary voucher, sent to a
// flash voucher that is sold out (the gate, then its sold-out memory),
// closed, or whose per-customer limit the customer has reached, must still
// be ORDER_CONFLICT, on both write paths. Before, the gate's refusal won:
// OUT_OF_STOCK, NOT_ELIGIBLE or ALREADY_USED (issue 30, the explorer's
// "order held on another voucher refused OUT_OF_STOCK").
func TestFlash_AnOrderHeldElsewhereIsAConflictBeforeAnyRefusal(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "kafka"} {
		t.Run(mode, func(t *testing.T) {
			s := startServer(t, map[string]string{"FLASH_WRITE_PATH": mode})
			api := restAPI{s}
			ordinary := createVoucher(t, s, voucherSpec{TotalLimit: 100})
			soldOut := createVoucher(t, s, flash(voucherSpec{TotalLimit: 1}))
			limited := createVoucher(t, s, flash(voucherSpec{TotalLimit: 100, PerUserLimit: 1}))
			closed := createVoucher(t, s, flash(voucherSpec{TotalLimit: 100, StartsAt: time.Now().Add(24 * time.Hour), EndsAt: time.Now().Add(48 * time.Hour)}))

			const customer = 7
			held := uniqueOrder()
			if r := api.reserve(t, ordinary, customer, held, 100); r.Error != "" {
				t.Fatalf("reserve on the ordinary voucher: %s", r.Error)
			}
			if r := api.reserve(t, soldOut, 1, uniqueOrder(), 100); r.Error != "" {
				t.Fatalf("the flash voucher's only use: %s", r.Error)
			}
			if r := api.reserve(t, soldOut, 2, uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
				t.Fatalf("a new order on the sold-out voucher: %q, want OUT_OF_STOCK", r.Error)
			}
			if r := api.reserve(t, limited, customer, uniqueOrder(), 100); r.Error != "" {
				t.Fatalf("the customer's one use of the limited voucher: %s", r.Error)
			}

			cases := []struct{ what, code string }{
				{"sold out (the gate)", soldOut},
				{"sold out (the sold-out memory)", soldOut},
				{"per-customer limit reached", limited},
				{"not yet valid", closed},
			}
			for _, c := range cases {
				for _, customerID := range []int64{customer, 8} {
					r := api.reserve(t, c.code, customerID, held, 100)
					if r.Error != "ORDER_CONFLICT" {
						t.Errorf("%s: the order held on another voucher, customer %d: %q, want ORDER_CONFLICT", c.what, customerID, r.Error)
					}
				}
			}
			// The rule that refused the others still refuses new orders.
			if r := api.reserve(t, soldOut, 3, uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
				t.Errorf("a new order on the sold-out voucher afterwards: %q, want OUT_OF_STOCK", r.Error)
			}
			if r := api.reserve(t, limited, customer, uniqueOrder(), 100); r.Error != "ALREADY_USED" {
				t.Errorf("the customer's second order on the limited voucher: %q, want ALREADY_USED", r.Error)
			}
			if r := api.reserve(t, closed, customer, uniqueOrder(), 100); r.Error != "NOT_ELIGIBLE" {
				t.Errorf("a new order on the voucher not yet valid: %q, want NOT_ELIGIBLE", r.Error)
			}
		})
	}
}

// TestKafka_AClaimWhoseWriteIsUndecidedIsNoConflict: in kafka mode an
// ordinary voucher's reserve claims its orderId before its write (so a
// flash voucher cannot admit the same new orderId meanwhile). While that
// write waits, the same orderId on a flash voucher is not ORDER_CONFLICT:
// no voucher holds it yet, and the write may still be refused. Here it is
// refused (the ordinary voucher's window closes under it), and the flash
// voucher's retry then succeeds. Before, the claim alone answered
// ORDER_CONFLICT for an orderId no voucher ever held (the explorer's
// "ORDER_CONFLICT for an orderId no voucher holds").
func TestKafka_AClaimWhoseWriteIsUndecidedIsNoConflict(t *testing.T) {
	t.Parallel()
	dbURL, db := ownDatabase(t)
	s := kafkaServer(t, map[string]string{"DATABASE_URL": dbURL})
	api := restAPI{s}
	ordinary := createVoucher(t, s, voucherSpec{TotalLimit: 1})
	flashCode := createVoucher(t, s, flash(voucherSpec{TotalLimit: 10}))
	if r := api.reserve(t, flashCode, 99, uniqueOrder(), 100); r.Error != "" {
		t.Fatalf("warm the flash voucher's gate: %s", r.Error)
	}

	// Hold the ordinary voucher's row: its reserve claims the orderId, then
	// waits for the row.
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM voucher WHERE code = $1 FOR UPDATE`, ordinary); err != nil {
		t.Fatal(err)
	}
	order := uniqueOrder()
	first := make(chan result, 1)
	go func() { first <- api.reserve(t, ordinary, 1, order, 100) }()
	testenv.Eventually(t, "the ordinary reserve to wait for the voucher's row", func() (bool, string) {
		var waiting int
		err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting)
		return err == nil && waiting > 0, "no backend waits for a lock"
	})

	if r := api.reserve(t, flashCode, 1, order, 100); r.Error == "ORDER_CONFLICT" || r.Error == "" {
		t.Errorf("the orderId on the flash voucher while the ordinary write is undecided: %q, want UNAVAILABLE (no voucher holds it yet)", r.Error)
	}
	// The ordinary voucher's window closes under the waiting reserve.
	if _, err := tx.Exec(ctx, `UPDATE voucher SET starts_at = now() - interval '2 hours', ends_at = now() - interval '1 hour' WHERE code = $1`, ordinary); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-first; r.Error != "NOT_ELIGIBLE" {
		t.Fatalf("the ordinary reserve after its voucher's window closed: %q, want NOT_ELIGIBLE", r.Error)
	}
	if r := api.reserve(t, flashCode, 1, order, 100); r.Error != "" {
		t.Errorf("the orderId on the flash voucher once no voucher holds it: %q, want a success", r.Error)
	}
}
