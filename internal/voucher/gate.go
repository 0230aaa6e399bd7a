package voucher

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// GateVerdict is the Redis gate's atomic answer to a reserve on a flash voucher.
type GateVerdict string

// The gate's verdicts.
const (
	GateAdmitted      GateVerdict = "ADMITTED"       // one use taken for this order; write it to the database
	GateDuplicate     GateVerdict = "DUPLICATE"      // the orderId passed before with the same customer and amount
	GateReleased      GateVerdict = "RELEASED"       // the orderId passed before, same customer and amount, and was released
	GateOrderConflict GateVerdict = "ORDER_CONFLICT" // the orderId passed before with another customer or amount
	GateAlreadyUsed   GateVerdict = "ALREADY_USED"   // the customer holds perUserLimit uses
	GateOutOfStock    GateVerdict = "OUT_OF_STOCK"   // no use left
	GateNotLoaded     GateVerdict = "NOT_LOADED"     // the gate holds nothing for the voucher: warm it up
	GatePaused        GateVerdict = "PAUSED"         // an operator is rebuilding the gate: try again shortly
)

// GateOrder is an orderId the gate remembers with the values it was reserved with.
type GateOrder struct {
	OrderID     string
	CustomerID  int64
	OrderAmount int64
	Released    bool // released, and its use given back to the gate
	// In kafka mode the gate also holds the order's state and times, since
	// it decides confirm, release and expiry before the database knows
	// (kafka.go); zero in sync mode.
	Confirmed bool
	Releasing bool // released, its use kept until the database releases the row
	// Pending: admitted, not yet settled by its owner nor applied by the
	// consumer (admit.lua). Void: given back before it was ever answered.
	// Lost: the database refused its event; its use stays taken.
	Pending, Void, Lost bool
	// CreatedAt is also the admission's token in kafka mode: unique per
	// order, it names which admission a settle or an event is about.
	CreatedAt time.Time
	ExpiresAt time.Time
}

// GateStale is admit.lua's verdict for a gate another Redis server holds
// than the one it was loaded on, or that lost data: it is rebuilt first.
const (
	GateStale       GateVerdict = "STALE"
	GatePending     GateVerdict = "PENDING"      // the order's admission is still being settled by its owner
	GateAdopted     GateVerdict = "ADOPTED"      // a pending admission past its lease, now this caller's
	GateLost        GateVerdict = "LOST"         // the database refused the order's event
	GateNotEligible GateVerdict = "NOT_ELIGIBLE" // outside the window or under the minimum, on the gate's clock
	// GateClaimedElsewhere: the orderId is claimed by another voucher
	// (admit.lua claims it itself on a single Redis); nothing was taken.
	GateClaimedElsewhere GateVerdict = "CLAIMED_ELSEWHERE"
)

// Admission is admit.lua's answer: the verdict, the order as the gate holds
// it after the call, and the epoch (the id of the load) the gate was in.
type Admission struct {
	Verdict GateVerdict
	Order   GateOrder
	Epoch   string
	// Claimed: the orderId's claim across vouchers was made in the same
	// script (a single Redis), so the caller needs no ClaimOrder.
	Claimed bool
}

// SettleOp is what admission.lua does to a pending admission.
type SettleOp string

// The settle operations (admission.lua).
const (
	SettleFinalize SettleOp = "finalize" // the owner's event was acknowledged
	SettleForget   SettleOp = "forget"   // the owner's publish surely failed
	SettleVoid     SettleOp = "void"     // reconciliation: past its lease
	SettleLose     SettleOp = "lose"     // the database refused its event
)

// SettleAnswer is admission.lua's answer.
type SettleAnswer string

// The settle answers.
const (
	SettleOK    SettleAnswer = "OK"
	SettleFail  SettleAnswer = "FAIL"
	SettleStale SettleAnswer = "STALE"
)

// ApplyVerdict is the gate's word on one reserved event before the consumer
// writes it (apply_check.lua).
type ApplyVerdict string

// The apply verdicts.
const (
	ApplyStands    ApplyVerdict = "APPLY"
	ApplySkip      ApplyVerdict = "SKIP"
	ApplyUnchecked ApplyVerdict = "UNCHECKED"
)

