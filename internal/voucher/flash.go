package voucher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// flashPath is how the service carries out what is decided about a flash
// voucher: chosen once in NewService, the sync write path (flash_sync.go:
// the gate decides, the database writes in the request) or the Kafka write
// path (flash_kafka.go: the gate decides everything, events carry it to the
// database). Without a gate it is databaseOnly (flash_database.go): flash
// vouchers take the database path like ordinary ones.
type flashPath interface {
	// reserveTerms reads the terms a reserve of code takes and whether this
	// path decides it (a flash voucher's, or a READY flash campaign's code);
	// false: the database reserves it as an ordinary voucher.
	reserveTerms(ctx context.Context, code string) (v Voucher, flash bool, err error)
	// reserve decides a reserve of a flash voucher; path is set to the path
	// the answer took (for metrics).
	reserve(ctx context.Context, v Voucher, r ReserveRequest, path *Path) (Reservation, error)
	// confirm and release decide at the gate; decided is false when the
	// database decides (not a flash voucher, or an order the gate leaves to
	// it).
	confirm(ctx context.Context, code, orderID string) (res Reservation, decided bool, err error)
	release(ctx context.Context, code, orderID string) (res Reservation, decided bool, err error)
	// beforeRollback waits, for a rollback of code's order, until the
	// database holds every confirm answered before it (the database
	// decides a rollback on every path).
	beforeRollback(ctx context.Context, code string) error
	// expireDue releases up to limit reservations past their deadline and
	// returns how many it released.
	expireDue(ctx context.Context, limit int) (int, error)
	// warm loads a live flash voucher's gate (code) unless it is loaded.
	warm(ctx context.Context, code string) error
	// load loads the gate of a voucher just created (no admission of it can
	// be in flight).
	load(ctx context.Context, v Voucher) error
	// rebuild reloads a paused gate from the database.
	rebuild(ctx context.Context, code string) error
	// settle waits until the writes already on their way have reached the
	// database, so reconciliation does not take them for leaks.
	settle(ctx context.Context) error
	// reconcileOrders repairs the orders only the gate holds
	// (d.OrdersOnlyInGate) and may raise d.Alert; settled is false when the
	// writes in flight could not be waited for. It returns what it changed.
	reconcileOrders(ctx context.Context, gateSnap GateSnapshot, d *DriftReport, previous DriftReport, settled bool) []string
	orderClaims
	ordersInFlight
	// accepts refuses (INVALID_INPUT) the terms of a flash voucher this
	// path cannot keep.
	accepts(n NewVoucher) error
	// fillCampaignCodes streams a READY flash campaign's codes into this
	// instance's routing (reserveTerms).
	fillCampaignCodes(ctx context.Context, id int64)
	// deadLetters lists the latest events the database refused, newest
	// first: the kafka path's consumer's; none on a path without one.
	deadLetters(ctx context.Context, limit int) ([]DeadLetter, error)
}

// orderClaims is the part of a flash write path that claims an orderId
// across vouchers.
type orderClaims interface {
	// claimOrder takes the orderId's claim across vouchers for r.Code before
	// a write in the request (an ordinary voucher's, a flash campaign
	// code's): ORDER_CONFLICT when another voucher holds it; unclaimOrder
	// gives it back after the write was refused with err.
	claimOrder(ctx context.Context, r ReserveRequest) error
	unclaimOrder(ctx context.Context, r ReserveRequest, err error)
}

// ordersInFlight is the part of a flash write path that knows the orders
// whose write is still on its way to the database.
type ordersInFlight interface {
	// heldInFlight answers, for an orderId the database does not hold (or
	// could not say: uncertain), a reserve on code of an order another
	// voucher holds with its write still on its way (kafka mode: the claim
	// and the owner's gate); decided is false when the claims say nothing.
	heldInFlight(ctx context.Context, code string, r ReserveRequest, uncertain bool) (res Reservation, err error, decided bool)
}

