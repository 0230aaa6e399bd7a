package voucher

import (
	"context"
	"sync"
	"time"
)

// claimFence decides when a claim found free (order_claim.lua, admit.lua)
// may be trusted in kafka mode.
//
// An orderId admitted on a flash voucher reaches the database only when the
// consumer applies its event; until then only its claim in Redis says it is
// taken. A Redis server that restarted without its data, or a replica
// promoted after a failover, has lost the claims of the events still in
// flight, so on it "free" may be wrong: an ordinary reserve of the orderId
// would find no claim and no row, be written and answered 201, and the flash
// winner's event, answered 201 before it, would be dead-lettered (explorer
// seeds 37, 126, 168). The fence closes that window: the first time this
// process sees a Redis server (its run_id), and each time Redis does not
// answer at all, a claim is trusted only after the events published until
// then are applied (PendingWrites.Settle), so the database holds every order
// whose claim may have gone, and its primary key refuses the second write.
//
// Each run_id costs one settle per process, waited for by the claims that
// see it first (tens of milliseconds without lag); requests after it check a
// map.
type claimFence struct {
	settle func(context.Context) error

	mu sync.Mutex
	// seen is when this process first saw each Redis server.
	seen map[string]time.Time
	// settledFrom is when the last settle that succeeded began: every event
	// published before then is applied.
	settledFrom time.Time
	run         *settleRun // the settle in flight, if any
}

type settleRun struct {
	began time.Time
	done  chan struct{}
	err   error
}

// claimSettleTimeout bounds one settle of the fence; a request waits for it
// at most its own bound (KafkaPath's publish timeout).
const claimSettleTimeout = 30 * time.Second

func newClaimFence(settle func(context.Context) error) *claimFence {
	return &claimFence{settle: settle, seen: map[string]time.Time{}}
}

// wait returns once a claim read on server may be trusted: every event
// published before this process first saw server is applied. server ""
// (Redis did not answer, so no claim was read) needs every event published
// before now applied.
func (f *claimFence) wait(ctx context.Context, server string) error {
	f.mu.Lock()
	need := time.Now()
	if server != "" {
		if t, ok := f.seen[server]; ok {
			need = t
		} else {
			f.seen[server] = need
		}
	}
	for {
		if !f.settledFrom.Before(need) {
			f.mu.Unlock()
			return nil
		}
		run := f.run
		if run == nil {
			run = &settleRun{began: time.Now(), done: make(chan struct{})}
			f.run = run
			go f.settleOnce(run) //nolint:gosec // G118: one settle for every waiter, so no one caller's end may cancel it; it is bounded by claimSettleTimeout
		}
		f.mu.Unlock()
		select {
		case <-run.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if run.err != nil && !run.began.Before(need) {
			return run.err
		}
		f.mu.Lock()
	}
}

// trusted reports whether a claim read on server may be trusted now
// without waiting: this process saw server before, and every event
// published before then is applied.
func (f *claimFence) trusted(server string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.seen[server]
	return ok && server != "" && !f.settledFrom.Before(t)
}

// settleOnce runs one settle for every waiter; a settle that began before a
// waiter's need is followed by another.
func (f *claimFence) settleOnce(run *settleRun) {
	ctx, cancel := context.WithTimeout(context.Background(), claimSettleTimeout)
	defer cancel()
	run.err = f.settle(ctx)
	f.mu.Lock()
	if run.err == nil && run.began.After(f.settledFrom) {
		f.settledFrom = run.began
	}
	f.run = nil
	f.mu.Unlock()
	close(run.done)
}
