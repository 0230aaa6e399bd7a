package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// newLimitedVoucher creates an ordinary voucher of total uses, perUser per
// customer, with the period limits in zone.
func newLimitedVoucher(t *testing.T, s *Store, total, perUser int, zone string, limits ...voucher.PeriodLimit) string {
	t.Helper()
	code := strings.ToUpper(unique("PERIOD"))
	_, err := s.CreateVoucher(context.Background(), voucher.NewVoucher{
		Code: code, DiscountType: voucher.DiscountFixed, DiscountAmount: 100, Currency: "USD", TotalLimit: total, PerUserLimit: perUser,
		StartsAt: time.Now().Add(-48 * time.Hour), EndsAt: time.Now().Add(48 * time.Hour),
		Restrictions: voucher.Restrictions{PeriodLimits: limits, TimeZone: zone},
	})
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// reserveAt reserves a new order of the customer on the database path and
// returns its order id and the refusal's code ("" on success).
func reserveAt(t *testing.T, s *Store, code string, customer int64) (string, voucher.ErrorCode, error) {
	t.Helper()
	order := unique("o")
	_, _, err := s.Reserve(context.Background(), voucher.ReserveRequest{Code: code, CustomerID: customer, OrderID: order, OrderAmount: 500}, time.Hour, voucher.PathDatabase)
	if err != nil && !voucher.IsRefusal(err) {
		t.Fatalf("reserve: %v", err)
	}
	return order, voucher.ErrorCodeOf(err), err
}

// periodUsed is what voucher_period_use holds for a voucher: used by
// "SCOPE customer start" (start as a date in UTC).
func periodUsed(t *testing.T, code string) map[string]int {
	t.Helper()
	rows, err := testPool.Query(context.Background(), `SELECT scope, customer_id, period_start, used_count FROM voucher_period_use WHERE voucher_code = $1`, code)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var scope string
		var customer int64
		var start time.Time
		var used int
		if err := rows.Scan(&scope, &customer, &start, &used); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%s %d %s", scope, customer, start.UTC().Format(time.RFC3339))] = used
	}
	return out
}

// backDate moves a voucher's reservations and period counts one day back,
// as if every use so far had been taken the day before: the periods' rows
// move with the uses they count, so the database stays as a sale that
// crossed midnight would have left it.
func backDate(t *testing.T, code string) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`UPDATE voucher_redemption SET created_at = created_at - interval '1 day' WHERE voucher_code = $1`,
		`UPDATE voucher_period_use SET period_start = period_start - interval '1 day', period_end = period_end - interval '1 day' WHERE voucher_code = $1`,
	} {
		if _, err := testPool.Exec(ctx, q, code); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReserve_PeriodLimitsHoldUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := New(testPool)
	t.Run("10 customers x 6 orders, CUSTOMER DAY 3", func(t *testing.T) {
		t.Parallel()
		code := newLimitedVoucher(t, s, 1000, 100, "Europe/Berlin", voucher.PeriodLimit{Scope: voucher.ScopeCustomer, Period: voucher.PeriodDay, Max: 3})
		var mu sync.Mutex
		won := map[int64]int{}
		outcomes := map[voucher.ErrorCode]int{}
		var wg sync.WaitGroup
		for c := range 10 {
			for range 6 {
				wg.Go(func() {
					_, got, _ := reserveAt(t, s, code, int64(100+c))
					mu.Lock()
					defer mu.Unlock()
					outcomes[got]++
					if got == "" {
						won[int64(100+c)]++
					}
				})
			}
		}
		wg.Wait()
		if outcomes[""] != 30 || outcomes[voucher.PeriodLimitReached] != 30 {
			t.Fatalf("60 reserves: %v, want 30 successes and 30 PERIOD_LIMIT_REACHED", outcomes)
		}
		for c, n := range won {
			if n != 3 {
				t.Errorf("customer %d took %d uses today, want 3", c, n)
			}
		}
		v, err := s.Voucher(context.Background(), code)
		if err != nil || v.UsedCount != 30 {
			t.Fatalf("usedCount %d (%v), want 30", v.UsedCount, err)
		}
	})
	t.Run("40 reserves, VOUCHER DAY 5", func(t *testing.T) {
		t.Parallel()
		code := newLimitedVoucher(t, s, 1000, 1, "", voucher.PeriodLimit{Scope: voucher.ScopeVoucher, Period: voucher.PeriodDay, Max: 5})
		var mu sync.Mutex
		outcomes := map[voucher.ErrorCode]int{}
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				_, got, _ := reserveAt(t, s, code, int64(1000+i))
				mu.Lock()
				outcomes[got]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if outcomes[""] != 5 || outcomes[voucher.PeriodLimitReached] != 35 {
			t.Fatalf("40 reserves: %v, want 5 successes and 35 PERIOD_LIMIT_REACHED", outcomes)
		}
	})
}