// GateTerms are what a gate in kafka mode decides a reserve on, besides
// stock and customers: loaded with every snapshot (load.lua).
type GateTerms struct {
	Epoch          string    // this load's id
	StartsAt       time.Time // the window, on the database's clock
	EndsAt         time.Time
	DatabaseNow    time.Time // the database's clock when the snapshot was read
	MinOrderAmount int64
	TTL            time.Duration // how long a reservation is held
	Lease          time.Duration // how long an owner has to settle its admission
}

// GateSnapshot is what the gate of one flash voucher holds: the remaining
// uses, the uses held per customer and the orders that passed.
type GateSnapshot struct {
	Code         string
	Remaining    int
	PerUserLimit int
	Customers    map[int64]int
	Orders       []GateOrder
	// ExpireAt is when the gate may forget the voucher (after its window).
	ExpireAt time.Time
	// TakenAt is the database's clock when the snapshot was read.
	TakenAt time.Time
	// Epoch is the id of the load the gate holds (kafka mode).
	Epoch string
}

// Gate is the Redis gate of flash vouchers: each call is one atomic script.
type Gate interface {
	// Reserve decides one reserve: duplicate orderId, per-customer count, stock.
	Reserve(ctx context.Context, code string, perUserLimit int, r ReserveRequest) (GateVerdict, error)
	// Release gives the order's use back if the gate holds it live; false when
	// it did not (unknown or already released), so nothing is given back twice.
	Release(ctx context.Context, code, orderID string) (bool, error)
	// Forget gives a live order's use back like Release but deletes the
	// order, so a retry of it is decided from scratch.
	Forget(ctx context.Context, code, orderID string) (bool, error)
	// Load installs a snapshot atomically unless the gate already holds the
	// voucher; false when it did, so two instances warming at once load once.
	Load(ctx context.Context, snap GateSnapshot) (bool, error)
	// Snapshot reads what the gate holds for a voucher; ok is false when it
	// holds nothing.
	Snapshot(ctx context.Context, code string) (snap GateSnapshot, ok bool, err error)
	// Remaining reads the gate's counter; ok is false when it holds nothing.
	Remaining(ctx context.Context, code string) (n int, ok bool, err error)
	// Unload forgets a voucher so the next warm-up rebuilds it from the database.
	Unload(ctx context.Context, code string) error
	// Lower takes up to n uses off the counter (never below zero) and returns
	// what remains: reconciliation's only automatic repair of the count.
	Lower(ctx context.Context, code string, n int) (int, error)
	// Pause makes Reserve answer PAUSED until Replace.
	Pause(ctx context.Context, code string) error
	// Replace installs a snapshot over whatever the gate holds and lifts a pause.
	Replace(ctx context.Context, snap GateSnapshot) error

	// The calls of the Kafka write path (kafka.go).

	// ReserveTimed is Reserve remembering the order as live with its times.
	ReserveTimed(ctx context.Context, code string, perUserLimit int, r ReserveRequest, createdAt, expiresAt time.Time) (GateVerdict, error)
	// Order reads what the gate remembers of an order; ok is false when it
	// does not know the order or holds nothing for the voucher.
	Order(ctx context.Context, code, orderID string) (o GateOrder, ok bool, err error)
	// Confirm decides a confirm at now (kafka mode).
	Confirm(ctx context.Context, code, orderID string, now time.Time) (GateDecision, GateOrder, error)
	// MarkReleased decides a release (expireOnly: an expiry, only once past
	// expiresAt) at now, keeping the use until the database releases the row.
	MarkReleased(ctx context.Context, code, orderID string, now time.Time, expireOnly bool) (GateDecision, GateOrder, error)
	// ClaimOrder claims an orderId for a voucher across vouchers and returns
	// the voucher holding the claim (code itself when it was free or ours).
	ClaimOrder(ctx context.Context, orderID, code string) (owner string, err error)
	// UnclaimOrder drops the voucher's claim on an orderId, if it holds it.
	UnclaimOrder(ctx context.Context, orderID, code string) error
	// OrderOwner reads the voucher holding the claim on an orderId.
	OrderOwner(ctx context.Context, orderID string) (owner string, ok bool, err error)

	// Admit decides a reserve in kafka mode (admit.lua).
	Admit(ctx context.Context, code string, r ReserveRequest) (Admission, error)
	// Settle settles a pending admission made in epoch (admission.lua); the
	// order is as the gate holds it after the call.
	Settle(ctx context.Context, code string, op SettleOp, o GateOrder, epoch string) (SettleAnswer, GateOrder, error)
	// ApplyCheck asks the gate which reserved events of one voucher stand
	// (apply_check.lua), one verdict per event.
	ApplyCheck(ctx context.Context, code string, evs []Event) ([]ApplyVerdict, error)
	// Recover installs a snapshot with its kafka-mode terms: mode "recover"
	// only when the gate is not loaded or stale, "replace" over it (a
	// rebuild; a retried call with the same epoch changes nothing), "load"
	// only when nothing is loaded. false when nothing was installed.
	Recover(ctx context.Context, snap GateSnapshot, terms GateTerms, mode string) (bool, error)
	// Healthy reports whether the gate holds the voucher, loaded on the
	// Redis server that now serves it and not marked as having lost data.
	Healthy(ctx context.Context, code string) (bool, error)
	// AnnounceReleased tells every instance that a use of the voucher was
	// given back, so each drops its sold-out snapshot of it.
	AnnounceReleased(ctx context.Context, code string) error
}

