package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// TestExtendVoucher_TheUpdateItselfKeepsTheRules calls the store directly,
// past the domain's first check: the conditional UPDATE alone refuses a
// total below what is held, a lower total for a flash voucher, an earlier
// end and an ended voucher, writing nothing (no audit row either); and an
// extension racing reserves never leaves the total below what they hold.
func TestExtendVoucher_TheUpdateItselfKeepsTheRules(t *testing.T) {
	ctx := context.Background()
	s := New(testPool)
	audit := func(before, after voucher.Voucher) voucher.AuditEvent {
		return voucher.AuditEvent{VoucherCode: after.Code, Actor: "test", ActorRole: voucher.RoleAdmin, Action: voucher.AuditExtended, Detail: "x"}
	}
	code := newFlashVoucher(t, s, 10, 1, 0)
	for i := range 4 {
		if _, _, err := s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: int64(i + 1), OrderID: unique("ext"), OrderAmount: 500}, time.Hour, voucher.PathGateSync); err != nil {
			t.Fatal(err)
		}
	}
	v, err := s.Voucher(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		total     int
		ends      time.Time
		wantCode  voucher.ErrorCode
		wantField string
	}{
		{3, v.EndsAt, voucher.InvalidInput, "totalLimit"},                // below the 4 held
		{9, v.EndsAt, voucher.InvalidInput, "totalLimit"},                // a flash total going down
		{10, v.EndsAt.Add(-time.Minute), voucher.InvalidInput, "endsAt"}, // earlier
	} {
		_, _, err := s.ExtendVoucher(ctx, code, c.total, c.ends, audit)
		if e := voucher.AsError(err); e.Code != c.wantCode || e.Field != c.wantField {
			t.Errorf("ExtendVoucher(total %d, ends %v): %v, want %s on %s", c.total, c.ends, err, c.wantCode, c.wantField)
		}
	}
	after, _ := s.Voucher(ctx, code)
	if after.TotalLimit != 10 || !after.EndsAt.Equal(v.EndsAt) {
		t.Errorf("the refusals changed the voucher: %+v", after)
	}
	var n int
	if err := testPool.QueryRow(ctx, `SELECT count(*) FROM voucher_audit WHERE voucher_code = $1 AND action = 'extended'`, code).Scan(&n); err != nil || n != 0 {
		t.Errorf("audit rows after the refusals: %d (%v), want 0", n, err)
	}
	before, got, err := s.ExtendVoucher(ctx, code, 12, v.EndsAt.Add(time.Hour), audit)
	if err != nil || before.TotalLimit != 10 || !before.EndsAt.Equal(v.EndsAt) || got.TotalLimit != 12 || !got.EndsAt.Equal(v.EndsAt.Add(time.Hour)) {
		t.Errorf("an extension: before %+v after %+v, %v", before, got, err)
	}

	// An ordinary voucher lowered while reserves run: the total is never
	// below what is held, whichever commits first.
	ordinary := strings.ToUpper(unique("EXTO"))
	if _, err := s.CreateVoucher(ctx, voucher.NewVoucher{Code: ordinary, DiscountType: voucher.DiscountFixed, DiscountAmount: 100, Currency: "USD",
		TotalLimit: 50, PerUserLimit: 1, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			_, _, _ = s.Reserve(ctx, voucher.ReserveRequest{Code: ordinary, CustomerID: int64(i + 1), OrderID: unique("race"), OrderAmount: 500}, time.Hour, voucher.PathDatabase)
		})
	}
	lowered := 0
	for total := 49; total >= 1; total-- {
		if _, _, err := s.ExtendVoucher(ctx, ordinary, total, time.Now().Add(2*time.Hour), audit); err == nil {
			lowered = total
		}
	}
	wg.Wait()
	final, _ := s.Voucher(ctx, ordinary)
	if final.UsedCount > final.TotalLimit || final.TotalLimit != lowered {
		t.Errorf("after lowering while reserving: %d used of %d (last lowered to %d)", final.UsedCount, final.TotalLimit, lowered)
	}
}
