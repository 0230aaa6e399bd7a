package postgres

import (
	"context"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// TestUseRefused_AUseBackSinceTheUpdateIsStillOutOfStock: a reserve's
// conditional update found no use left, and a release committed before the
// row was read again to say why. The voucher is valid for hours: the
// answer is OUT_OF_STOCK, as the update saw it, never NOT_ELIGIBLE, which
// only a closed window gives. Before, a row with a use left and a budget to
// cover the discount was taken for a window that had closed (explorer seed
// 170: 422 NOT_ELIGIBLE at the sold-out moment of a sale).
func TestUseRefused_AUseBackSinceTheUpdateIsStillOutOfStock(t *testing.T) {
	ctx := context.Background()
	s := New(testPool)
	code := newFlashVoucher(t, s, 5, 1, 0) // 5 uses left, valid from an hour ago to in an hour
	now := time.Now()
	if err := useRefused(ctx, s.q, code, code, 100, now); voucher.ErrorCodeOf(err) != voucher.OutOfStock {
		t.Errorf("a refused update, the row showing a use left since: %v, want OUT_OF_STOCK", err)
	}
	if err := useRefused(ctx, s.q, code, code, 100, now.Add(2*time.Hour)); voucher.ErrorCodeOf(err) != voucher.NotEligible {
		t.Errorf("a refused update past the voucher's end: %v, want NOT_ELIGIBLE", err)
	}
	if err := useRefused(ctx, s.q, code, code, 100, now.Add(-2*time.Hour)); voucher.ErrorCodeOf(err) != voucher.NotEligible {
		t.Errorf("a refused update before the voucher's start: %v, want NOT_ELIGIBLE", err)
	}
}