// A use counts in the day of its createdAt: a sale that crossed midnight
// has the old day's uses in the old day, and a release of one of them
// gives it back to the old day, not to today.
func TestRelease_GivesTheUseBackToThePeriodOfItsCreatedAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(testPool)
	code := newLimitedVoucher(t, s, 100, 100, "UTC", voucher.PeriodLimit{Scope: voucher.ScopeCustomer, Period: voucher.PeriodDay, Max: 2})
	var yesterday []string
	for range 2 {
		order, got, _ := reserveAt(t, s, code, 7)
		if got != "" {
			t.Fatalf("reserve: %s", got)
		}
		yesterday = append(yesterday, order)
	}
	if _, got, _ := reserveAt(t, s, code, 7); got != voucher.PeriodLimitReached {
		t.Fatalf("a third reserve the same day: %q, want PERIOD_LIMIT_REACHED", got)
	}
	backDate(t, code) // midnight passed: those two are yesterday's
	for range 2 {
		if _, got, _ := reserveAt(t, s, code, 7); got != "" {
			t.Fatalf("a reserve of the new day: %q, want success", got)
		}
	}
	if _, got, _ := reserveAt(t, s, code, 7); got != voucher.PeriodLimitReached {
		t.Fatalf("a third reserve of the new day: %q, want PERIOD_LIMIT_REACHED", got)
	}
	if _, released, err := s.Release(ctx, code, yesterday[0], voucher.PathDatabase); err != nil || !released {
		t.Fatalf("release: %v, %v", released, err)
	}
	// Yesterday's use came back to yesterday: today is still full.
	if _, got, _ := reserveAt(t, s, code, 7); got != voucher.PeriodLimitReached {
		t.Fatalf("a reserve after a release of yesterday's use: %q, want PERIOD_LIMIT_REACHED (the use went back to today)", got)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	want := map[string]int{
		"CUSTOMER 7 " + today.Add(-24*time.Hour).Format(time.RFC3339): 1,
		"CUSTOMER 7 " + today.Format(time.RFC3339):                    2,
	}
	if got := periodUsed(t, code); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("period counts %v, want %v", got, want)
	}
}

