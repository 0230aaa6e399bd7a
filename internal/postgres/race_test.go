package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// TestConfirmAndReleaseRacingTheirReserve: a confirm or a release sent
// while its order's reserve commits either finds no reservation
// (NOT_FOUND) or acts on it; it is never answered as if the order were
// released before (a release answered with the order still RESERVED) or
// expired (a confirm refused RESERVATION_RELEASED for a reservation in
// time). Found by the fault explorer: a row committed between the UPDATE
// and the read after it. Each round races them on a fresh order; the
// outcome of a round depends on the scheduling, so many rounds are run.
func TestConfirmAndReleaseRacingTheirReserve(t *testing.T) {
	s := New(testPool)
	ctx := context.Background()
	code := newFlashVoucher(t, s, 1_000_000, 1_000_000, 0)
	const rounds = 300
	for i := range rounds {
		order := fmt.Sprintf("%s-%d", code, i)
		op := "release"
		if i%2 == 1 {
			op = "confirm"
		}
		var wg sync.WaitGroup
		var reserveErr, opErr error
		var opRes voucher.Reservation
		var released bool
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			_, _, reserveErr = s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: int64(i + 1), OrderID: order, OrderAmount: 1000}, 15*time.Minute, voucher.PathDatabase)
		})
		wg.Go(func() {
			<-start
			// Many tries while the reserve runs: one of them lands between
			// its insert and its commit.
			for range 50 {
				if op == "release" {
					opRes, released, opErr = s.Release(ctx, code, order, voucher.PathDatabase)
				} else {
					opRes, opErr = s.Confirm(ctx, code, order, voucher.PathDatabase)
				}
				if voucher.ErrorCodeOf(opErr) != voucher.NotFound {
					return
				}
			}
		})
		close(start)
		wg.Wait()
		if reserveErr != nil {
			t.Fatalf("round %d: reserve: %v", i, reserveErr)
		}
		switch {
		case voucher.ErrorCodeOf(opErr) == voucher.NotFound:
		case opErr != nil:
			t.Errorf("round %d: %s racing its reserve: %v", i, op, opErr)
		case op == "release" && (!released || opRes.Status != voucher.StatusReleased):
			t.Errorf("round %d: release answered %s (released %v) racing its reserve, want RELEASED", i, opRes.Status, released)
		case op == "confirm" && opRes.Status != voucher.StatusConfirmed:
			t.Errorf("round %d: confirm answered %s racing its reserve, want CONFIRMED", i, opRes.Status)
		}
	}
}
