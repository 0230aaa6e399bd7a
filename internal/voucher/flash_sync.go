package voucher

// The sync write path of flash vouchers (FLASH_WRITE_PATH=sync, the
// default): the gate (reserve.lua) takes a use for a winner and the request
// writes it to the database, which stays the decision point after the gate.
// Confirm, release and expiry are the database's, the gate only hears of a
// use given back.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// syncFlash is the sync write path.
type syncFlash struct {
	*flashBase // the Service's
	// claims takes a winner's claim of its orderId across vouchers before
	// its write and gives it back after a refusal: the service's write path
	// (Service.flash), so the kafka path when this path serves its flash
	// campaigns, and this path itself (no claims) on the sync path.
	// NewService sets it once the write path is chosen.
	claims orderClaims
	// rebuildGrace is how long a rebuild waits, paused, for requests that
	// passed the gate to finish their write.
	rebuildGrace time.Duration
	// leakAge: Config.LeakAge (reconcileOrders).
	leakAge time.Duration
	// onlyInGate is when this instance's reconciliation first saw each
	// order held by the gate alone (gate code and orderId): a leak is an
	// order held so for a whole leakAge, measured per order, since a
	// slow write of a winner looks the same for a while.
	onlyInGate onlyInGateSince
}

// onlyInGateSince remembers since when each order has been seen only in
// its gate, pass after pass.
type onlyInGateSince struct {
	mu    sync.Mutex
	since map[[2]string]time.Time
}

// observe records the orders a pass over code saw only in the gate, forgets
// those of code it no longer sees, and returns since when each seen has
// been seen.
func (o *onlyInGateSince) observe(code string, orders []string, now time.Time) map[string]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since == nil {
		o.since = map[[2]string]time.Time{}
	}
	seen := make(map[string]time.Time, len(orders))
	for _, id := range orders {
		k := [2]string{code, id}
		t, ok := o.since[k]
		if !ok {
			t = now
			o.since[k] = t
		}
		seen[id] = t
	}
	for k := range o.since {
		if _, still := seen[k[1]]; k[0] == code && !still {
			delete(o.since, k)
		}
	}
	return seen
}

// newSyncFlash returns the sync path over base, the Service's; NewService
// sets its claims once the write path is chosen.
func newSyncFlash(base *flashBase, cfg Config) *syncFlash {
	return &syncFlash{flashBase: base, rebuildGrace: cfg.RebuildGrace, leakAge: cfg.LeakAge}
}

// reserve passes the gate first so only winners reach the database.
func (s *syncFlash) reserve(ctx context.Context, v Voucher, r ReserveRequest, path *Path) (Reservation, error) {
	now := clockNow()
	if err := v.CheckEligible(now, r); err != nil {
		return s.refusedUnlessHeld(ctx, v, r, err)
	}
	// The periods the gate counts the use in are those of this instance's
	// now, which the database then writes as the reservation's createdAt:
	// both count (and give back) the use in the same period.
	r = v.withPeriods(r, now, false)
	gk := gateCode(v) // a campaign code's campaign's gate
	if verdict, ok := s.soldOut.verdict(gk, r); ok && v.soldOutMemoryAnswers(gk) {
		*path = PathGateMemory
		return s.afterGate(ctx, v, r, verdict)
	}
	*path = PathGateSync
	// The discount on the eligible items (appliesTo), kept with the order
	// at the gate when its amount gives another (GateKeepsDiscount).
	r, discount := v.withDiscount(r)
	verdict, err := s.gate.Reserve(ctx, gk, v.PerUserLimit, discount, r)
	if err == nil && verdict == GateNotLoaded {
		if err = s.loadGate(ctx, gk); err == nil {
			verdict, err = s.gate.Reserve(ctx, gk, v.PerUserLimit, discount, r)
		}
		if err == nil && verdict == GateNotLoaded {
			return Reservation{}, Errorf(Unavailable, "the sale is starting; retry with the same orderId")
		}
	}
	if err != nil {
		if IsRefusal(err) {
			return Reservation{}, err
		}
		return Reservation{}, unavailable(err)
	}
	switch verdict {
	case GateOutOfStock:
		s.noteSoldOut(ctx, gk)
	case GatePaused:
		return Reservation{}, Errorf(Unavailable, "voucher %s is being rebuilt; retry with the same orderId", v.Code)
	}
	return s.afterGate(ctx, v, r, verdict)
}

