package voucher

import (
	"sync/atomic"
	"time"
)

// pace allows at most perSecond calls in each second of the clock. It takes
// no lock (x/time/rate's Limiter did, and at a sold-out crowd's 60,000
// refusals a second it was 1.5 % of the server's CPU in a profile of make
// bench's sold-out row): once a second's allowance is spent, a call is one
// clock read and one atomic load.
type pace struct {
	perSecond int64
	second    atomic.Int64 // the Unix second the count is of
	used      atomic.Int64
}

func newPace(perSecond int64) *pace { return &pace{perSecond: perSecond} }

// allow reports whether the call is within this second's allowance. The
// caller that sees a new second first starts its count; a call racing it
// may count in the second before, so a second may allow a few more.
func (p *pace) allow() bool {
	now := time.Now().Unix()
	if old := p.second.Load(); old != now && p.second.CompareAndSwap(old, now) {
		p.used.Store(0)
	}
	if p.used.Load() >= p.perSecond {
		return false
	}
	return p.used.Add(1) <= p.perSecond
}