// flashBase is what the service and both flash write paths share (the store
// and the gate, this process's memories of them, the answers every path
// gives alike), so that each path is given these and not the whole Service.
type flashBase struct {
	store  Store
	gate   Gate // nil: flash vouchers take the database path too
	ttl    time.Duration
	logger *slog.Logger
	obs    Observer

	meta    *metadataCache
	soldOut *soldOutCache
	// heldChecks paces refusedUnlessHeld's questions to the database.
	heldChecks *pace
	// flashCodes maps the codes of READY flash campaigns to their campaign.
	flashCodes *flashCodes
	// writing holds the gate-admitted orders whose database write is in
	// flight in this process (the sync path's).
	writing *writesInFlight
	// inFlight is the service's flash write path (Service.flash), asked by
	// refusedUnlessHeld about an order on its way elsewhere. It is set in
	// NewService once that path is chosen, after the paths (which take
	// this struct) are made; no request runs before.
	inFlight ordersInFlight
}

// checkTerms refuses a voucher's terms that the flash write path cannot
// keep; nil for any voucher that is not flash.
func (s *Service) checkTerms(n NewVoucher) error {
	if !n.Flash {
		return nil
	}
	return s.flash.accepts(n)
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
	v, err := s.store.Voucher(ctx, code)
	if err != nil {
		return err
	}
	gk := gateCode(v) // a campaign code's campaign's gate
	return s.flashFor(gk).warm(ctx, gk)
}

// WarmGates loads the gate of every flash voucher that has not ended, unless
// it is loaded already. Errors: UNAVAILABLE.
func (s *Service) WarmGates(ctx context.Context) error {
	_, err := s.warmGates(ctx)
	return err
}