// afterGate turns the gate's verdict into the answer.
func (s *syncFlash) afterGate(ctx context.Context, v Voucher, r ReserveRequest, verdict GateVerdict) (Reservation, error) {
	gk := gateCode(v)
	switch verdict {
	case GateAdmitted:
		// The write path's claim of the orderId across vouchers, as an
		// ordinary voucher's reserve takes it (Service.Reserve): the kafka
		// path's when this path serves its flash campaigns, nothing on the
		// sync path.
		if err := s.claims.claimOrder(ctx, r); err != nil {
			// Another voucher's order: the use goes back, and the order is
			// forgotten so a retry is decided afresh.
			if _, gerr := s.gate.Forget(ctx, gk, r.OrderID, v.DiscountOf(r)); gerr != nil {
				s.logger.ErrorContext(ctx, "gate use not given back; reconciliation will find it", "code", v.Code, "order", r.OrderID, "err", gerr)
			}
			return Reservation{}, err
		}
		s.obs.DatabaseWrite("reserve")
		res, err := s.writeAdmitted(ctx, v, gk, r)
		if err != nil {
			s.claims.unclaimOrder(ctx, r, err)
		}
		switch {
		case err == nil:
			// A success for an order the database already held keeps the
			// use too: a concurrent duplicate of this order wrote the row,
			// or the gate was loaded from a snapshot taken before the row
			// was written; either way this gate use backs it.
			return res, nil
		case errors.Is(err, ErrCodeUsedUp):
			// The database's count of the campaign code is higher than
			// the gate's: the code's use stays out, the campaign's comes
			// back (its row was not reached).
			if _, gerr := s.gate.DropCode(ctx, gk, r.OrderID, v.DiscountOf(r)); gerr != nil {
				s.logger.ErrorContext(ctx, "order refused by the database not dropped from the gate", "code", v.Code, "order", r.OrderID, "err", gerr)
			}
			return Reservation{}, err
		case ErrorCodeOf(err) == OutOfStock:
			// The database is sold out, yet the gate admitted: the gate
			// was a use too high (a rebuild raced winners in flight).
			// Giving the use back would keep it too high and send every
			// later request here; keeping it out converges the gate.
			if _, gerr := s.gate.Drop(ctx, gk, r.OrderID, v.DiscountOf(r)); gerr != nil {
				s.logger.ErrorContext(ctx, "order refused by the database not dropped from the gate", "code", v.Code, "order", r.OrderID, "err", gerr)
			}
			return Reservation{}, err
		case IsRefusal(err) && ErrorCodeOf(err) != Unavailable:
			// The database said no: the use goes back and the order is
			// forgotten, so a retry is decided afresh.
			if _, gerr := s.gate.Forget(ctx, gk, r.OrderID, v.DiscountOf(r)); gerr != nil {
				s.logger.ErrorContext(ctx, "gate use not given back; reconciliation will find it", "code", v.Code, "order", r.OrderID, "err", gerr)
			}
			return Reservation{}, err
		}
		// The outcome is unknown (the write may have committed): the use
		// stays held. A retry finds the order (DUPLICATE) and the database
		// answers it; if the write never happened, reconciliation returns
		// the use an interval later.
		return Reservation{}, unavailable(err)
	case GateDuplicate, GateReleased, GateOrderConflict:
		return s.reserveKnown(ctx, r)
	}
	return s.refusedAtGate(ctx, v, r, verdict)
}

// writeAdmitted writes a reserve the gate admitted, in its voucher's (or
// campaign's) next batch. A retry of the order meanwhile waits for this
// write (reserveKnown), however it ends.
func (s *syncFlash) writeAdmitted(ctx context.Context, v Voucher, gk string, r ReserveRequest) (Reservation, error) {
	defer s.writing.begin(r.OrderID)()
	if v.CampaignID != 0 {
		res, _, err := s.store.ReserveAdmittedCode(ctx, gk, r, s.ttl, PathGateSync)
		return res, err
	}
	res, _, err := s.store.ReserveAdmitted(ctx, r, s.ttl, PathGateSync)
	return res, err
}