// PendingWrites is the Kafka write path's view of admitted reserves whose
// database write is still on its way.
type PendingWrites interface {
	// Settle waits until every write produced before the call is applied.
	Settle(ctx context.Context) error
}

// GateRemaining reads the gate's counter of a flash voucher; ok is false when
// the voucher is not flash or the gate holds nothing for it. Errors: UNAVAILABLE.
func (s *Service) GateRemaining(ctx context.Context, v Voucher) (n int, ok bool, err error) {
	if !v.Flash || s.gate == nil {
		return 0, false, nil
	}
	n, ok, err = s.gate.Remaining(ctx, v.Code)
	if err != nil {
		return 0, false, unavailable(err)
	}
	return n, ok, nil
}

// WarmGate loads a flash voucher's gate from the database unless it is loaded
// already. The load is atomic and never raises a loaded gate, so it is safe at
// any time from any number of instances. Errors: NOT_FOUND, UNAVAILABLE.
func (s *Service) WarmGate(ctx context.Context, code string) error {
	if s.kafka != nil {
		return s.warmGateKafka(ctx, code)
	}
	return s.loadGate(ctx, code)
}

// loadGate loads a flash voucher's gate from the database unless it is
// loaded already.
func (s *Service) loadGate(ctx context.Context, code string) error {
	if s.gate == nil {
		return nil
	}
	if s.kafka != nil {
		// Only a voucher no event can exist for yet (a new one) is loaded
		// here; every other load goes through the consumer's marker.
		v, err := s.store.Voucher(ctx, code)
		if err != nil {
			return err
		}
		_, err = s.loadKafkaGate(ctx, v, "load", "")
		return err
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

// reserveFlash passes the gate first so only winners reach the database.
func (s *Service) reserveFlash(ctx context.Context, v Voucher, r ReserveRequest, path *Path) (Reservation, error) {
	if err := v.CheckEligible(time.Now(), r.OrderAmount); err != nil {
		return Reservation{}, err
	}
	if verdict, ok := s.soldOut.verdict(v.Code, r); ok {
		*path = PathGateMemory
		return s.afterGate(ctx, v, r, verdict)
	}
	*path = PathGateSync
	verdict, err := s.gate.Reserve(ctx, v.Code, v.PerUserLimit, r)
	if err == nil && verdict == GateNotLoaded {
		if err = s.WarmGate(ctx, v.Code); err == nil {
			verdict, err = s.gate.Reserve(ctx, v.Code, v.PerUserLimit, r)
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
		s.noteSoldOut(ctx, v.Code)
	case GatePaused:
		return Reservation{}, Errorf(Unavailable, "voucher %s is being rebuilt; retry with the same orderId", v.Code)
	}
	return s.afterGate(ctx, v, r, verdict)
}

// afterGate turns the gate's verdict into the answer.
func (s *Service) afterGate(ctx context.Context, v Voucher, r ReserveRequest, verdict GateVerdict) (Reservation, error) {
	switch verdict {
	case GateAdmitted:
		s.obs.DatabaseWrite("reserve")
		res, _, err := s.store.ReserveAdmitted(ctx, r, s.ttl, PathGateSync)
		switch {
		case err == nil:
			// A success for an order the database already held keeps the
			// use too: a concurrent duplicate of this order wrote the row,
			// or the gate was loaded from a snapshot taken before the row
			// was written; either way this gate use backs it.
			return res, nil
		case IsRefusal(err) && ErrorCodeOf(err) != Unavailable:
			// The database said no: the use goes back and the order is
			// forgotten, so a retry is decided afresh.
			if _, gerr := s.gate.Forget(ctx, v.Code, r.OrderID); gerr != nil {
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
		// The order passed the gate before: the database has the answer and
		// takes no second use for an identical retry. A duplicate whose
		// first request died before its write writes it now, backed by the
		// use the gate took then.
		s.obs.DatabaseWrite("reserve")
		res, _, err := s.store.Reserve(ctx, r, s.ttl, PathGateSync)
		if err != nil && !IsRefusal(err) {
			return Reservation{}, unavailable(err)
		}
		return res, err
	case GateAlreadyUsed:
		return Reservation{}, Errorf(AlreadyUsed, "customer %d already holds %d use(s) of voucher %s", r.CustomerID, v.PerUserLimit, v.Code)
	case GateOutOfStock:
		return Reservation{}, Errorf(OutOfStock, "voucher %s is sold out", v.Code)
	}
	return Reservation{}, Errorf(Unavailable, "the gate gave no answer; retry with the same orderId")
}

// gateGiveBackTimeout bounds giving one released use back to the gate,
// retries included; the gate's own calls fail within about a second when
// Redis is unwell.
const gateGiveBackTimeout = 5 * time.Second

// releaseGate gives a released flash use back to the gate. A failure leaves
// the gate too low (undersell), which reconciliation repairs.
func (s *Service) releaseGate(ctx context.Context, res Reservation) {
	if s.gate == nil {
		return
	}
	// The database's release has committed: the give-back is owed whatever
	// happens to the caller. The expiry sweep in particular calls this at
	// the end of a pass whose deadline may have passed, which left released
	// uses out of the gate until reconciliation.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gateGiveBackTimeout)
	defer cancel()
	var v Voucher
	err := retryBriefly(ctx, func() (err error) {
		v, err = s.meta.get(ctx, res.VoucherCode, s.store.Voucher)
		return err
	})
	if err != nil {
		s.logger.WarnContext(ctx, "gate use not given back (voucher unreadable); reconciliation will find it", "code", res.VoucherCode, "order", res.OrderID, "err", err)
		return
	}
	if !v.Flash {
		return
	}
	s.useBack(ctx, res.VoucherCode, res.OrderID)
}

// retryBriefly runs fn again after a transient failure, with short pauses,
// until it succeeds, a refusal ends it, or ctx ends: for the give-back of a
// released use, idempotent and owed, which a loaded Redis or database would
// otherwise leave to reconciliation (an undersell for two intervals).
func retryBriefly(ctx context.Context, fn func() error) error {
	pause := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil || (IsRefusal(err) && ErrorCodeOf(err) != Unavailable) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, 400*time.Millisecond)
	}
}

// useBack gives a released order's use back to the gate, once, and makes it
// sellable at once: this instance drops its sold-out snapshot of the voucher
// and the others are told to (Gate.AnnounceReleased), so a released use sells
// again now rather than when the snapshots lapse.
func (s *Service) useBack(ctx context.Context, code, orderID string) {
	var back bool
	err := retryBriefly(ctx, func() (err error) {
		back, err = s.gate.Release(ctx, code, orderID) // idempotent: once only
		return err
	})
	if err != nil {
		s.logger.WarnContext(ctx, "gate use not given back; reconciliation will find it", "code", code, "order", orderID, "err", err)
		return
	}
	if !back {
		return
	}
	s.soldOut.forget(code)
	if err := s.gate.AnnounceReleased(ctx, code); err != nil {
		// The other instances' snapshots lapse within SoldOutTTL anyway.
		s.logger.WarnContext(ctx, "release not announced to the other instances", "code", code, "err", err)
	}
}

// SoldOutLapsed drops this instance's sold-out snapshot of a voucher: another
// instance gave a use back (Gate.AnnounceReleased), so the next reserve asks
// the gate again.
func (s *Service) SoldOutLapsed(code string) { s.soldOut.forget(code) }

// noteSoldOut remembers, for a few seconds, which orders and customers the
// gate of a sold-out voucher knows, so the late crowd is answered from memory
// with the same verdicts the gate would give (retries still find their
// reservation, customers at their limit still get ALREADY_USED).
func (s *Service) noteSoldOut(ctx context.Context, code string) {
	if !s.soldOut.enabled() || s.soldOut.fresh(code) {
		return
	}
	// One snapshot per voucher at a time, however many requests hear
	// OUT_OF_STOCK while it is taken.
	_, _, _ = s.soldOut.flight.Do(code, func() (any, error) {
		if s.soldOut.fresh(code) {
			return nil, nil
		}
		snap, ok, err := s.gate.Snapshot(ctx, code)
		if err == nil && ok && snap.Remaining <= 0 {
			s.soldOut.put(snap)
		}
		return nil, err
	})
}

func unavailable(err error) error {
	if IsRefusal(err) {
		return err
	}
	return &Error{Code: Unavailable, Message: "a dependency is unavailable; retry with the same orderId (a retry never takes a second use)", Cause: err}
}

// soldOutCache holds recent snapshots of sold-out gates.
type soldOutCache struct {
	ttl    time.Duration
	mu     sync.Mutex
	m      map[string]soldOutEntry
	flight singleflight.Group
}

type soldOutEntry struct {
	until     time.Time
	orders    map[string]GateOrder
	customers map[int64]int
	limit     int
}

func newSoldOutCache(ttl time.Duration) *soldOutCache {
	return &soldOutCache{ttl: ttl, m: make(map[string]soldOutEntry)}
}

func (c *soldOutCache) enabled() bool { return c.ttl > 0 }

func (c *soldOutCache) forget(code string) {
	c.mu.Lock()
	delete(c.m, code)
	c.mu.Unlock()
}

func (c *soldOutCache) fresh(code string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[code]
	return ok && time.Now().Before(e.until)
}

func (c *soldOutCache) put(snap GateSnapshot) {
	orders := make(map[string]GateOrder, len(snap.Orders))
	for _, o := range snap.Orders {
		orders[o.OrderID] = o
	}
	c.mu.Lock()
	c.m[snap.Code] = soldOutEntry{until: time.Now().Add(c.ttl), orders: orders, customers: snap.Customers, limit: snap.PerUserLimit}
	c.mu.Unlock()
}

// verdict answers as the gate would from a fresh sold-out snapshot.
func (c *soldOutCache) verdict(code string, r ReserveRequest) (GateVerdict, bool) {
	if !c.enabled() {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[code]
	if !ok || time.Now().After(e.until) {
		return "", false
	}
	if o, ok := e.orders[r.OrderID]; ok {
		switch {
		case o.CustomerID != r.CustomerID || o.OrderAmount != r.OrderAmount:
			return GateOrderConflict, true
		case o.Released:
			return GateReleased, true
		}
		return GateDuplicate, true
	}
	if e.customers[r.CustomerID] >= e.limit {
		return GateAlreadyUsed, true
	}
	return GateOutOfStock, true
}

// WarmGates loads the gate of every flash voucher that has not ended, unless
// it is loaded already. Errors: UNAVAILABLE.
func (s *Service) WarmGates(ctx context.Context) error {
	if s.gate == nil {
		return nil
	}
	vouchers, err := s.store.FlashVouchers(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	if s.kafka != nil {
		live := vouchers[:0]
		for _, v := range vouchers {
			if !now.After(v.EndsAt) {
				live = append(live, v)
			}
		}
		return s.warmGatesKafka(ctx, live)
	}
	for _, v := range vouchers {
		if now.After(v.EndsAt) {
			continue
		}
		if err := s.WarmGate(ctx, v.Code); err != nil {
			return err
		}
	}
	return nil
}
