package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestConfirm_ReservedBecomesConfirmedOnce(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{Flash: flash})
		order := uniqueOrder()
		api.reserve(t, code, 1, order, 100)
		c := api.confirm(t, code, order)
		if c.Error != "" || c.status() != "CONFIRMED" {
			t.Fatalf("confirm = %q %q", c.Error, c.status())
		}
		again := api.confirm(t, code, order)
		if again.Error != "" || again.status() != "CONFIRMED" {
			t.Errorf("second confirm = %q %q, want success unchanged", again.Error, again.status())
		}
		if st := readVoucher(t, s, code); st.Used != 1 || st.Confirmed != 1 || st.Reserved != 0 {
			t.Errorf("voucher = %+v", st)
		}
	})
}

func TestConfirm_ReleasedOrUnknownIsRefused(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{Flash: flash})
		other := createVoucher(t, s, voucherSpec{Flash: flash})
		order := uniqueOrder()
		api.reserve(t, code, 1, order, 100)
		if r := api.confirm(t, other, order); r.Error != "NOT_FOUND" {
			t.Errorf("confirm under another code = %q, want NOT_FOUND", r.Error)
		}
		if r := api.confirm(t, code, uniqueOrder()); r.Error != "NOT_FOUND" {
			t.Errorf("confirm of an unknown order = %q, want NOT_FOUND", r.Error)
		}
		api.release(t, code, order)
		if r := api.confirm(t, code, order); r.Error != "RESERVATION_RELEASED" {
			t.Errorf("confirm of a released order = %q, want RESERVATION_RELEASED", r.Error)
		}
		if st := readVoucher(t, s, code); st.Used != 0 || st.Confirmed != 0 {
			t.Errorf("voucher = %+v", st)
		}
	})
}

func TestRelease_GivesTheUseBackOnce(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{TotalLimit: 1, Flash: flash})
		order := uniqueOrder()
		api.reserve(t, code, 1, order, 100)
		r := api.release(t, code, order)
		if r.Error != "" || r.status() != "RELEASED" {
			t.Fatalf("release = %q %q", r.Error, r.status())
		}
		again := api.release(t, code, order)
		if again.Error != "" || again.status() != "RELEASED" {
			t.Errorf("second release = %q %q, want success unchanged", again.Error, again.status())
		}
		st := readVoucher(t, s, code)
		if st.Used != 0 || st.Remaining != 1 {
			t.Errorf("voucher after two releases = %+v, want the use given back once", st)
		}
		if flash && (st.GateRemaining == nil || *st.GateRemaining != 1) {
			t.Errorf("gateRemaining after two releases = %v, want 1", st.GateRemaining)
		}
		// The customer got their use back too.
		if r := api.reserve(t, code, 1, uniqueOrder(), 100); r.Error != "" {
			t.Errorf("the customer reserving again: %q", r.Error)
		}
	})
}

func TestRelease_ConfirmedOrUnknownIsRefused(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{Flash: flash})
		order := uniqueOrder()
		api.reserve(t, code, 1, order, 100)
		api.confirm(t, code, order)
		if r := api.release(t, code, order); r.Error != "ALREADY_CONFIRMED" {
			t.Errorf("release of a confirmed order = %q, want ALREADY_CONFIRMED", r.Error)
		}
		if r := api.release(t, code, uniqueOrder()); r.Error != "NOT_FOUND" {
			t.Errorf("release of an unknown order = %q, want NOT_FOUND", r.Error)
		}
		if r := api.release(t, createVoucher(t, s, voucherSpec{Flash: flash}), order); r.Error != "NOT_FOUND" {
			t.Errorf("release under another code = %q, want NOT_FOUND", r.Error)
		}
		if st := readVoucher(t, s, code); st.Confirmed != 1 || st.Used != 1 {
			t.Errorf("voucher = %+v", st)
		}
	})
}

func TestConfirmAndRelease_RacingNeverBothSucceed(t *testing.T) {
	s := sharedServer(t)
	kinds(t, func(t *testing.T, flash bool) {
		api := restAPI{s}
		code := createVoucher(t, s, voucherSpec{TotalLimit: 40, Flash: flash})
		for i := 0; i < 40; i++ {
			order := uniqueOrder()
			api.reserve(t, code, int64(i+1), order, 100)
			var confirmed, released atomic.Int32
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				if r := api.confirm(t, code, order); r.Error == "" {
					confirmed.Add(1)
				} else if r.Error != "RESERVATION_RELEASED" {
					t.Errorf("confirm racing release: %q", r.Error)
				}
			}()
			go func() {
				defer wg.Done()
				if r := api.release(t, code, order); r.Error == "" {
					released.Add(1)
				} else if r.Error != "ALREADY_CONFIRMED" {
					t.Errorf("release racing confirm: %q", r.Error)
				}
			}()
			wg.Wait()
			if confirmed.Load()+released.Load() != 1 {
				t.Fatalf("order %s: confirmed %d and released %d", order, confirmed.Load(), released.Load())
			}
		}
		st := readVoucher(t, s, code)
		if st.Used != st.Confirmed || st.Reserved != 0 {
			t.Errorf("voucher after the races = %+v", st)
		}
	})
}