// confirm and release are the database's in sync mode.
func (s *syncFlash) confirm(context.Context, string, string) (Reservation, bool, error) {
	return Reservation{}, false, nil
}

func (s *syncFlash) release(context.Context, string, string) (Reservation, bool, error) {
	return Reservation{}, false, nil
}

// beforeRollback has nothing to wait for: a confirm is written in its
// request.
func (s *syncFlash) beforeRollback(context.Context, string) error { return nil }

// expireDue has the database release what is due, then gives the uses back
// to the gate.
func (s *syncFlash) expireDue(pass context.Context, limit int) (int, error) {
	return s.expireInDatabase(pass, limit, s.releaseGate)
}

// warm loads the gate from the database if it is not loaded; a READY
// flash campaign's codes are streamed into this instance's map of them.
func (s *syncFlash) warm(ctx context.Context, code string) error {
	if err := s.loadGate(ctx, code); err != nil {
		return err
	}
	if id, ok := CampaignOfGate(code); ok {
		s.fillCampaignCodes(ctx, id)
	}
	return nil
}

// load is warm for a new voucher.
func (s *syncFlash) load(ctx context.Context, v Voucher) error {
	return s.loadGate(ctx, v.Code)
}

// loadGate loads a flash voucher's gate from the database unless it is
// loaded already.
func (s *syncFlash) loadGate(ctx context.Context, code string) error {
	// Load would refuse the snapshot of a loaded gate: one read of its stock
	// key first spares the database a snapshot of every order of every
	// live flash voucher on each warm-up pass of every instance (a test
	// database of 1,500 such vouchers made each server start cost seconds
	// of PostgreSQL's CPU).
	if _, loaded, err := s.gate.Remaining(ctx, code); err != nil {
		return unavailable(err)
	} else if loaded {
		return nil
	}
	snap, err := s.gateSnapshot(ctx, code)
	if err != nil {
		return err
	}
	loaded, err := s.gate.Load(ctx, snap)
	if err != nil {
		return unavailable(err)
	}
	if loaded {
		s.logger.InfoContext(ctx, "gate loaded from the database", "code", code, "remaining", snap.Remaining, "orders", len(snap.Orders))
	}
	return nil
}

// gateSnapshot reads what a voucher's gate must hold from the database:
// orders go to the gate without state or times, as reserve.lua writes them
// there. Released orders go too (holding no use), so that a retry of one is
// answered RESERVATION_RELEASED by a reloaded gate, even sold out, rather
// than OUT_OF_STOCK (the fault explorer found it after Redis lost its data).
func (s *syncFlash) gateSnapshot(ctx context.Context, code string) (GateSnapshot, error) {
	snap, err := s.store.GateSnapshotAll(ctx, code)
	if err != nil {
		return snap, err
	}
	for i := range snap.Orders {
		o := &snap.Orders[i]
		o.Confirmed, o.CreatedAt, o.ExpiresAt = false, time.Time{}, time.Time{}
	}
	return snap, nil
}

// rebuild waits out the requests that passed the gate before the pause,
// then replaces the gate with the database's snapshot.
func (s *syncFlash) rebuild(ctx context.Context, code string) error {
	defer s.gate.KeepPaused(ctx, code, pauseHold)()
	// Requests that passed the gate before the pause finish their write
	// within the request timeout.
	select {
	case <-time.After(s.rebuildGrace):
	case <-ctx.Done():
		return unavailable(ctx.Err())
	}
	snap, err := s.gateSnapshot(ctx, code)
	if err != nil {
		return err
	}
	if err := s.gate.Replace(ctx, snap); err != nil {
		return unavailable(err)
	}
	s.logger.InfoContext(ctx, "gate rebuilt from the database", "code", code, "remaining", snap.Remaining)
	return nil
}

