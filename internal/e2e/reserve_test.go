package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestReserve_SucceedsAndHoldsOneUse(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{Discount: 10000, MinOrderAmount: 20000, Flash: flash})
		order := uniqueOrder()
		before := time.Now()
		r := api.reserve(t, code, 42, order, 25000)
		if r.Error != "" {
			t.Fatalf("reserve refused: %s", r.Error)
		}
		if r.status() != "RESERVED" || str(r.Reservation["orderId"]) != order || num(t, r.Reservation["discountAmount"]) != 10000 {
			t.Errorf("reservation = %v", r.Reservation)
		}
		created, _ := time.Parse(time.RFC3339, str(r.Reservation["createdAt"]))
		expires, _ := time.Parse(time.RFC3339, str(r.Reservation["expiresAt"]))
		if got := expires.Sub(created); got != 15*time.Minute {
			t.Errorf("expiresAt - createdAt = %v, want RESERVATION_TTL 15m", got)
		}
		if created.Before(before.Add(-time.Minute)) {
			t.Errorf("createdAt %v is not now", created)
		}
		if st := readVoucher(t, s, code); st.Used != 1 || st.Reserved != 1 || st.Remaining != 9 {
			t.Errorf("voucher after one reserve = %+v", st)
		}
	})
}

func TestReserve_UnknownCodeIsNotFound(t *testing.T) {
	s := sharedServer(t)
	for _, api := range transports(s) {
		if r := api.reserve(t, uniqueCode("missing"), 42, uniqueOrder(), 100); r.Error != "NOT_FOUND" {
			t.Errorf("%s: reserve on an unknown code = %q, want NOT_FOUND", api.name(), r.Error)
		}
	}
}

func TestReserve_IdenticalRetryReturnsTheReservationAndTakesNoSecondUse(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{Flash: flash})
		order := uniqueOrder()
		first := api.reserve(t, code, 7, order, 5000)
		second := api.reserve(t, code, 7, order, 5000)
		if first.Error != "" || second.Error != "" {
			t.Fatalf("reserve, retry = %q, %q", first.Error, second.Error)
		}
		assertSameReservation(t, first, second)
		if st := readVoucher(t, s, code); st.Used != 1 {
			t.Errorf("usedCount after a retry = %d, want 1", st.Used)
		}
		// A retry of a confirmed reservation is a success too, unchanged.
		if c := api.confirm(t, code, order); c.Error != "" {
			t.Fatalf("confirm: %s", c.Error)
		}
		if r := api.reserve(t, code, 7, order, 5000); r.Error != "" || r.status() != "CONFIRMED" {
			t.Errorf("retry after confirm = %q %q, want the CONFIRMED reservation", r.Error, r.status())
		}
		if st := readVoucher(t, s, code); st.Used != 1 || st.Confirmed != 1 {
			t.Errorf("voucher after confirm and retry = %+v", st)
		}
	})
}

func TestReserve_OrderReusedWithOtherValuesIsOrderConflict(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{Flash: flash})
		other := createVoucher(t, s, voucherSpec{Flash: flash})
		order := uniqueOrder()
		if r := api.reserve(t, code, 7, order, 5000); r.Error != "" {
			t.Fatalf("reserve: %s", r.Error)
		}
		for _, tc := range []struct {
			desc     string
			code     string
			customer int64
			amount   int64
		}{
			{"another amount", code, 7, 5001},
			{"another customer", code, 8, 5000},
			{"another voucher", other, 7, 5000},
		} {
			if r := api.reserve(t, tc.code, tc.customer, order, tc.amount); r.Error != "ORDER_CONFLICT" {
				t.Errorf("%s: %q, want ORDER_CONFLICT", tc.desc, r.Error)
			}
		}
		if st := readVoucher(t, s, code); st.Used != 1 {
			t.Errorf("usedCount = %d, want 1", st.Used)
		}
		if st := readVoucher(t, s, other); st.Used != 0 {
			t.Errorf("the other voucher's usedCount = %d, want 0", st.Used)
		}
	})
}