func TestExpiry_ReleasesDueReservationsOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	// A database of its own: every server of the suite sweeps the shared
	// one, and one whose gate is elsewhere would give the uses back there.
	dbURL, db := ownDatabase(t)
	env := map[string]string{"RESERVATION_TTL": "1s", "EXPIRY_INTERVAL": "200ms", "DATABASE_URL": dbURL}
	a, b := startServer(t, env), startServer(t, env)
	kinds(t, func(t *testing.T, flash bool) {
		code := createVoucher(t, a, voucherSpec{TotalLimit: 60, PerUserLimit: 1, Flash: flash})
		var orders []string
		for i := 0; i < 60; i++ {
			order := uniqueOrder()
			srv := a
			if i%2 == 1 {
				srv = b
			}
			if r := (restAPI{srv}).reserve(t, code, int64(i+1), order, 100); r.Error != "" {
				t.Fatalf("reserve: %s", r.Error)
			}
			orders = append(orders, order)
		}
		// The sweep releases in the database, then gives the uses back to
		// the gate: wait for both.
		settled := func() bool {
			st := readVoucher(t, a, code)
			return st.Used == 0 && (!flash || (st.GateRemaining != nil && *st.GateRemaining == 60))
		}
		deadline := time.Now().Add(15 * time.Second)
		for !settled() {
			if time.Now().After(deadline) {
				st := readVoucher(t, a, code)
				t.Fatalf("reservations not expired: %+v (gate %v)", st, deref(st.GateRemaining))
			}
			time.Sleep(100 * time.Millisecond)
		}
		var expired, customersHolding int
		if err := db.QueryRow(context.Background(),
			`SELECT count(*) FROM reservation_event WHERE voucher_code = $1 AND kind = 'expired'`, code).Scan(&expired); err != nil {
			t.Fatal(err)
		}
		if expired != len(orders) {
			t.Errorf("expired events = %d, want %d (each reservation released once)", expired, len(orders))
		}
		if err := db.QueryRow(context.Background(),
			`SELECT count(*) FROM voucher_customer WHERE voucher_code = $1 AND used_count <> 0`, code).Scan(&customersHolding); err != nil {
			t.Fatal(err)
		}
		if customersHolding != 0 {
			t.Errorf("%d customers still hold a use after expiry", customersHolding)
		}
		if st := readVoucher(t, a, code); st.Remaining != 60 || (flash && (st.GateRemaining == nil || *st.GateRemaining != 60)) {
			t.Errorf("voucher after expiry = %+v (gate %v)", st, deref(st.GateRemaining))
		}
		r := (restAPI{a}).reserve(t, code, 1, orders[0], 100)
		if r.Error != "RESERVATION_RELEASED" {
			t.Errorf("retry of an expired order = %q, want RESERVATION_RELEASED", r.Error)
		}
	})
}

// TestConfirm_AfterExpiresAtIsReleasedEvenBeforeTheSweep: past expiresAt,
// before any sweep, a confirm and an identical retry are both
// RESERVATION_RELEASED, on the database path and the flash gate's.
func TestConfirm_AfterExpiresAtIsReleasedEvenBeforeTheSweep(t *testing.T) {
	t.Parallel()
	// The sweep runs once an hour here: only the deadline can refuse.
	s := startServer(t, map[string]string{"RESERVATION_TTL": "1s", "EXPIRY_INTERVAL": "1h"})
	for _, api := range transports(s) {
		kinds(t, func(t *testing.T, flash bool) {
			code := createVoucher(t, s, voucherSpec{Flash: flash})
			order := uniqueOrder()
			api.reserve(t, code, 1, order, 100)
			time.Sleep(1500 * time.Millisecond)
			if r := api.confirm(t, code, order); r.Error != "RESERVATION_RELEASED" {
				t.Errorf("%s: confirm after expiresAt = %q, want RESERVATION_RELEASED", api.name(), r.Error)
			}
			// Its identical retry is answered as the confirm was, not with
			// the reservation RESERVED and its expiresAt gone (explorer
			// seed 165, sync mode).
			if r := api.reserve(t, code, 1, order, 100); r.Error != "RESERVATION_RELEASED" {
				t.Errorf("%s: an identical retry after expiresAt = %+v, want RESERVATION_RELEASED", api.name(), r)
			}
		})
	}
}