// settle has nothing to wait for: every write happens in its request.
func (s *syncFlash) settle(context.Context) error { return nil }

// reconcileOrders gives back leaked uses: an order the gate admitted that
// the database has lacked, pass after pass, for longer than LeakAge (the
// process died between the gate and the write).
func (s *syncFlash) reconcileOrders(ctx context.Context, gateSnap GateSnapshot, d *DriftReport, previous DriftReport, settled bool) []string {
	if !settled {
		return nil
	}
	v, err := s.meta.get(ctx, d.VoucherCode, s.store.Voucher)
	if err != nil {
		s.logger.WarnContext(ctx, "leaked uses not returned (voucher unreadable); the next pass will", "code", d.VoucherCode, "err", err)
		return nil
	}
	discounts := make(map[string]int64, len(gateSnap.Orders))
	for _, o := range gateSnap.Orders {
		discounts[o.OrderID] = v.OrderDiscount(o)
	}
	since := s.onlyInGate.observe(d.VoucherCode, d.OrdersOnlyInGate, time.Now())
	var leaked []string
	for _, id := range d.OrdersOnlyInGate {
		if !slices.Contains(previous.OrdersOnlyInGate, id) {
			continue
		}
		// Held by the gate alone for a whole LeakAge, seen so by this
		// instance's passes (an operator's pass on another instance, or
		// just after the job's, sees it for the first time): a winner's
		// write may take up to the database's write limit, and LeakAge is
		// longer (app.go); forgetting a slow write's order would leave the
		// gate a use short of the database for good.
		if time.Since(since[id]) < s.leakAge || s.writing.has(id) {
			continue
		}
		leaked = append(leaked, id)
	}
	if len(leaked) == 0 {
		return nil
	}
	// A write that committed after this pass's database snapshot is there
	// now: read the voucher's live orders again. Only this voucher's (or
	// campaign's) live orders count: a row of the orderId released, or on
	// another voucher (its retry reserved elsewhere), holds no use of this
	// gate, which holds it for nothing (explorer run G seeds 31 and 86, run
	// I seed 31).
	now, err := s.store.GateSnapshot(ctx, d.VoucherCode)
	if err != nil {
		s.logger.WarnContext(ctx, "leaked uses not returned (database unreadable); the next pass will", "code", d.VoucherCode, "err", err)
		return nil
	}
	live := make(map[string]bool, len(now.Orders))
	for _, o := range now.Orders {
		live[o.OrderID] = true
	}
	returned := 0
	for _, id := range leaked {
		if live[id] {
			continue
		}
		// Forgotten, not released: the order holds no reservation, so a
		// retry of it must be decided afresh. Its discount goes back to
		// the budget: the one reserve.lua took (the gate's record of it,
		// else its amount's; release.lua prefers the record too).
		if _, err := s.gate.Forget(ctx, d.VoucherCode, id, discounts[id]); err != nil {
			s.logger.ErrorContext(ctx, "could not return a leaked use", "code", d.VoucherCode, "order", id, "err", err)
			continue
		}
		returned++
	}
	if returned == 0 {
		return nil
	}
	return []string{fmt.Sprintf("returned %d leaked use(s)", returned)}
}

// The database alone decides an ordinary voucher's orderId in sync mode: it
// reads every reservation, flash ones included.
func (s *syncFlash) claimOrder(context.Context, ReserveRequest) error    { return nil }
func (s *syncFlash) unclaimOrder(context.Context, ReserveRequest, error) {}

// heldInFlight: on the sync path every answered reservation is in the
// database already, so only the database's answer decides (a database that
// is down leaves the refusal UNAVAILABLE in refusedUnlessHeld).
func (s *syncFlash) heldInFlight(context.Context, string, ReserveRequest, bool) (Reservation, error, bool) {
	return Reservation{}, nil, false
}

// accepts every voucher: reserve.lua keeps the budget with the stock, and
// the database after it.
func (s *syncFlash) accepts(NewVoucher) error { return nil }

// deadLetters: none, the sync path writes the database in the request.
func (s *syncFlash) deadLetters(context.Context, int) ([]DeadLetter, error) { return nil, nil }