// warmGates is WarmGates that counts the gates it looked at (loaded now or
// before).
func (s *Service) warmGates(ctx context.Context) (int, error) {
	if s.gate == nil {
		return 0, nil // no gate to look at
	}
	vouchers, err := s.store.FlashVouchers(ctx)
	if err != nil {
		return 0, err
	}
	now := clockNow()
	n := 0
	for _, v := range vouchers {
		if now.After(v.EndsAt) {
			continue
		}
		if err := s.flashFor(v.Code).warm(ctx, v.Code); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// writesInFlight is the set of orders whose gate-admitted database write
// has begun in this process and not yet ended, each with a channel closed
// when it ends.
type writesInFlight struct {
	mu     sync.Mutex
	orders map[string]chan struct{}
}

func newWritesInFlight() *writesInFlight {
	return &writesInFlight{orders: map[string]chan struct{}{}}
}

// begin marks orderID's write as in flight until end is called; a write of
// an order already in flight is not marked twice (end does nothing then).
func (w *writesInFlight) begin(orderID string) (end func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.orders[orderID]; ok {
		return func() {}
	}
	done := make(chan struct{})
	w.orders[orderID] = done
	return func() {
		w.mu.Lock()
		delete(w.orders, orderID)
		w.mu.Unlock()
		close(done)
	}
}

// has reports whether a write of orderID is in flight in this process.
func (w *writesInFlight) has(orderID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.orders[orderID]
	return ok
}

// wait returns once no write of orderID is in flight, or with ctx's error.
func (w *writesInFlight) wait(ctx context.Context, orderID string) error {
	w.mu.Lock()
	done, ok := w.orders[orderID]
	w.mu.Unlock()
	if !ok {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reserveKnown answers a reserve of an order that passed a sync-mode gate
// before: the database has the answer and takes no second use for an
// identical retry. A duplicate whose first request died before its write
// writes it now, backed by the use the gate took then.
func (b *flashBase) reserveKnown(ctx context.Context, r ReserveRequest) (Reservation, error) {
	// An order whose first request is still being written here (a retry
	// sent while it waits for its batch) waits for that write, then reads
	// its row: racing it with a transaction of its own would queue on the
	// order's key and the voucher's row behind the batch, and every winner
	// of the next batch behind that.
	if err := b.writing.wait(ctx, r.OrderID); err != nil {
		return Reservation{}, unavailable(err)
	}
	// Nearly always the order's row is written already (a client's retry):
	// the store's coalesced read answers it as Reserve would, without a
	// transaction of its own. Only a row missing (or unreadable) goes on
	// to Reserve, which decides it under its locks.
	if earlier, err := b.store.Reservation(ctx, r.OrderID); err == nil {
		return b.retryOf(ctx, r, earlier, PathGateSync)
	}
	b.obs.DatabaseWrite("reserve")
	res, _, err := b.store.Reserve(ctx, r, b.ttl, PathGateSync)
	if err != nil && !IsRefusal(err) {
		return Reservation{}, unavailable(err)
	}
	return res, err
}

// retryOf answers a reserve of an order the database holds, from a read of
// its row outside a transaction. An order still RESERVED within expirySkew
// of its expiresAt is asked again in the store's transaction, so the
// database's clock decides it as it decides a confirm (RetryAt): this
// instance's clock may differ from it by a few seconds.
func (b *flashBase) retryOf(ctx context.Context, r ReserveRequest, earlier Reservation, path Path) (Reservation, error) {
	res, err := r.Retry(earlier)
	if err != nil || res.Status != StatusReserved || clockNow().Add(expirySkew).Before(res.ExpiresAt) {
		return res, err
	}
	res, _, err = b.store.Reserve(ctx, r, b.ttl, path)
	if err != nil && !IsRefusal(err) {
		return Reservation{}, unavailable(err)
	}
	return res, err
}

// expirySkew is how far an instance's clock is trusted to be from the
// database's for an expiry (CLOCK_OFFSET tests up to 2 s).
const expirySkew = 5 * time.Second

// refusedAtGate answers the gate's refusals that are the same on every
// path, after rule 2: a gate knows its own voucher's orders, not the
// database's, so an orderId the database holds (on another voucher, or on
// this one when the gate lacks it after a failover) gets the answer its
// reservation gives a retry instead (refusedUnlessHeld).
func (b *flashBase) refusedAtGate(ctx context.Context, v Voucher, r ReserveRequest, verdict GateVerdict) (Reservation, error) {
	return b.refusedUnlessHeld(ctx, v, r, gateRefusal(v, r, verdict))
}

// gateRefusal is the error of a gate's refusal.
func gateRefusal(v Voucher, r ReserveRequest, verdict GateVerdict) error {
	if refusal := v.periodRefusal(verdict); refusal != nil {
		return refusal
	}
	switch verdict {
	case GateCodeUsedUp:
		return CodeUsedUp(v.Code)
	case GateAlreadyUsed:
		return Errorf(AlreadyUsed, "customer %d already holds %d use(s) of voucher %s", r.CustomerID, v.PerUserLimit, v.Code)
	case GateOutOfStock:
		return Errorf(OutOfStock, "voucher %s is sold out", v.Code)
	case GateSumTooLarge:
		return SumTooLarge()
	case GateBudgetExhausted:
		return Errorf(BudgetExhausted, "the budget of voucher %s cannot cover a discount of %d", v.Code, v.DiscountOf(r))
	case GateNotEligible:
		return Errorf(NotEligible, "voucher %s is not valid now or not for an order of %d", v.Code, r.OrderAmount)
	}
	return Errorf(Unavailable, "the gate gave no answer; retry with the same orderId")
}

// refusedUnlessHeld answers a flash reserve refused by rule 3, 4 or 5
// (NOT_ELIGIBLE, ALREADY_USED, OUT_OF_STOCK, BUDGET_EXHAUSTED)
// without the database: rule 2 comes before them, so the orderId is looked
// up first (one coalesced read) and, if the database holds it, answered as
// a retry of that reservation (ORDER_CONFLICT on another voucher or with
// other terms, RESERVATION_RELEASED, or the reservation itself); in kafka
// mode an order still on its way elsewhere is found by its claim. A
// database that gave no answer (down, or not within heldLookupTimeout)
// leaves UNAVAILABLE unless a claim decided: a refusal is given only once
// rule 2 is known not to apply.
//
// The question is paced (heldChecks): a read per refusal would make the
// late crowd of a sold-out voucher, which the gate and its sold-out memory
// answer without the database, a query each (measured: the sold-out row of
// make bench fell from 0.88 to 0.69 x the HTTP ceiling). Past the pace the
// refusal stands: only its code can be wrong, for an orderId the caller
// already used on another voucher; no use is taken and no success is lost
// either way.
func (b *flashBase) refusedUnlessHeld(ctx context.Context, v Voucher, r ReserveRequest, refusal error) (Reservation, error) {
	switch ErrorCodeOf(refusal) {
	case NotEligible, AlreadyUsed, PeriodLimitReached, OutOfStock, BudgetExhausted: // a used-up campaign code is OUT_OF_STOCK
		if b.heldChecks.allow() {
			return b.refusedUnlessHeldNow(ctx, v, r, refusal)
		}
	}
	return Reservation{}, refusal
}

// refusedUnlessHeldNow asks the question refusedUnlessHeld paced. It is a
// function of its own so that the late crowd past the pace, nearly every
// refusal of a sold-out sale, runs on a small frame (with the question's
// locals in it, the goroutines' stacks grew again after each GC shrank
// them: runtime.newstack was 1 % of the sold-out row's profile).
func (b *flashBase) refusedUnlessHeldNow(ctx context.Context, v Voucher, r ReserveRequest, refusal error) (Reservation, error) {
	held, found, err := b.lookupOrder(ctx, r.OrderID)
	if found {
		r.Code = v.Code
		return b.retryOf(ctx, r, held, PathGateSync)
	}
	if err != nil {
		b.logger.WarnContext(ctx, "a refused flash reserve's orderId not checked against the database", "order", r.OrderID, "err", err)
	}
	if res, err, decided := b.inFlight.heldInFlight(ctx, v.Code, r, err != nil); decided {
		return res, err
	}
	if err != nil {
		// Only the database knows every orderId for ever: a claim lasts
		// a day and goes with Redis's data (a restart, a failover to a
		// replica that lagged). Without its answer the refusal may be the
		// wrong rule (explorer seeds 42, 112, 123: an order reserved on an
		// ordinary voucher during a failover, refused OUT_OF_STOCK on a
		// flash voucher while PostgreSQL was stopped; seeds 3, 4, 5, 101
		// of a later run: the same while PostgreSQL was stopping, its
		// lookup out of time rather than refused).
		return Reservation{}, unchecked(r.OrderID)
	}
	return Reservation{}, refusal
}

// heldChecksPerSecond paces the refusals' questions to the database per
// process: every refusal of a sale's ordinary traffic, a fraction of a
// stampede's late crowd. At 200 the fault explorer's own clients (about
// 220 refusals a second on one instance) went past it, and an order held
// on another voucher was refused OUT_OF_STOCK (seeds 175, 181); at a
// sold-out crowd's 60,000 refusals a second, 1,000 questions are under
// 2 % of the requests, coalesced into a few reads.
const heldChecksPerSecond = 1000

// heldLookupTimeout bounds a flash reserve's question to the database
// whether its orderId holds a reservation already. Without an answer the
// reserve is UNAVAILABLE (a new winner given back, a refusal not given), so
// the bound is how long a reserve waits for a database that is down or
// stalled, not a budget of the normal path: at 250 ms a refusal's read
// under 300 concurrent reserves on this 2-core machine ran out of it about
// one time in six (TestBudget_TheFlashGateRefusesWhatTheBudgetCannotCoverWithoutTheDatabase).
const heldLookupTimeout = 2 * time.Second

// heldOrder asks the database whether orderID holds a reservation already.
// The gate and the claims cannot always say: a claim in Redis lasts a day
// and goes with Redis's data, and a reload can miss an order whose event
// was on its way; the database keeps every reservation for ever. One
// coalesced read, briefly: without an answer (the database down or slow)
// the caller decides with what the claims say.
func (b *flashBase) heldOrder(ctx context.Context, orderID string) (Reservation, bool) {
	res, found, err := b.lookupOrder(ctx, orderID)
	if err != nil {
		b.logger.WarnContext(ctx, "a flash reserve's orderId not checked against the database; the claims decide", "order", orderID, "err", err)
	}
	return res, found
}

// errLookupSlow marks a lookup that ran out of heldLookupTimeout.
var errLookupSlow = errors.New("no answer within the lookup's bound")

// lookupOrder reads orderID's reservation within heldLookupTimeout; err
// is set when the database gave no answer (not for an order it lacks),
// errLookupSlow when it ran out of time.
func (b *flashBase) lookupOrder(ctx context.Context, orderID string) (res Reservation, found bool, err error) {
	lctx, cancel := context.WithTimeout(ctx, heldLookupTimeout)
	defer cancel()
	res, err = b.store.Reservation(lctx, orderID)
	switch {
	case err == nil:
		return res, true, nil
	case ErrorCodeOf(err) == NotFound:
		return Reservation{}, false, nil
	case lctx.Err() != nil && ctx.Err() == nil:
		return Reservation{}, false, fmt.Errorf("%w: %w", errLookupSlow, err)
	}
	return Reservation{}, false, err
}

// gateGiveBackTimeout bounds giving one released use back to the gate,
// retries included; the gate's own calls fail within about a second when
// Redis is unwell.
const gateGiveBackTimeout = 5 * time.Second

// releaseGate gives a released flash use back to the gate. A failure leaves
// the gate too low (undersell), which reconciliation repairs.
func (b *flashBase) releaseGate(ctx context.Context, res Reservation) {
	if err := b.gateUseBack(ctx, res); err != nil {
		b.logger.WarnContext(ctx, "gate use not given back; reconciliation will find it", "code", res.VoucherCode, "order", res.OrderID, "err", err)
	}
}

// gateUseBack gives the use of a reservation the database released or
// rolled back to its flash voucher's gate (nothing for another voucher),
// once: the gate marks the order released.
func (b *flashBase) gateUseBack(ctx context.Context, res Reservation) error {
	if b.gate == nil {
		return nil
	}
	// The database's change has committed: the give-back is owed whatever
	// happens to the caller. The expiry sweep in particular calls this at
	// the end of a pass whose deadline may have passed, which left released
	// uses out of the gate until reconciliation.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gateGiveBackTimeout)
	defer cancel()
	var v Voucher
	err := retryBriefly(ctx, func() (err error) {
		v, err = b.meta.get(ctx, res.VoucherCode, b.store.Voucher)
		return err
	})
	if err != nil {
		return err
	}
	if !v.Flash {
		return nil
	}
	return b.giveUseBack(ctx, gateCode(v), res.OrderID, res.DiscountAmount)
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

// useBack gives a released order's use back to the gate (giveUseBack); a
// failure is left to reconciliation.
func (b *flashBase) useBack(ctx context.Context, code, orderID string, discount int64) {
	if err := b.giveUseBack(ctx, code, orderID, discount); err != nil {
		b.logger.WarnContext(ctx, "gate use not given back; reconciliation will find it", "code", code, "order", orderID, "err", err)
	}
}

// giveUseBack gives a released order's use back to the gate, once, and
// makes it sellable at once: this instance drops its sold-out snapshot of
// the voucher and the others are told to (the gate's script announces
// every give-back), so a released use sells again now rather than when the
// snapshots lapse.
func (b *flashBase) giveUseBack(ctx context.Context, code, orderID string, discount int64) error {
	var back bool
	err := retryBriefly(ctx, func() (err error) {
		back, err = b.gate.Release(ctx, code, orderID, discount) // idempotent: once only
		return err
	})
	if err != nil {
		return err
	}
	if back {
		b.soldOut.forget(code)
	}
	return nil
}

// SoldOutLapsed drops this instance's sold-out snapshot of a voucher: another
// instance gave a use back (Gate.AnnounceReleased), so the next reserve asks
// the gate again.
func (s *Service) SoldOutLapsed(code string) { s.soldOut.forget(code) }

// AllSoldOutLapsed drops every sold-out snapshot of this instance: it may
// have missed announcements (its subscription was lost).
func (s *Service) AllSoldOutLapsed() { s.soldOut.forgetAll() }

// noteSoldOut remembers, for a few seconds, which orders and customers the
// gate of a sold-out voucher knows, so the late crowd is answered from memory
// with the same verdicts the gate would give (retries still find their
// reservation, customers at their limit still get ALREADY_USED).
func (b *flashBase) noteSoldOut(ctx context.Context, code string) {
	if !b.soldOut.enabled() || b.soldOut.fresh(code) {
		return
	}
	// One snapshot per voucher at a time, however many requests hear
	// OUT_OF_STOCK while it is taken.
	_, _, _ = b.soldOut.flight.Do(code, func() (any, error) {
		if b.soldOut.fresh(code) {
			return nil, nil
		}
		gen := b.soldOut.generation(code)
		snap, ok, err := b.gate.Snapshot(ctx, code)
		if err == nil && ok && snap.Remaining <= 0 {
			b.soldOut.put(snap, gen)
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
	// gen counts each voucher's forgets: a snapshot read before a forget
	// (a use given back meanwhile, and maybe sold to another order) is not
	// installed after it, or a retry of that order would hear OUT_OF_STOCK.
	gen map[string]uint64
	// all counts the forgets of every voucher at once (forgetAll): a
	// voucher's generation is its own forgets plus these.
	all uint64
}

type soldOutEntry struct {
	until     time.Time
	orders    map[string]GateOrder
	customers map[int64]int
	limit     int
}

func newSoldOutCache(ttl time.Duration) *soldOutCache {
	return &soldOutCache{ttl: ttl, m: make(map[string]soldOutEntry), gen: make(map[string]uint64)}
}

func (c *soldOutCache) enabled() bool { return c.ttl > 0 }

func (c *soldOutCache) forget(code string) {
	c.mu.Lock()
	delete(c.m, code)
	c.gen[code]++
	c.mu.Unlock()
}

func (c *soldOutCache) forgetAll() {
	c.mu.Lock()
	clear(c.m)
	c.all++
	c.mu.Unlock()
}

// generation is the voucher's count of forgets, read before a snapshot.
func (c *soldOutCache) generation(code string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen[code] + c.all
}

func (c *soldOutCache) fresh(code string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[code]
	return ok && time.Now().Before(e.until)
}

// put installs a snapshot read at generation gen, unless the voucher was
// forgotten since.
func (c *soldOutCache) put(snap GateSnapshot, gen uint64) {
	orders := make(map[string]GateOrder, len(snap.Orders))
	for _, o := range snap.Orders {
		orders[o.OrderID] = o
	}
	c.mu.Lock()
	if c.gen[snap.Code]+c.all == gen {
		c.m[snap.Code] = soldOutEntry{until: time.Now().Add(c.ttl), orders: orders, customers: snap.Customers, limit: snap.PerUserLimit}
	}
	c.mu.Unlock()
}

// customerUses reads the customer's uses from a fresh sold-out snapshot;
// ok is false without one.
func (c *soldOutCache) customerUses(code string, customerID int64) (int, bool) {
	if !c.enabled() {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[code]
	if !ok || time.Now().After(e.until) {
		return 0, false
	}
	return e.customers[customerID], true
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