// Expiry and rollback give back through the same writer as release: to
// the period of the reservation's createdAt.
func TestExpiryAndRollback_GiveTheUseBackToItsOwnPeriod(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := ownDatabase(t)
	s := New(pool)
	code := strings.ToUpper(unique("PERIOD"))
	if _, err := s.CreateVoucher(ctx, voucher.NewVoucher{
		Code: code, DiscountType: voucher.DiscountFixed, DiscountAmount: 100, Currency: "USD", TotalLimit: 100, PerUserLimit: 100,
		StartsAt: time.Now().Add(-48 * time.Hour), EndsAt: time.Now().Add(48 * time.Hour),
		Restrictions: voucher.Restrictions{PeriodLimits: []voucher.PeriodLimit{{Scope: voucher.ScopeVoucher, Period: voucher.PeriodWeek, Max: 3}}},
	}); err != nil {
		t.Fatal(err)
	}
	reserve := func(ttl time.Duration) (string, error) {
		order := unique("o")
		_, _, err := s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: 1, OrderID: order, OrderAmount: 500}, ttl, voucher.PathDatabase)
		return order, err
	}
	confirmed, err := reserve(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Confirm(ctx, code, confirmed, voucher.PathDatabase); err != nil {
		t.Fatal(err)
	}
	if _, err := reserve(time.Millisecond); err != nil { // expires at once
		t.Fatal(err)
	}
	if _, err := reserve(time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := reserve(time.Hour); voucher.ErrorCodeOf(err) != voucher.PeriodLimitReached {
		t.Fatalf("a fourth reserve of the week: %v, want PERIOD_LIMIT_REACHED", err)
	}
	// Last week's now: a new week, the three uses in the old one.
	for _, q := range []string{
		`UPDATE voucher_redemption SET created_at = created_at - interval '7 days' WHERE voucher_code = $1`,
		`UPDATE voucher_period_use SET period_start = period_start - interval '7 days', period_end = period_end - interval '7 days' WHERE voucher_code = $1`,
	} {
		if _, err := pool.Exec(ctx, q, code); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := reserve(time.Hour); err != nil {
			t.Fatalf("a reserve of the new week: %v", err)
		}
	}
	if n, err := s.ExpireDue(ctx, 100); err != nil || len(n) != 1 {
		t.Fatalf("expiry: %v, %v; want the one due", n, err)
	}
	if _, rolledBack, err := s.Rollback(ctx, code, confirmed, "refund", voucher.AuditEvent{Actor: "test", ActorRole: voucher.RoleAdmin, Action: voucher.AuditRolledBack}); err != nil || !rolledBack {
		t.Fatalf("rollback: %v, %v", rolledBack, err)
	}
	var lastWeek, thisWeek int
	if err := pool.QueryRow(ctx, `SELECT
		coalesce(sum(used_count) FILTER (WHERE period_end <= now()), 0),
		coalesce(sum(used_count) FILTER (WHERE period_end > now()), 0)
		FROM voucher_period_use WHERE voucher_code = $1`, code).Scan(&lastWeek, &thisWeek); err != nil {
		t.Fatal(err)
	}
	if lastWeek != 1 || thisWeek != 3 {
		t.Fatalf("last week holds %d, this week %d; want 1 (3 less the expired and the rolled back) and 3", lastWeek, thisWeek)
	}
	if _, err := reserve(time.Hour); voucher.ErrorCodeOf(err) != voucher.PeriodLimitReached {
		t.Fatalf("a fourth reserve of this week: %v, want PERIOD_LIMIT_REACHED", err)
	}
	v, err := s.Voucher(ctx, code)
	if err != nil || v.UsedCount != 4 || v.ConfirmedCount != 0 || v.RolledBackCount != 1 {
		t.Fatalf("voucher %+v, %v: want usedCount 4, confirmedCount 0, rolledBackCount 1", v, err)
	}
}

// The refusal says when the period ends: the next midnight in the
// voucher's time zone.
func TestReserve_PeriodLimitReachedIsAvailableAtTheNextMidnightInTheZone(t *testing.T) {
	t.Parallel()
	s := New(testPool)
	code := newLimitedVoucher(t, s, 100, 100, "Asia/Kolkata", voucher.PeriodLimit{Scope: voucher.ScopeCustomer, Period: voucher.PeriodDay, Max: 1})
	before := time.Now()
	if _, got, _ := reserveAt(t, s, code, 3); got != "" {
		t.Fatalf("first reserve: %s", got)
	}
	_, _, err := reserveAt(t, s, code, 3)
	var e *voucher.Error
	if !errors.As(err, &e) || e.Code != voucher.PeriodLimitReached {
		t.Fatalf("second reserve: %v, want PERIOD_LIMIT_REACHED", err)
	}
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	y, m, d := before.In(kolkata).Date()
	if want := time.Date(y, m, d+1, 0, 0, 0, 0, kolkata); !e.AvailableAt.Equal(want) {
		t.Fatalf("availableAt %s, want %s (the next midnight in Asia/Kolkata)", e.AvailableAt, want)
	}
}

// PERIOD_LIMIT_REACHED is checked after ALREADY_USED and before
// OUT_OF_STOCK.
func TestReserve_PeriodLimitComesAfterAlreadyUsedAndBeforeOutOfStock(t *testing.T) {
	t.Parallel()
	s := New(testPool)
	code := newLimitedVoucher(t, s, 1, 1, "", voucher.PeriodLimit{Scope: voucher.ScopeVoucher, Period: voucher.PeriodMonth, Max: 1})
	if _, got, _ := reserveAt(t, s, code, 1); got != "" {
		t.Fatalf("first reserve: %s", got)
	}
	// Customer 1 holds their one use, the month is full, the voucher sold out.
	if _, got, _ := reserveAt(t, s, code, 1); got != voucher.AlreadyUsed {
		t.Errorf("the same customer: %q, want ALREADY_USED", got)
	}
	if _, got, _ := reserveAt(t, s, code, 2); got != voucher.PeriodLimitReached {
		t.Errorf("another customer: %q, want PERIOD_LIMIT_REACHED (before OUT_OF_STOCK)", got)
	}
}

// A flash gate's winner is written with the moment the gate counted its
// period limits at (ReserveRequest.PeriodAt) as its createdAt, so the
// database counts the use, and later gives it back, in the gate's period
// even when its own clock is past the period's end (a reserve at 23:59:59
// written at 00:00:00).
func TestReserveAdmitted_CountsTheUseInThePeriodTheGateCountedIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(testPool)
	code := newLimitedVoucher(t, s, 100, 100, "UTC", voucher.PeriodLimit{Scope: voucher.ScopeCustomer, Period: voucher.PeriodDay, Max: 1})
	today := time.Now().UTC().Truncate(24 * time.Hour)
	gateMoment := today.Add(-time.Second) // yesterday's last second
	order := unique("o")
	res, _, err := s.ReserveAdmitted(ctx, voucher.ReserveRequest{Code: code, CustomerID: 7, OrderID: order, OrderAmount: 500, PeriodAt: gateMoment}, time.Hour, voucher.PathGateSync)
	if err != nil {
		t.Fatal(err)
	}
	if !res.CreatedAt.Equal(gateMoment) || !res.ExpiresAt.Equal(gateMoment.Add(time.Hour)) {
		t.Errorf("createdAt %v, expiresAt %v; want the gate's %v and an hour later", res.CreatedAt, res.ExpiresAt, gateMoment)
	}
	yesterday := "CUSTOMER 7 " + today.Add(-24*time.Hour).Format(time.RFC3339)
	if got := periodUsed(t, code); fmt.Sprint(got) != fmt.Sprint(map[string]int{yesterday: 1}) {
		t.Fatalf("period counts %v, want yesterday's 1", got)
	}
	// Today has room: the use is yesterday's.
	if _, got, _ := reserveAt(t, s, code, 7); got != "" {
		t.Fatalf("a reserve of today: %q, want success", got)
	}
	if _, released, err := s.Release(ctx, code, order, voucher.PathDatabase); err != nil || !released {
		t.Fatalf("release: %v, %v", released, err)
	}
	want := map[string]int{yesterday: 0, "CUSTOMER 7 " + today.Format(time.RFC3339): 1}
	if got := periodUsed(t, code); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the release: period counts %v, want %v", got, want)
	}
}
