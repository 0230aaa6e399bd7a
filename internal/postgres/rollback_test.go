package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// rollbackFixture is a database-path service over the store with a voucher
// of a budget: a total of 2, one use a customer, a FIXED discount of 100.
type rollbackFixture struct {
	s    *Store
	svc  *voucher.Service
	code string
}

func newRollbackFixture(t *testing.T) rollbackFixture {
	t.Helper()
	s := New(testPool)
	code := strings.ToUpper(unique("RB"))
	budget := int64(1000)
	if _, err := s.CreateVoucher(context.Background(), voucher.NewVoucher{
		Code: code, DiscountType: voucher.DiscountFixed, DiscountAmount: 100, Currency: "USD", BudgetAmount: &budget,
		TotalLimit: 2, PerUserLimit: 1, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	return rollbackFixture{s: s, svc: voucher.NewService(voucher.Deps{Store: s}, voucher.Config{}), code: code}
}

// reserve holds a use for customer with a new orderId, confirmed when asked.
func (f rollbackFixture) reserve(t *testing.T, customer int64, confirm bool) voucher.ReserveRequest {
	t.Helper()
	ctx := context.Background()
	r := voucher.ReserveRequest{Code: f.code, CustomerID: customer, OrderID: unique("o"), OrderAmount: 500}
	if _, err := f.svc.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	if confirm {
		if _, err := f.svc.Confirm(ctx, f.code, r.OrderID); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// counts reads the voucher's counters and what the customer holds.
func (f rollbackFixture) counts(t *testing.T, customer int64) (v voucher.Voucher, customerUses int) {
	t.Helper()
	v, err := f.s.Voucher(context.Background(), f.code)
	if err != nil {
		t.Fatal(err)
	}
	if err := testPool.QueryRow(context.Background(), `SELECT coalesce((SELECT used_count FROM voucher_customer WHERE voucher_code = $1 AND customer_id = $2), 0)`,
		f.code, customer).Scan(&customerUses); err != nil {
		t.Fatal(err)
	}
	return v, customerUses
}

func TestRollback_AConfirmedUseGoesBackOnceToTheVoucherTheCustomerAndTheBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRollbackFixture(t)
	paid := f.reserve(t, 1, true)
	f.reserve(t, 2, true)
	if _, err := f.svc.Reserve(ctx, voucher.ReserveRequest{Code: f.code, CustomerID: 3, OrderID: unique("o"), OrderAmount: 500}); voucher.ErrorCodeOf(err) != voucher.OutOfStock {
		t.Fatalf("a third reserve of 2 uses: %v, want OUT_OF_STOCK", err)
	}

	reason := "refunded: the parcel came back"
	res, err := f.svc.Rollback(ctx, f.code, paid.OrderID, &reason)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != voucher.StatusRolledBack || res.RolledBackAt == nil || res.RollbackReason != reason {
		t.Fatalf("rolled back: status %s, rolledBackAt %v, reason %q", res.Status, res.RolledBackAt, res.RollbackReason)
	}
	v, held := f.counts(t, 1)
	if v.UsedCount != 1 || v.ConfirmedCount != 1 || v.ReservedCount != 0 || v.RolledBackCount != 1 || v.BudgetUsed != 100 || held != 0 {
		t.Fatalf("after the rollback: used %d, confirmed %d, reserved %d, rolled back %d, budgetUsed %d, customer holds %d; want 1, 1, 0, 1, 100, 0",
			v.UsedCount, v.ConfirmedCount, v.ReservedCount, v.RolledBackCount, v.BudgetUsed, held)
	}

	// Again, with or without a reason: success, unchanged, nothing given
	// back twice.
	for _, again := range []*string{nil, &reason} {
		res2, err := f.svc.Rollback(ctx, f.code, paid.OrderID, again)
		if err != nil || res2.Status != voucher.StatusRolledBack || !res2.RolledBackAt.Equal(*res.RolledBackAt) || res2.RollbackReason != reason {
			t.Fatalf("a second rollback: %+v, %v; want the first one's answer", res2, err)
		}
	}
	if v2, held2 := f.counts(t, 1); v2.UsedCount != 1 || v2.RolledBackCount != 1 || v2.BudgetUsed != 100 || held2 != 0 {
		t.Fatalf("after a second rollback: used %d, rolled back %d, budgetUsed %d, customer holds %d", v2.UsedCount, v2.RolledBackCount, v2.BudgetUsed, held2)
	}

	// The use is back for sale, and the customer's count lets them take it.
	f.reserve(t, 1, false)

	var events, audits int
	if err := testPool.QueryRow(ctx, `SELECT count(*) FROM reservation_event WHERE order_id = $1 AND kind = 'rolled_back'`, paid.OrderID).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if err := testPool.QueryRow(ctx, `SELECT count(*) FROM voucher_audit WHERE voucher_code = $1 AND action = 'rolled-back' AND detail LIKE '%' || $2 || '%' || $3`,
		f.code, paid.OrderID, reason).Scan(&audits); err != nil {
		t.Fatal(err)
	}
	if events != 1 || audits != 1 {
		t.Errorf("rolled_back events %d, audit rows with the reason %d; want 1 and 1", events, audits)
	}
}

func TestRollback_RefusesWhatIsNotConfirmed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRollbackFixture(t)
	other := newRollbackFixture(t)
	held := f.reserve(t, 1, false)
	released := f.reserve(t, 2, false)
	if _, err := f.svc.Release(ctx, f.code, released.OrderID); err != nil {
		t.Fatal(err)
	}
	paid := other.reserve(t, 3, true)
	// Past its expiresAt, not swept yet: released, as a confirm says.
	expired := other.reserve(t, 4, false)
	if _, err := testPool.Exec(ctx, `UPDATE voucher_redemption SET created_at = created_at - interval '1 hour', expires_at = now() - interval '1 second' WHERE order_id = $1`, expired.OrderID); err != nil {
		t.Fatal(err)
	}
	if _, err := other.svc.Confirm(ctx, other.code, expired.OrderID); voucher.ErrorCodeOf(err) != voucher.ReservationReleased {
		t.Fatalf("a confirm past expiresAt: %v, want RESERVATION_RELEASED", err)
	}
	tooLong := strings.Repeat("x", 201)
	empty := ""
	for _, tc := range []struct {
		desc, code, order string
		reason            *string
		want              voucher.ErrorCode
	}{
		{"RESERVED: release it instead", f.code, held.OrderID, nil, voucher.NotConfirmed},
		{"RELEASED", f.code, released.OrderID, nil, voucher.ReservationReleased},
		{"RESERVED past its expiresAt, not swept yet", other.code, expired.OrderID, nil, voucher.ReservationReleased},
		{"no such order", f.code, unique("none"), nil, voucher.NotFound},
		{"confirmed on another voucher", f.code, paid.OrderID, nil, voucher.NotFound},
		{"a reason of 201 characters", other.code, paid.OrderID, &tooLong, voucher.InvalidInput},
		{"an empty reason", other.code, paid.OrderID, &empty, voucher.InvalidInput},
	} {
		if _, err := f.svc.Rollback(ctx, tc.code, tc.order, tc.reason); voucher.ErrorCodeOf(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.desc, err, tc.want)
		}
	}
	if _, err := f.svc.Rollback(ctx, other.code, paid.OrderID, &tooLong); voucher.AsError(err).Field != "reason" {
		t.Errorf("a reason too long names field %q, want reason", voucher.AsError(err).Field)
	}
	// Nothing changed.
	if v, _ := f.counts(t, 1); v.UsedCount != 1 || v.ReservedCount != 1 || v.RolledBackCount != 0 {
		t.Errorf("after refusals: used %d, reserved %d, rolled back %d; want 1, 1, 0", v.UsedCount, v.ReservedCount, v.RolledBackCount)
	}
	if v, _ := other.counts(t, 3); v.ConfirmedCount != 1 || v.ReservedCount != 1 || v.RolledBackCount != 0 {
		t.Errorf("the other voucher after refusals: confirmed %d, reserved %d, rolled back %d; want 1, 1, 0", v.ConfirmedCount, v.ReservedCount, v.RolledBackCount)
	}
}

// Once rolled back, an order is over: a reserve retried for it is
// RESERVATION_RELEASED, a confirm too, and a release changes nothing.
func TestRollback_TheOrderCannotBeReservedOrConfirmedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRollbackFixture(t)
	paid := f.reserve(t, 1, true)
	if _, err := f.svc.Rollback(ctx, f.code, paid.OrderID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Reserve(ctx, paid); voucher.ErrorCodeOf(err) != voucher.ReservationReleased {
		t.Errorf("a reserve retried after the rollback: %v, want RESERVATION_RELEASED", err)
	}
	if _, err := f.svc.Confirm(ctx, f.code, paid.OrderID); voucher.ErrorCodeOf(err) != voucher.ReservationReleased {
		t.Errorf("a confirm after the rollback: %v, want RESERVATION_RELEASED", err)
	}
	res, err := f.svc.Release(ctx, f.code, paid.OrderID)
	if err != nil || res.Status != voucher.StatusRolledBack {
		t.Errorf("a release after the rollback: %+v, %v; want it unchanged, ROLLED_BACK", res, err)
	}
	if v, held := f.counts(t, 1); v.UsedCount != 0 || v.ConfirmedCount != 0 || v.RolledBackCount != 1 || v.BudgetUsed != 0 || held != 0 {
		t.Errorf("after reserve, confirm and release of the rolled-back order: used %d, confirmed %d, rolled back %d, budgetUsed %d, customer %d",
			v.UsedCount, v.ConfirmedCount, v.RolledBackCount, v.BudgetUsed, held)
	}
}

// Rollbacks of one order at once give its use back once, and all succeed.
func TestRollback_ConcurrentRollbacksOfAnOrderGiveItsUseBackOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRollbackFixture(t)
	paid := f.reserve(t, 1, true)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if res, err := f.svc.Rollback(ctx, f.code, paid.OrderID, nil); err != nil || res.Status != voucher.StatusRolledBack {
				t.Errorf("a concurrent rollback: %+v, %v", res, err)
			}
		})
	}
	wg.Wait()
	if v, held := f.counts(t, 1); v.UsedCount != 0 || v.RolledBackCount != 1 || v.BudgetUsed != 0 || held != 0 {
		t.Errorf("after 20 rollbacks at once: used %d, rolled back %d, budgetUsed %d, customer %d; want 0, 1, 0, 0", v.UsedCount, v.RolledBackCount, v.BudgetUsed, held)
	}
	var events int
	if err := testPool.QueryRow(ctx, `SELECT count(*) FROM reservation_event WHERE order_id = $1 AND kind = 'rolled_back'`, paid.OrderID).Scan(&events); err != nil || events != 1 {
		t.Errorf("rolled_back events %d (%v), want 1", events, err)
	}
}