func TestReserve_ReleasedOrderCannotBeReservedAgain(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{Flash: flash})
		order := uniqueOrder()
		api.reserve(t, code, 7, order, 5000)
		if r := api.release(t, code, order); r.Error != "" {
			t.Fatalf("release: %s", r.Error)
		}
		if r := api.reserve(t, code, 7, order, 5000); r.Error != "RESERVATION_RELEASED" {
			t.Errorf("reserve of a released order = %q, want RESERVATION_RELEASED", r.Error)
		}
		if r := api.reserve(t, code, 7, order, 9999); r.Error != "ORDER_CONFLICT" {
			t.Errorf("reserve of a released order with another amount = %q, want ORDER_CONFLICT", r.Error)
		}
		if st := readVoucher(t, s, code); st.Used != 0 {
			t.Errorf("usedCount = %d, want 0", st.Used)
		}
	})
}

func TestReserve_OutsideWindowOrBelowMinimumIsNotEligible(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		now := time.Now()
		for _, tc := range []struct {
			desc   string
			spec   voucherSpec
			amount int64
		}{
			{"before startsAt", voucherSpec{StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour)}, 5000},
			{"after endsAt", voucherSpec{StartsAt: now.Add(-2 * time.Hour), EndsAt: now.Add(-time.Hour)}, 5000},
			{"below minOrderAmount", voucherSpec{MinOrderAmount: 5001}, 5000},
		} {
			tc.spec.Flash = flash
			code := createVoucher(t, s, tc.spec)
			if r := api.reserve(t, code, 7, uniqueOrder(), tc.amount); r.Error != "NOT_ELIGIBLE" {
				t.Errorf("%s: %q, want NOT_ELIGIBLE", tc.desc, r.Error)
			}
			if st := readVoucher(t, s, code); st.Used != 0 {
				t.Errorf("%s: usedCount = %d, want 0", tc.desc, st.Used)
			}
		}
		// The minimum itself is eligible.
		code := createVoucher(t, s, voucherSpec{MinOrderAmount: 5000, Flash: flash})
		if r := api.reserve(t, code, 7, uniqueOrder(), 5000); r.Error != "" {
			t.Errorf("an order of exactly minOrderAmount: %q", r.Error)
		}
	})
}

func TestReserve_CustomerAtPerUserLimitIsAlreadyUsed(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{PerUserLimit: 2, Flash: flash})
		first, second := uniqueOrder(), uniqueOrder()
		for _, o := range []string{first, second} {
			if r := api.reserve(t, code, 7, o, 5000); r.Error != "" {
				t.Fatalf("reserve within perUserLimit 2: %s", r.Error)
			}
		}
		if r := api.reserve(t, code, 7, uniqueOrder(), 5000); r.Error != "ALREADY_USED" {
			t.Errorf("third reserve with perUserLimit 2 = %q, want ALREADY_USED", r.Error)
		}
		// Another customer is not affected.
		if r := api.reserve(t, code, 8, uniqueOrder(), 5000); r.Error != "" {
			t.Errorf("another customer: %q", r.Error)
		}
		// Confirmed uses count; released uses do not.
		api.confirm(t, code, first)
		if r := api.reserve(t, code, 7, uniqueOrder(), 5000); r.Error != "ALREADY_USED" {
			t.Errorf("after a confirm: %q, want ALREADY_USED", r.Error)
		}
		if r := api.release(t, code, second); r.Error != "" {
			t.Fatalf("release: %s", r.Error)
		}
		if r := api.reserve(t, code, 7, uniqueOrder(), 5000); r.Error != "" {
			t.Errorf("after a release the customer may reserve again: %q", r.Error)
		}
	})
}

