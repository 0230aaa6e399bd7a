package voucher

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestPace_AllowsItsRateAndNoMore: many callers at once get at most the
// allowance of the seconds they span (one, or two at a boundary), and at
// least one second's.
func TestPace_AllowsItsRateAndNoMore(t *testing.T) {
	const perSecond = 200
	p := newPace(perSecond)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if p.allow() {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n < perSecond || n > 2*perSecond+8 {
		t.Errorf("8 x 1,000 calls allowed %d, want %d (one second) to about %d (two)", n, perSecond, 2*perSecond)
	}
}