// A campaign code's rollback gives the use back to the code and the
// campaign, which the code's voucher view counts as rolled back.
func TestRollback_ACampaignCodeGetsItsUseBack(t *testing.T) {
	ctx := context.Background()
	s := New(testPool)
	svc := voucher.NewService(voucher.Deps{Store: s}, voucher.Config{})
	c := newCampaign(t, s, 2)
	generateCodes(t, s, c.ID)
	var codes []string
	_ = s.CampaignCodes(ctx, c.ID, func(cc voucher.CampaignCode) error { codes = append(codes, cc.Code); return nil })
	r := voucher.ReserveRequest{Code: codes[0], CustomerID: 1, OrderID: unique("o"), OrderAmount: 500}
	if _, err := svc.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Confirm(ctx, r.Code, r.OrderID); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Rollback(ctx, strings.ToLower(r.Code), r.OrderID, nil)
	if err != nil || res.Status != voucher.StatusRolledBack || res.VoucherCode != r.Code {
		t.Fatalf("rollback of a campaign code's order: %+v, %v", res, err)
	}
	v, err := s.Voucher(ctx, r.Code)
	if err != nil {
		t.Fatal(err)
	}
	if v.UsedCount != 0 || v.ConfirmedCount != 0 || v.RolledBackCount != 1 {
		t.Errorf("the code after the rollback: used %d, confirmed %d, rolled back %d; want 0, 0, 1", v.UsedCount, v.ConfirmedCount, v.RolledBackCount)
	}
	got, _ := s.Campaign(ctx, c.ID)
	if got.Terms.UsedCount != 0 || got.Terms.RolledBackCount != 1 {
		t.Errorf("the campaign after the rollback: used %d, rolled back %d; want 0, 1", got.Terms.UsedCount, got.Terms.RolledBackCount)
	}
}