func TestReserve_NoUseLeftIsOutOfStock(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{TotalLimit: 2, Flash: flash})
		held := uniqueOrder()
		api.reserve(t, code, 1, held, 5000)
		api.reserve(t, code, 2, uniqueOrder(), 5000)
		if r := api.reserve(t, code, 3, uniqueOrder(), 5000); r.Error != "OUT_OF_STOCK" {
			t.Errorf("reserve of a sold-out voucher = %q, want OUT_OF_STOCK", r.Error)
		}
		// The customer at their limit hears ALREADY_USED first (rule 4 before 5).
		if r := api.reserve(t, code, 1, uniqueOrder(), 5000); r.Error != "ALREADY_USED" {
			t.Errorf("customer at limit on a sold-out voucher = %q, want ALREADY_USED", r.Error)
		}
		if st := readVoucher(t, s, code); st.Used != 2 || st.Remaining != 0 {
			t.Errorf("voucher = %+v", st)
		}
		// A released use is sold again (the sold-out short cut lapses).
		api.release(t, code, held)
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := api.reserve(t, code, 4, uniqueOrder(), 5000)
			if r.Error == "" {
				break
			}
			if r.Error != "OUT_OF_STOCK" || time.Now().After(deadline) {
				t.Fatalf("reserve after a release = %q", r.Error)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if st := readVoucher(t, s, code); st.Used != 2 {
			t.Errorf("usedCount = %d, want 2", st.Used)
		}
	})
}

func TestReserve_InvalidInputNamesTheFieldAndChangesNothing(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, api := range transports(s) {
		t.Run(api.name(), func(t *testing.T) {
			code := createVoucher(t, s, voucherSpec{})
			for _, tc := range []struct {
				desc     string
				code     string
				customer any
				order    string
				amount   any
				field    string
			}{
				{"code with a space", "bad code", 1, uniqueOrder(), 100, "code"},
				{"code of 33 characters", strings.Repeat("a", 33), 1, uniqueOrder(), 100, "code"},
				{"orderId of 65 characters", code, 1, strings.Repeat("o", 65), 100, "orderId"},
				{"empty orderId", code, 1, "", 100, "orderId"},
				{"orderId with a NUL", code, 1, "o\x00x", 100, "orderId"},
				{"customerId not a number", code, "abc", uniqueOrder(), 100, "customerId"},
				{"customerId negative", code, -5, uniqueOrder(), 100, "customerId"},
				{"customerId zero", code, 0, uniqueOrder(), 100, "customerId"},
				{"customerId over 64 bits", code, "92233720368547758080", uniqueOrder(), 100, "customerId"},
				{"negative orderAmount", code, 1, uniqueOrder(), -1, "orderAmount"},
			} {
				r := api.reserve(t, tc.code, tc.customer, tc.order, tc.amount)
				if r.Error != "INVALID_INPUT" || !strings.HasSuffix(r.Field, tc.field) {
					t.Errorf("%s: %q field %q, want INVALID_INPUT field %s", tc.desc, r.Error, r.Field, tc.field)
				}
			}
			if st := readVoucher(t, s, code); st.Used != 0 {
				t.Errorf("usedCount after invalid input = %d, want 0", st.Used)
			}
		})
	}
}

func TestReserve_WritesTheAuditTrail(t *testing.T) {
	s := sharedServer(t)
	kinds(t, func(t *testing.T, flash bool) {
		api := restAPI{s}
		code := createVoucher(t, s, voucherSpec{Flash: flash})
		a, b := uniqueOrder(), uniqueOrder()
		api.reserve(t, code, 1, a, 100)
		api.confirm(t, code, a)
		api.reserve(t, code, 2, b, 100)
		api.release(t, code, b)
		rows, err := s.db.Query(context.Background(),
			`SELECT order_id, kind FROM reservation_event WHERE voucher_code = $1 ORDER BY id`, code)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var order, kind string
			if err := rows.Scan(&order, &kind); err != nil {
				t.Fatal(err)
			}
			got = append(got, order+":"+kind)
		}
		want := []string{a + ":reserved", a + ":confirmed", b + ":reserved", b + ":released"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("events = %v, want %v", got, want)
		}
	})
}
