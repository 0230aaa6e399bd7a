package postgres

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// newWholeOrderVoucher makes a voucher whose discount is the whole order
// (PERCENT 100, no cap, no budget): its budgetUsed is the sum of the orders.
func newWholeOrderVoucher(t *testing.T, s *Store, flash bool) string {
	t.Helper()
	code := strings.ToUpper(unique("MONEY"))
	_, err := s.CreateVoucher(context.Background(), voucher.NewVoucher{
		Code: code, DiscountType: voucher.DiscountPercent, DiscountPercent: 100, Currency: "USD", TotalLimit: 100, PerUserLimit: 100,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour), Flash: flash,
	})
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func budgetUsedOf(t *testing.T, code string) (used int, budgetUsed int64) {
	t.Helper()
	if err := testPool.QueryRow(context.Background(), `SELECT used_count, budget_used FROM voucher WHERE code = $1`, code).Scan(&used, &budgetUsed); err != nil {
		t.Fatal(err)
	}
	return used, budgetUsed
}

func isSumTooLarge(err error) bool {
	e := voucher.AsError(err)
	return e.Code == voucher.InvalidInput && e.Field == "orderAmount"
}

// A reserve whose discount would take budgetUsed past voucher.MaxMoney is
// INVALID_INPUT on orderAmount and takes nothing; the one that reaches it
// exactly is held. A row stored past the bound before it existed answers
// the same, never a bigint overflow (which was INTERNAL).
func TestReserve_ADiscountPastMaxMoneyIsInvalidInputAndTakesNothing(t *testing.T) {
	ctx := context.Background()
	s := New(testPool)
	code := newWholeOrderVoucher(t, s, false)
	reserve := func(customer, amount int64) error {
		_, _, err := s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: customer, OrderID: unique("m"), OrderAmount: amount}, time.Minute, voucher.PathDatabase)
		return err
	}
	if err := reserve(1, voucher.MaxMoney-10); err != nil {
		t.Fatal(err)
	}
	if err := reserve(2, 11); !isSumTooLarge(err) {
		t.Fatalf("one past MaxMoney: %v, want INVALID_INPUT on orderAmount", err)
	}
	if used, sum := budgetUsedOf(t, code); used != 1 || sum != voucher.MaxMoney-10 {
		t.Fatalf("after the refusal: used %d, budgetUsed %d; want 1 and MaxMoney-10", used, sum)
	}
	if err := reserve(3, 10); err != nil {
		t.Fatalf("reaching MaxMoney exactly: %v", err)
	}
	if _, sum := budgetUsedOf(t, code); sum != voucher.MaxMoney {
		t.Fatalf("budgetUsed %d, want MaxMoney", sum)
	}

	legacy := newWholeOrderVoucher(t, s, false)
	if _, err := testPool.Exec(ctx, `UPDATE voucher SET budget_used = $2 WHERE code = $1`, legacy, int64(math.MaxInt64-5)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Reserve(ctx, voucher.ReserveRequest{Code: legacy, CustomerID: 1, OrderID: unique("m"), OrderAmount: 100}, time.Minute, voucher.PathDatabase); !isSumTooLarge(err) {
		t.Fatalf("a voucher stored with budgetUsed near 2^63: %v, want INVALID_INPUT on orderAmount", err)
	}
	if _, _, a, err := s.Availability(ctx, legacy, 1); err != nil || a.Room == nil || *a.Room >= 0 {
		t.Fatalf("its availability: %+v, %v; want a negative room", a, err)
	}
}

// Winners written together whose discounts would pass voucher.MaxMoney
// together are each decided alone: the first fits, the second is
// INVALID_INPUT, and nothing wraps.
func TestWriteBatch_DiscountsPastMaxMoneyTogetherAreDecidedAlone(t *testing.T) {
	s := New(testPool)
	code := newWholeOrderVoucher(t, s, true)
	half := voucher.MaxMoney/2 + 1
	var batch []*pendingWinner
	for i := range 2 {
		batch = append(batch, &pendingWinner{ctx: context.Background(), owner: code, ttl: time.Minute, path: voucher.PathGateSync, done: make(chan winnerOutcome, 1),
			r: voucher.ReserveRequest{Code: code, CustomerID: int64(i + 1), OrderID: unique("half"), OrderAmount: half}})
	}
	s.writeBatch(batch, batchSplits)
	var held, refused int
	for _, p := range batch {
		switch out := <-p.done; {
		case out.err == nil:
			held++
		case isSumTooLarge(out.err):
			refused++
		default:
			t.Errorf("a winner: %v", out.err)
		}
	}
	if held != 1 || refused != 1 {
		t.Fatalf("two halves of MaxMoney+2: %d held, %d refused; want 1 and 1", held, refused)
	}
	if used, sum := budgetUsedOf(t, code); used != 1 || sum != half {
		t.Fatalf("stored: used %d, budgetUsed %d; want 1 and %d", used, sum, half)
	}
}

// The consumer's write of an event whose discount would take budgetUsed
// past voucher.MaxMoney, or overflow a row stored before the bound, is a
// refusal (dead-lettered once), never a transient error retried for ever.
func TestApplyEvent_ASumPastMaxMoneyIsRefusedNotRetried(t *testing.T) {
	ctx := context.Background()
	s := New(testPool)
	code := newWholeOrderVoucher(t, s, true)
	event := func(discount int64) voucher.Event {
		ev := reservedEvent(code, unique("ev"), 1)
		ev.OrderAmount, ev.DiscountAmount = discount, discount
		return ev
	}
	if _, err := s.ApplyEvent(ctx, event(voucher.MaxMoney)); err != nil {
		t.Fatal(err)
	}
	var refused *voucher.EventRefusedError
	if _, err := s.ApplyEvent(ctx, event(1)); !errors.As(err, &refused) {
		t.Fatalf("one past MaxMoney: %v, want a refusal", err)
	}
	// A batch whose sum does not fit is rolled back for the consumer to
	// apply one by one.
	if _, err := s.ApplyReservedBatch(ctx, []voucher.Event{event(1), event(math.MaxInt64)}); err == nil {
		t.Fatal("a batch past MaxMoney was applied")
	}
	if used, sum := budgetUsedOf(t, code); used != 1 || sum != voucher.MaxMoney {
		t.Fatalf("stored: used %d, budgetUsed %d; want 1 and MaxMoney", used, sum)
	}

	legacy := newWholeOrderVoucher(t, s, true)
	if _, err := testPool.Exec(ctx, `UPDATE voucher SET budget_used = $2 WHERE code = $1`, legacy, int64(math.MaxInt64-5)); err != nil {
		t.Fatal(err)
	}
	ev := reservedEvent(legacy, unique("ev"), 1)
	if _, err := s.ApplyEvent(ctx, ev); !errors.As(err, &refused) {
		t.Fatalf("an event on a row stored near 2^63: %v, want a refusal", err)
	}
}