// The kafka path's consumer applies a confirmed event again after the
// rollback (a replay, or a republish by the sweep or reconciliation), and
// a released event the gate answered for the order it holds released since:
// both change nothing and neither is refused (no dead letter).
func TestApplyEvent_EventsAfterARollbackChangeNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(testPool)
	code := newFlashVoucher(t, s, 5, 1, 0)
	order := unique("o")
	reserved := reservedEvent(code, order, 1)
	confirmed := reserved
	confirmed.Kind, confirmed.ID = voucher.EventConfirmed, order+":confirmed"
	for _, ev := range []voucher.Event{reserved, confirmed} {
		if _, err := s.ApplyEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, rolledBack, err := s.Rollback(ctx, code, order, "", voucher.AuditEvent{Actor: "test", ActorRole: voucher.RoleAdmin, Action: voucher.AuditRolledBack}); err != nil || !rolledBack {
		t.Fatalf("rollback: %v %v", rolledBack, err)
	}
	released := reserved
	released.Kind, released.ID = voucher.EventReleased, order+":released"
	for _, ev := range []voucher.Event{reserved, confirmed, released} {
		if status, err := s.ApplyEvent(ctx, ev); err != nil || status != voucher.StatusRolledBack {
			t.Errorf("%s applied after the rollback: %s, %v; want ROLLED_BACK, no refusal", ev.Kind, status, err)
		}
	}
	v, err := s.Voucher(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	if v.UsedCount != 0 || v.ConfirmedCount != 0 || v.ReservedCount != 0 || v.RolledBackCount != 1 {
		t.Errorf("after the events: used %d, confirmed %d, reserved %d, rolled back %d; want 0, 0, 0, 1", v.UsedCount, v.ConfirmedCount, v.ReservedCount, v.RolledBackCount)
	}
}
