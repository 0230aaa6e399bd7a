package voucher

// The Kafka write path of flash vouchers (FLASH_WRITE_PATH=kafka): the gate
// decides every reserve, confirm, release and expiry, and events carry the
// decisions to the database. Why it keeps the rules: docs/write-paths.md,
// "How kafka mode keeps the rules".

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// kafkaFlash is the Kafka write path and its gate recoveries.
type kafkaFlash struct {
	*flashBase // the Service's
	publisher  EventPublisher
	events     EventStore
	// pending waits for the events in flight: reconciliation must not
	// take an order whose event is on its way for a leak.
	pending PendingWrites
	// publishTimeout bounds a request's wait for the broker's
	// acknowledgement; lease is how long an admission's owner has to settle
	// it (KafkaPath).
	publishTimeout, lease time.Duration
	faults                func(ctx context.Context, step FaultStep, orderID string) error
	// decode reads a dead letter's payload as the consumer reads a record.
	decode func([]byte) (Event, error)

	// claims says when a claim found free can be trusted (claim_fence.go).
	claims *claimFence

	mu         sync.Mutex
	recovering map[string]time.Time // when this process last asked for a voucher's recovery
	// reloadedAt: the rebuild markers this process's consumer reloaded a
	// gate at, by voucher, with when (kept markerPause). See dropReloaded.
	reloadedAt map[string]map[string]time.Time
}

func newKafkaFlash(base *flashBase, k *KafkaPath) *kafkaFlash {
	kf := &kafkaFlash{
		flashBase: base, publisher: k.Publisher, events: k.Store, pending: k.Pending,
		publishTimeout: k.publishTimeout(), lease: k.lease(), faults: k.Faults, decode: k.Decode,
		recovering: map[string]time.Time{}, reloadedAt: map[string]map[string]time.Time{},
	}
	kf.claims = newClaimFence(kf.settle)
	return kf
}

// reserve decides a reserve of a flash voucher in kafka mode. It reads and
// writes only the gate and the broker: the gate decides (admit.lua, on its
// own clock), the reserved event carries the decision, and the answer is a
// success only once the broker acknowledged the event and the gate settled
// the admission as live (or the consumer applied it first).
func (k *kafkaFlash) reserve(ctx context.Context, v Voucher, r ReserveRequest, path *Path) (Reservation, error) {
	// The currency is a term that never changes: no need for the gate.
	if err := v.CheckCurrency(r.Currency); err != nil {
		return Reservation{}, err
	}
	// Segments are the request's: decided here, before the gate (a held
	// order's retry still gets its reservation: rule 2 first).
	if err := v.checkOrderLines(r.CustomerSegments, r.Items); err != nil {
		return k.refusedUnlessHeld(ctx, v, r, err)
	}
	if verdict, ok := k.soldOut.verdict(v.Code, r); ok && v.soldOutMemoryAnswers(gateCode(v)) && (verdict == GateOutOfStock || verdict == GateAlreadyUsed) {
		*path = PathGateMemory
		return k.refusedAtGate(ctx, v, r, verdict)
	}
	*path = PathKafka
	// The discount on the eligible items (appliesTo), kept with the order
	// at the gate when its amount gives another (GateKeepsDiscount).
	r, discount := v.withDiscount(r)
	// The gate counts the use in the periods of the createdAt it gives (its
	// own clock), which the reserved event carries to the database: offered
	// the periods around this instance's now, it picks the one holding it.
	r = v.withPeriods(r, clockNow(), true)
	a, err := k.gate.Admit(ctx, v.Code, r, discount)
	// An identical request whose first copy is still being settled waits
	// for its outcome (concurrent duplicates all succeed), polling the gate,
	// within the publish timeout and its own deadline.
	for wait, deadline := 2*time.Millisecond, time.Now().Add(k.publishTimeout+time.Second); err == nil && a.Verdict == GatePending && time.Now().Before(deadline); {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return Reservation{}, unavailable(ctx.Err())
		}
		wait = min(2*wait, 50*time.Millisecond)
		a, err = k.gate.Admit(ctx, v.Code, r, discount)
	}
	if err != nil {
		return Reservation{}, unavailable(err)
	}
	switch a.Verdict {
	case GateAdmitted, GateAdopted:
		return k.admit(ctx, v, r, a)
	case GateDuplicate:
		return k.duplicate(ctx, v, r, a)
	case GateNotLoaded, GateStale:
		if closed := v.CheckEligible(clockNow(), r); closed != nil && clockNow().After(gateExpireAt(v, k.ttl)) {
			// Its gate went for good a week after the window: closed,
			// whatever the database holds of its orders (rule 2 first).
			return k.refusedUnlessHeld(ctx, v, r, closed)
		}
		k.requestRecovery(v.Code)
		return Reservation{}, Errorf(Unavailable, "the sale of %s is being prepared; retry with the same orderId", v.Code)
	case GatePaused:
		return Reservation{}, Errorf(Unavailable, "voucher %s is being rebuilt; retry with the same orderId", v.Code)
	case GatePending:
		return Reservation{}, Errorf(Unavailable, "the reservation for order %s is being decided; retry with the same orderId", r.OrderID)
	case GateLost:
		k.logger.ErrorContext(ctx, "a retry of an order whose event the database refused", "code", v.Code, "order", r.OrderID)
		return Reservation{}, Errorf(Unavailable, "the reservation for order %s could not be recorded; operators are alerted", r.OrderID)
	case GateReleased:
		return k.released(ctx, v, r, a)
	case GateOrderConflict:
		return Reservation{}, Errorf(OrderConflict, "order %s was already used with another customer or amount", r.OrderID)
	case GateClaimedElsewhere:
		return k.claimedElsewhere(ctx, v.Code, r, "")
	case GateOutOfStock:
		k.noteSoldOut(ctx, v.Code)
	}
	return k.refusedAtGate(ctx, v, r, a.Verdict) // NOT_ELIGIBLE, ALREADY_USED, OUT_OF_STOCK, the budget's
}

// admit carries an admission (or an adopted one) to the broker and
// settles it. Only this request may give its use back, and only while it is
// pending: Settle is a compare-and-set on the admission's token.
func (k *kafkaFlash) admit(ctx context.Context, v Voucher, r ReserveRequest, a Admission) (Reservation, error) {
	held := k.reservationOf(v, a.Order, StatusReserved)
	if err := k.fault(ctx, StepAdmitted, r.OrderID); err != nil {
		return Reservation{}, unavailable(err) // the owner "died": its admission stays pending
	}
	// The gate's keys are per voucher: the orderId may have been reserved on
	// another voucher. The claim sees that (every reservation claims it); on
	// a single Redis admit.lua made it already.
	server := a.Server
	if !a.Claimed {
		owner, claimServer, err := k.gate.ClaimOrder(ctx, r.OrderID, v.Code)
		if err != nil {
			k.giveBack(ctx, v, a)
			return Reservation{}, unavailable(err)
		}
		if owner != v.Code {
			k.giveBack(ctx, v, a)
			return k.claimedElsewhere(ctx, v.Code, r, owner)
		}
		server = claimServer
	}
	if a.Verdict == GateAdmitted {
		// A claim found free on a Redis server that may have lost the
		// claims of events in flight is trusted once they are applied.
		if err := k.fenceClaim(ctx, server); err != nil {
			k.giveBack(ctx, v, a)
			k.unclaim(ctx, r.OrderID, v.Code)
			return Reservation{}, err
		}
		// A new winner: the database answers rule 2 for ever (a claim
		// lasts a day and goes with Redis's data). Without its answer the
		// winner may hold an orderId another voucher holds, and its event
		// would be refused after its 201 (explorer seed 2: an ordinary
		// voucher's reserve made while Redis was down, so unclaimed; Redis
		// restarted empty, then this reserve with PostgreSQL stopped). So a
		// new winner waits for the database; what the gate already holds
		// (retries, confirms, releases) does not.
		earlier, found, err := k.lookupOrder(ctx, r.OrderID)
		if err != nil {
			k.giveBack(ctx, v, a)
			k.unclaim(ctx, r.OrderID, v.Code)
			k.logger.WarnContext(ctx, "a new winner's orderId not checked against the database; refused for now", "order", r.OrderID, "err", err)
			return Reservation{}, unchecked(r.OrderID)
		}
		if found {
			return k.reserveOfEarlier(ctx, v, r, a, earlier)
		}
	}
	if err := k.fault(ctx, StepClaimed, r.OrderID); err != nil {
		return Reservation{}, unavailable(err)
	}
	ev := NewEvent(EventReserved, held, held.CreatedAt)
	ev.Epoch = a.Epoch
	if err := k.publish(ctx, ev); err != nil {
		if errors.Is(err, ErrPublishUnknown) {
			// It may still be written: the admission stays pending. A retry
			// past its lease adopts it, or reconciliation voids it; a late
			// event of a voided admission is skipped by the consumer.
			k.logger.WarnContext(ctx, "reserved event outcome unknown; the admission stays pending", "code", v.Code, "order", r.OrderID, "err", err)
			return Reservation{}, unavailable(err)
		}
		// Surely not written: the use goes back, unless the consumer
		// applied the event anyway (then it stands, and so does the answer).
		if k.giveBack(ctx, v, a) {
			return held, nil
		}
		k.unclaim(ctx, r.OrderID, v.Code)
		return Reservation{}, unavailable(err)
	}
	if err := k.fault(ctx, StepPublished, r.OrderID); err != nil {
		return Reservation{}, unavailable(err)
	}
	answer, after, err := k.gate.Settle(ctx, v.Code, SettleFinalize, a.Order, a.Epoch, held.DiscountAmount)
	if err != nil {
		// The event is on the broker: the consumer settles it; a retry
		// then finds it live (DUPLICATE).
		return Reservation{}, unavailable(err)
	}
	switch answer {
	case SettleOK:
		if after.Confirmed {
			held.Status = StatusConfirmed
		}
		return held, nil
	case SettleStale:
		k.requestRecovery(v.Code)
	}
	// FAIL: a retry adopted the admission, or the gate was reloaded without
	// it and it is void now: not a success, and the consumer skips its event.
	return Reservation{}, Errorf(Unavailable, "the reservation for order %s is being decided; retry with the same orderId", r.OrderID)
}

// reserveOfEarlier answers a new admission whose orderId the database holds
// already: the admission's use goes back, and the answer is the one the
// earlier reservation gives a retry (ORDER_CONFLICT on another voucher or
// with other terms, RESERVATION_RELEASED, or that reservation). The claim
// is moved to the voucher that holds the order, for the requests after.
func (k *kafkaFlash) reserveOfEarlier(ctx context.Context, v Voucher, r ReserveRequest, a Admission, earlier Reservation) (Reservation, error) {
	k.giveBack(ctx, v, a)
	if earlier.VoucherCode != v.Code {
		k.unclaim(ctx, r.OrderID, v.Code)
		if _, _, err := k.gate.ClaimOrder(ctx, r.OrderID, earlier.VoucherCode); err != nil {
			k.logger.WarnContext(ctx, "order claim not moved to the voucher holding it", "code", earlier.VoucherCode, "order", r.OrderID, "err", err)
		}
	}
	r.Code = v.Code
	return r.Retry(earlier)
}

// giveBack gives a pending admission's use back (compare-and-set on its
// token); it reports true when the admission turned out to be live (the
// consumer applied its event), so its success stands.
func (k *kafkaFlash) giveBack(ctx context.Context, v Voucher, a Admission) (live bool) {
	answer, after, err := k.gate.Settle(context.WithoutCancel(ctx), v.Code, SettleForget, a.Order, a.Epoch, v.OrderDiscount(a.Order))
	if err != nil {
		// Still pending: its lease runs out and reconciliation voids it.
		k.logger.WarnContext(ctx, "admission not given back; reconciliation voids it after its lease", "code", v.Code, "order", a.Order.OrderID, "err", err)
		return false
	}
	return answer == SettleFail && sameAdmission(after, a.Order) && !after.Pending && !after.Void && !after.Lost
}

func sameAdmission(a, b GateOrder) bool {
	return a.OrderID == b.OrderID && a.CreatedAt.Equal(b.CreatedAt)
}

// duplicate answers a retry of an order the gate holds live or
// confirmed: its success stands (settled after the broker's acknowledgement,
// or applied), so the gate's record is the answer. The claim is made again:
// a first request whose reply was lost may have died before it.
func (k *kafkaFlash) duplicate(ctx context.Context, v Voucher, r ReserveRequest, a Admission) (Reservation, error) {
	if !a.Order.decidedAtGate() {
		return k.reserveKnown(ctx, r) // a sync-mode order: the database answers
	}
	if owner, _, err := k.gate.ClaimOrder(ctx, r.OrderID, v.Code); err == nil && owner != v.Code {
		k.logger.ErrorContext(ctx, "an order live on two vouchers' gates", "code", v.Code, "other", owner, "order", r.OrderID)
	}
	if a.Order.Confirmed {
		// The confirm was decided at the gate; its event may not be
		// written (its instance died before it published: explorer seed
		// 9). Answered CONFIRMED, it is recorded first and the gate asked
		// again, as a confirm's own answer is (decide): else a gate lost
		// since reloads the order live and it expires, confirmed to
		// this client.
		res, _, err := k.confirm(ctx, v.Code, r.OrderID)
		if err != nil {
			return Reservation{}, asReserveAnswer(err, r.OrderID)
		}
		return res, nil
	}
	return k.reservationOf(v, a.Order, StatusReserved), nil
}

// released answers a retry of an order the gate holds released. A release
// still "releasing" may not be recorded (its publish failed): the refusal
// is answered once its event is, as a refusal of a confirm is (decide);
// else a gate lost since reloads the order live and the next retry is a
// 201 after this RESERVATION_RELEASED.
func (k *kafkaFlash) released(ctx context.Context, v Voucher, r ReserveRequest, a Admission) (Reservation, error) {
	if a.Order.Releasing {
		_, _, err := k.decide(ctx, v.Code, r.OrderID, EventReleased, k.askRelease(v.Code, r.OrderID))
		if err != nil {
			return Reservation{}, asReserveAnswer(err, r.OrderID)
		}
	}
	return Reservation{}, Errorf(ReservationReleased, "the reservation for order %s was released", r.OrderID)
}

// asReserveAnswer is a reserve retry's answer for the error of the confirm
// or release it recorded: RESERVATION_RELEASED stands, anything else (the
// gate gave another answer since, or none) is a retry.
func asReserveAnswer(err error, orderID string) error {
	if c := ErrorCodeOf(err); c == ReservationReleased || c == Unavailable {
		return err
	}
	return Errorf(Unavailable, "the reservation for order %s is being decided; retry with the same orderId", orderID)
}

// reservationOf is the reservation the gate's record of an order stands for.
func (k *kafkaFlash) reservationOf(v Voucher, o GateOrder, status Status) Reservation {
	return Reservation{
		OrderID: o.OrderID, VoucherCode: v.Code, CustomerID: o.CustomerID, OrderAmount: o.OrderAmount,
		DiscountAmount: v.OrderDiscount(o), Status: status, CreatedAt: o.CreatedAt, ExpiresAt: o.ExpiresAt,
		Position: o.Position,
	}
}

// confirm decides a confirm of a flash reservation at the gate; decided
// is false when the database decides it as in sync mode (not flash, a
// sync-mode order).
func (k *kafkaFlash) confirm(ctx context.Context, code, orderID string) (res Reservation, decided bool, err error) {
	return k.decide(ctx, code, orderID, EventConfirmed, func(ctx context.Context) (GateDecision, GateOrder, error) {
		return k.gate.Confirm(ctx, code, orderID)
	})
}

// release decides a release of a flash reservation at the gate; see
// confirm.
func (k *kafkaFlash) release(ctx context.Context, code, orderID string) (res Reservation, decided bool, err error) {
	ask := k.askRelease(code, orderID)
	var first GateDecision // the gate's first answer: was it released before this call?
	res, decided, err = k.decide(ctx, code, orderID, EventReleased, func(ctx context.Context) (GateDecision, GateOrder, error) {
		d, o, err := ask(ctx)
		if first == "" {
			first = d
		}
		return d, o, err
	})
	if decided && err == nil {
		// The released event is acknowledged: any admission from now on
		// publishes after it, in the voucher's partition, so the database
		// releases this row before it applies that one. The use may go back
		// now (the consumer's give-back then finds it back already).
		k.useBack(ctx, code, orderID, res.DiscountAmount)
		// A rollback gives its use back through the gate's release, so the
		// gate holds a rolled-back order as released before: the other paths
		// answer its release with the rolled-back reservation, unchanged,
		// and so does this one. Only such a repeated release reads the row;
		// a release decided now stays off the database. The gate does not
		// tell a rolled-back order from a released one, so without the row
		// (the database down) the answer is a retry, not RELEASED (explorer
		// seed 4 once it sent rollbacks: 200 RELEASED for a ROLLED_BACK row).
		if first == DecisionReleased {
			db, err := k.store.Reservation(ctx, orderID)
			switch {
			case err == nil && db.Status == StatusRolledBack && db.VoucherCode == res.VoucherCode:
				res = db
			case err != nil && ErrorCodeOf(err) != NotFound:
				return Reservation{}, true, Errorf(Unavailable, "the reservation for order %s could not be read; retry the release", orderID)
			}
		}
	}
	return res, decided, err
}

// beforeRollback waits, for a flash voucher decided at the gate, until the
// events already published are applied: a confirm is answered once its
// event is acknowledged, so every confirm answered before the rollback was
// asked is then in the database, which decides the rollback (NOT_CONFIRMED
// for a row still RESERVED, NOT_FOUND for an order it does not hold: an
// answered confirm is never refused for an event in flight).
func (k *kafkaFlash) beforeRollback(ctx context.Context, code string) error {
	if _, ok, err := k.flashVoucher(ctx, code); !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rollbackSettleTimeout)
	defer cancel()
	if err := k.settle(ctx); err != nil {
		return Errorf(Unavailable, "the events of voucher %s in flight are not applied yet; retry", code)
	}
	return nil
}

// rollbackSettleTimeout bounds a rollback's wait for the events in flight:
// the consumer's delay is seconds, not minutes.
const rollbackSettleTimeout = 10 * time.Second

// askRelease is decide's question for a release of the order (not an
// expiry): the release's own, and a reserve retry's that finds it releasing.
func (k *kafkaFlash) askRelease(code, orderID string) func(context.Context) (GateDecision, GateOrder, error) {
	return func(ctx context.Context) (GateDecision, GateOrder, error) {
		return k.gate.MarkReleased(ctx, code, orderID, false)
	}
}

// decide asks the gate for a confirm or a release (ask), publishes the
// decision and, once the broker has acknowledged it, asks the gate again:
// the answer is a success only if the gate still holds that decision then.
// A decision made on a gate lost since (Redis restarted empty, a failover)
// may have its event written after the recovery marker, so the reload
// does not hold it; the new gate may even have decided the order the other
// way meanwhile. Asking again takes the decision on the gate that serves
// now (or refuses it there), and the consumer's apply_check.lua settles the
// late event the same way (explorer seed 148: a confirm so decided left the
// reloaded gate live, a release was answered 200 for a confirmed
// reservation and its use sold twice).
func (k *kafkaFlash) decide(ctx context.Context, code, orderID string, kind EventKind, ask func(context.Context) (GateDecision, GateOrder, error)) (Reservation, bool, error) {
	v, ok, err := k.flashVoucher(ctx, code)
	if !ok {
		return Reservation{}, err != nil, err
	}
	decision, o, err := ask(ctx)
	if err != nil {
		return Reservation{}, true, unavailable(err)
	}
	if done, err := k.undecided(v, orderID, decision, o); done {
		return Reservation{}, err != nil, err
	}
	// The decision to record: the one asked for, or the other one the gate
	// holds that may not be recorded yet (a refusal is an answer too).
	record := kind
	if err := refusal(kind, decision, o); err != nil {
		other, ok := unrecorded(decision, o)
		if !ok {
			return Reservation{}, true, err
		}
		record = other
	}
	res := k.reservationOf(v, o, statusOf(record))
	if err := k.recordDecision(ctx, res, record); err != nil {
		return Reservation{}, true, err
	}
	decision, o, err = ask(ctx)
	if err != nil {
		return Reservation{}, true, unavailable(err)
	}
	if done, uerr := k.undecided(v, orderID, decision, o); done {
		err = uerr
		if err == nil {
			err = Errorf(Unavailable, "the %s of order %s is recorded; the gate gave no answer since, retry", record, orderID)
		}
		return Reservation{}, true, err
	}
	err = refusal(kind, decision, o)
	if err == nil && record != kind {
		// The gate recorded lost the other decision since (a reload) and
		// took this one now, unrecorded: a retry records it.
		return Reservation{}, true, notRecorded(kind, orderID)
	}
	if err != nil {
		return Reservation{}, true, err
	}
	return res, true, nil
}

// unrecorded is the decision behind a refusal that the gate holds and that
// may not be in the database yet: a release (releasing: the database has
// not released the row) refuses a confirm, a confirm refuses a release.
// Answered before its event is acknowledged, the refusal could be undone:
// the gate's data lost, the reload from the database holds the order live,
// and a confirm answered RESERVATION_RELEASED is confirmed after all
// (explorer seed 47: the release's publish failed, the confirm was refused,
// Redis restarted empty).
func unrecorded(decision GateDecision, o GateOrder) (EventKind, bool) {
	switch {
	case decision == DecisionReleased && o.Releasing:
		return EventReleased, true
	case decision == DecisionConfirmed:
		return EventConfirmed, true
	}
	return "", false
}

// statusOf is the status a decision gives its reservation.
func statusOf(kind EventKind) Status {
	if kind == EventReleased {
		return StatusReleased
	}
	return StatusConfirmed
}

// refusal is the error for a gate's decision that is not the one asked for
// (nil when it is: confirmed for a confirm, released for a release).
func refusal(kind EventKind, decision GateDecision, o GateOrder) error {
	switch {
	case kind == EventConfirmed && (decision == DecisionConfirmed || decision == DecisionConfirmedNow):
		return nil
	case kind == EventReleased && (decision == DecisionReleased || decision == DecisionReleasedNow):
		return nil
	case kind == EventConfirmed && decision == DecisionReleased:
		return Errorf(ReservationReleased, "the reservation for order %s was released", o.OrderID)
	case kind == EventConfirmed && decision == DecisionExpired:
		return Errorf(ReservationReleased, "the reservation for order %s expired at %s", o.OrderID, o.ExpiresAt.UTC().Format(time.RFC3339))
	case kind == EventReleased && decision == DecisionConfirmed:
		return Errorf(AlreadyConfirmed, "the reservation for order %s is confirmed", o.OrderID)
	}
	return Errorf(Unavailable, "the gate gave no answer; retry")
}

// flashVoucher returns the voucher when its confirm or release is decided at
// the gate; ok is false (err nil) when the database decides it.
func (k *kafkaFlash) flashVoucher(ctx context.Context, code string) (Voucher, bool, error) {
	v, err := k.meta.get(ctx, code, k.store.Voucher)
	if err != nil {
		if ErrorCodeOf(err) == NotFound {
			return Voucher{}, false, nil // the database path answers NOT_FOUND
		}
		return Voucher{}, false, unavailable(err)
	}
	// A campaign code's confirm and release are the database's, as on the
	// sync path (Service.campaigns): its campaign's gate only hears of a
	// use given back.
	return v, v.Flash && v.CampaignID == 0, nil
}

// undecided handles the decisions that leave the call to the database or
// refuse it: done is true when the caller stops, with err (nil err: the
// database decides).
func (k *kafkaFlash) undecided(v Voucher, orderID string, decision GateDecision, o GateOrder) (done bool, err error) {
	switch decision {
	case DecisionLegacy:
		return true, nil
	case DecisionUnknown:
		// A gate in kafka mode holds every order of its voucher, released
		// ones too (load.lua, GateSnapshotAll): one it does not know has no
		// reservation.
		return true, Errorf(NotFound, "no reservation for order %s on voucher %s", orderID, v.Code)
	case DecisionPending:
		return true, Errorf(Unavailable, "the reservation for order %s is being decided; retry", orderID)
	case DecisionPaused:
		return true, Errorf(Unavailable, "voucher %s is being rebuilt; retry", v.Code)
	case DecisionNotLoaded, DecisionStale:
		if clockNow().After(gateExpireAt(v, k.ttl)) {
			// The gate went for good a week after the window and the last
			// TTL (its keys expire then): every decision it made is in the
			// database long since, which decides alone now. Reloading it
			// would only answer UNAVAILABLE for ever.
			return true, nil
		}
		// Its decisions in flight reach the database before it is loaded
		// again (the consumer reloads it at the recovery marker).
		k.requestRecovery(v.Code)
		return true, Errorf(Unavailable, "voucher %s is being recovered; retry", v.Code)
	}
	if !o.decidedAtGate() {
		return true, nil // a sync-mode order released before: the database answers
	}
	return false, nil
}

// recordDecision publishes a decision of the gate (again, for a retry:
// applying it twice changes nothing). The gate's record is the answer; no
// database read.
func (k *kafkaFlash) recordDecision(ctx context.Context, res Reservation, kind EventKind) error {
	err := k.fault(ctx, StepDecided, res.OrderID)
	if err == nil {
		err = k.publish(ctx, NewEvent(kind, res, clockNow()))
	}
	if err == nil {
		err = k.fault(ctx, StepPublished, res.OrderID)
	}
	if err != nil {
		// The gate has decided; the event did not (surely) get through. A
		// retry publishes it again; the expiry sweep does for a confirm.
		k.logger.WarnContext(ctx, "decision not published", "kind", kind, "code", res.VoucherCode, "order", res.OrderID, "err", err)
		return notRecorded(kind, res.OrderID)
	}
	return nil
}

// notRecorded is the answer for a decision the gate holds and its event
// may not: retry (the retry publishes it).
func notRecorded(kind EventKind, orderID string) error {
	return Errorf(Unavailable, "the %s of order %s is decided but not yet recorded; retry", kind, orderID)
}

// publish sends one event, waiting at most the publish timeout.
func (k *kafkaFlash) publish(ctx context.Context, ev Event) error {
	ctx, cancel := context.WithTimeout(ctx, k.publishTimeout)
	defer cancel()
	return k.publisher.Publish(ctx, ev)
}

// unclaim drops a claim on an orderId this request made for nothing. A
// claim left behind only makes a reuse of the orderId on another voucher
// ORDER_CONFLICT, which the contract allows for an orderId once reserved.
func (k *kafkaFlash) unclaim(ctx context.Context, orderID, code string) {
	if err := k.gate.UnclaimOrder(context.WithoutCancel(ctx), orderID, code); err != nil {
		k.logger.WarnContext(ctx, "order claim not dropped", "code", code, "order", orderID, "err", err)
	}
}

// claimOrder takes, in kafka mode, the orderId's claim for a reserve
// written in the request (an ordinary voucher's, a flash campaign code's)
// before its write: a flash voucher's gate reads claims, not the database,
// so a claim taken only after the write would let a flash voucher admit the
// same new orderId in between, answer 201 and have its event refused by the
// database (a lost success). ORDER_CONFLICT when another voucher holds it.
// A claim found free (or no claim, without Redis) lets the database decide
// once the events that may hold the orderId are applied (fenceClaim).
func (k *kafkaFlash) claimOrder(ctx context.Context, r ReserveRequest) error {
	owner, server, err := k.gate.ClaimOrder(ctx, r.OrderID, r.Code)
	if err != nil {
		// No flash reserve is admitted without Redis, but one admitted
		// before it went away may still be on its way to the database.
		k.logger.WarnContext(ctx, "order claim not taken; the database decides alone", "code", r.Code, "order", r.OrderID, "err", err)
		return k.fenceClaim(ctx, "")
	}
	if owner != r.Code {
		_, err := k.claimedElsewhere(ctx, r.Code, r, owner)
		return err // nil: the database holds the order on this voucher, and its write path answers it
	}
	if err := k.fenceClaim(ctx, server); err != nil {
		k.unclaim(ctx, r.OrderID, r.Code)
		return err
	}
	return nil
}

// fenceClaim waits, within the publish timeout, until a claim read on
// server can be trusted (claimFence): UNAVAILABLE when the events in flight
// are not applied by then.
func (k *kafkaFlash) fenceClaim(ctx context.Context, server string) error {
	ctx, cancel := context.WithTimeout(ctx, k.publishTimeout)
	defer cancel()
	if err := k.claims.wait(ctx, server); err != nil {
		return Errorf(Unavailable, "orders reserved a moment ago are still being recorded; retry with the same orderId")
	}
	return nil
}

// claimedElsewhere answers a reserve of an orderId that another voucher's
// claim holds (owner; "" when the gate only said so). A claim is taken
// before its write is decided, so it alone does not prove the order is
// held: ORDER_CONFLICT needs the database to hold the order, or the
// owner's gate to hold it past its admission (heldInFlight). Otherwise the
// owner's write is still being decided (or ended without a use, and its
// claim will go): UNAVAILABLE, retry, never a conflict for an orderId no
// voucher holds. A rare path: only an orderId sent to two vouchers.
func (k *kafkaFlash) claimedElsewhere(ctx context.Context, code string, r ReserveRequest, owner string) (Reservation, error) {
	if held, ok := k.heldOrder(ctx, r.OrderID); ok {
		r.Code = code
		return k.retryOf(ctx, r, held, PathKafka)
	}
	if res, err, decided := k.heldBy(ctx, code, r, owner, false); decided {
		return res, err
	}
	return Reservation{}, decidedElsewhere(r.OrderID)
}

// unchecked is the answer when rule 2 could not be asked of the database
// (down, or no answer within heldLookupTimeout): retry.
func unchecked(orderID string) error {
	return Errorf(Unavailable, "order %s could not be checked against the orders held elsewhere; retry with the same orderId", orderID)
}

// decidedElsewhere is the answer while another voucher's write of the
// orderId may still take it or give it up: retry.
func decidedElsewhere(orderID string) error {
	return Errorf(Unavailable, "order %s is being decided on another voucher; retry with the same orderId", orderID)
}

// heldInFlight: an order admitted on another flash voucher is in the
// database only once the consumer applied its event; until then its claim
// names that voucher and that voucher's gate holds it.
func (k *kafkaFlash) heldInFlight(ctx context.Context, code string, r ReserveRequest, uncertain bool) (Reservation, error, bool) {
	return k.heldBy(ctx, code, r, "", uncertain)
}

// heldBy reads the orderId's claim (owner, when not given) and the
// owner's gate: an order settled there (live, confirmed, released, lost)
// is held, ORDER_CONFLICT; one still pending may yet be given back,
// UNAVAILABLE; decided is false when no other voucher's gate holds it,
// unless uncertain (the database could not say): then another voucher's
// claim without its gate's record (an ordinary voucher's write, which may
// or may not have committed) is UNAVAILABLE. Without a claim the database's
// answer decides (refusedUnlessHeld).
func (k *kafkaFlash) heldBy(ctx context.Context, code string, r ReserveRequest, owner string, uncertain bool) (Reservation, error, bool) {
	if owner == "" {
		o, ok, server, err := k.gate.OrderOwner(ctx, r.OrderID)
		if err != nil {
			return Reservation{}, nil, false
		}
		if !ok {
			if uncertain || k.claims.trusted(server) {
				return Reservation{}, nil, false
			}
			return k.heldAfterFence(ctx, code, r, server)
		}
		owner = o
	}
	if owner == code {
		return Reservation{}, nil, false
	}
	o, ok, err := k.gate.Order(ctx, owner, r.OrderID)
	switch {
	case err == nil && ok && o.Pending:
		return Reservation{}, decidedElsewhere(r.OrderID), true
	case err == nil && ok && !o.Void:
		return Reservation{}, Errorf(OrderConflict, "order %s was already used with another voucher", r.OrderID), true
	case uncertain:
		return Reservation{}, decidedElsewhere(r.OrderID), true
	}
	return Reservation{}, nil, false
}

// heldAfterFence answers a refusal's rule 2 when neither the database nor a
// claim holds the orderId, but the claim was read on a Redis server this
// process has not settled (a failover to a replica that lagged, a restart
// that lost the data): the claims of events still in flight may be gone
// there, and the database knows those orders only once they are applied.
// So it waits for them (claimFence) and asks the database again (explorer
// seed 7: an order reserved and released on one flash voucher, refused
// OUT_OF_STOCK on another just after a failover, its events in flight).
// decided is false when the refusal stands.
func (k *kafkaFlash) heldAfterFence(ctx context.Context, code string, r ReserveRequest, server string) (Reservation, error, bool) {
	if err := k.fenceClaim(ctx, server); err != nil {
		return Reservation{}, err, true
	}
	held, found, err := k.lookupOrder(ctx, r.OrderID)
	switch {
	case err != nil:
		return Reservation{}, unchecked(r.OrderID), true
	case found:
		r.Code = code
		res, err := k.retryOf(ctx, r, held, PathKafka)
		return res, err, true
	}
	return Reservation{}, nil, false
}

// unclaimOrder drops the claim claimOrder took when the database refused
// the write with a refusal that says the order holds nothing on the voucher
// (sold out, limits, terms): the orderId is free for another voucher. Any
// other outcome keeps it: a write that may have committed, or an order the
// voucher held before (released, or with other terms).
func (k *kafkaFlash) unclaimOrder(ctx context.Context, r ReserveRequest, err error) {
	switch ErrorCodeOf(err) {
	case OutOfStock, AlreadyUsed, NotEligible, BudgetExhausted, NotFound, InvalidInput:
		k.unclaim(ctx, r.OrderID, r.Code)
	}
}

// expireDue is ExpireDue for the Kafka write path: for a flash voucher
// the gate decides first, so an order confirmed at the gate (its event still
// on its way) is never expired, and a confirm racing the sweep either
// confirms or is refused, never both. The gate outlives every reservation
// of its voucher (ExpireAt is past endsAt + the TTL), so it decides after
// the sale too.
func (k *kafkaFlash) expireDue(pass context.Context, limit int) (int, error) {
	due, err := k.events.DueReservations(pass, limit)
	if err != nil {
		return 0, err
	}
	n := 0
	defer func() { k.obs.ReservationsExpired(n) }()
	// Why due reservations were left for a later pass, logged once a pass:
	// an expiry that never happens is otherwise silent (explorer seed 50).
	var left map[GateDecision]int
	defer func() {
		if len(left) > 0 {
			k.logger.InfoContext(pass, "expiry: due reservations left for a later pass, by the gate's answer", "left", left)
		}
	}()
	for _, d := range due {
		ctx, cancel, err := sweepStep(pass)
		if err != nil {
			return n, err
		}
		expired, why, err := k.expireOne(ctx, d)
		cancel()
		if expired {
			n++
		}
		if why != "" {
			if left == nil {
				left = map[GateDecision]int{}
			}
			left[why]++
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// expireOne releases one due reservation unless the gate says otherwise
// (confirmed there, or not decidable now: a later pass tries again, and
// left is the gate's answer).
func (k *kafkaFlash) expireOne(ctx context.Context, d DueReservation) (expired bool, left GateDecision, err error) {
	if d.Flash {
		decision, o, err := k.gate.MarkReleased(ctx, d.VoucherCode, d.OrderID, true)
		if err != nil {
			k.logger.WarnContext(ctx, "expiry: gate did not answer; next pass", "code", d.VoucherCode, "order", d.OrderID, "err", err)
			return false, "NO_ANSWER", nil
		}
		switch decision {
		case DecisionPaused, DecisionNotDue, DecisionPending:
			return false, decision, nil
		case DecisionNotLoaded, DecisionStale:
			if k.gateOutlived(ctx, d.VoucherCode) {
				break // the gate is gone for good: only the database knows
			}
			k.requestRecovery(d.VoucherCode)
			return false, decision, nil // after the recovery, which applies the decisions in flight first
		case DecisionConfirmed:
			if o.decidedAtGate() {
				// Confirmed at the gate; its event is late or was not
				// published: send it (again) rather than expire.
				if err := k.publish(ctx, NewEvent(EventConfirmed, d.Reservation, clockNow())); err != nil {
					k.logger.WarnContext(ctx, "expiry: confirmed event not published; next pass", "code", d.VoucherCode, "order", d.OrderID, "err", err)
				}
				return false, decision, nil
			}
		}
		// RELEASED_NOW, RELEASED (its event late or lost), UNKNOWN,
		// LEGACY: the database releases the row.
	}
	if err := k.fault(ctx, StepSweep, d.OrderID); err != nil {
		return false, "", err
	}
	res, expired, err := k.events.ExpireReservation(ctx, d.OrderID)
	if err != nil {
		return false, "", err
	}
	if !expired {
		res = d.Reservation
	}
	// Whether this sweep or the consumer released the row, the database
	// no longer counts the use: the gate may give it back (once).
	k.releaseGate(ctx, res)
	return expired, "", nil
}

// gateOutlived reports whether a voucher's gate has expired for good (past
// its ExpireAt): its reservations' decisions are all the database's then.
func (k *kafkaFlash) gateOutlived(ctx context.Context, code string) bool {
	v, err := k.meta.get(ctx, code, k.store.Voucher)
	return err == nil && clockNow().After(gateExpireAt(v, k.ttl))
}

// gateExpireAt is when a voucher's gate may go: a week past the end of its
// window and the last reservation's TTL, so it decides every confirm,
// release and expiry of its reservations.
func gateExpireAt(v Voucher, ttl time.Duration) time.Time {
	return v.EndsAt.Add(ttl + 7*24*time.Hour)
}

// warm asks the consumer to load the voucher's gate if it is not healthy
// (not loaded, or on another Redis server than it was loaded on, or marked
// as having lost data). The load happens at a recovery marker in the
// voucher's partition, after every event published before it, so the
// snapshot it loads holds every decision the old gate answered; admissions
// still on their way are settled against the new gate (apply_check.lua).
func (k *kafkaFlash) warm(ctx context.Context, code string) error {
	ok, server, err := k.gate.Healthy(ctx, code)
	if err != nil {
		return unavailable(err)
	}
	if !ok {
		if err := k.publishRecovery(ctx, code, false, "", server); err != nil {
			return unavailable(err)
		}
	}
	return nil
}

// requestRecovery publishes a recovery marker for a voucher in the
// background, at most once a second per voucher in this process, so
// requests answer UNAVAILABLE at once instead of waiting for it.
func (k *kafkaFlash) requestRecovery(code string) {
	k.mu.Lock()
	if time.Since(k.recovering[code]) < time.Second {
		k.mu.Unlock()
		return
	}
	k.recovering[code] = time.Now()
	k.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*k.publishTimeout)
		defer cancel()
		ok, server, err := k.gate.Healthy(ctx, code)
		if err != nil || ok {
			return // Redis does not answer (the next request asks again), or the gate is fit
		}
		if err := k.publishRecovery(ctx, code, false, "", server); err != nil {
			k.logger.WarnContext(ctx, "recovery marker not published; the next request asks again", "code", code, "err", err)
		}
	}()
}

// publishRecovery publishes a recovery marker: the consumer reloads the
// voucher's gate when it reaches it (rebuild: over whatever it holds, with
// the given epoch; else only if the gate is not healthy and incident, the
// server it was unhealthy on, still serves it).
func (k *kafkaFlash) publishRecovery(ctx context.Context, code string, rebuild bool, epoch, incident string) error {
	id, err := newEpoch()
	if err != nil {
		return err
	}
	return k.publish(ctx, Event{ID: "recover:" + code + ":" + id, Kind: EventRecover, Code: code, Rebuild: rebuild, Epoch: epoch, Incident: incident, DecidedAt: clockNow()})
}

// recoverAtMarker reloads a voucher's gate from the database at a recovery
// marker. Every event before the marker in the voucher's partition has been
// applied (unchecked, if the gate could not judge it), so the snapshot holds
// every decision the old gate answered.
func (k *kafkaFlash) recoverAtMarker(ctx context.Context, ev Event) error {
	if !ev.Rebuild {
		ok, server, err := k.gate.Healthy(ctx, ev.Code)
		if err != nil || ok {
			return err
		}
		if ev.Incident != "" && ev.Incident != server {
			// Another incident since: its own markers reload the gate.
			k.logger.InfoContext(ctx, "recovery marker of an earlier incident skipped", "code", ev.Code, "incident", ev.Incident, "server", server)
			return nil
		}
	}
	v, err := k.store.Voucher(ctx, ev.Code)
	// Nothing of this path to load: no voucher, not a flash one, or a
	// campaign's (its gate is Service.campaigns'); retrying would hold up
	// the partition for ever.
	if ErrorCodeOf(err) == NotFound || (err == nil && (!v.Flash || IsCampaignGate(gateCode(v)))) {
		return nil
	}
	if err != nil {
		return err
	}
	mode, epoch := "recover", ev.Epoch
	if ev.Rebuild {
		mode = "replace"
	}
	k.dropReloaded(ctx, ev.Code)
	installed, err := k.loadGate(ctx, v, mode, epoch)
	if err != nil {
		return err
	}
	if ev.Rebuild {
		k.noteReloaded(ev.Code, epoch)
	}
	if installed {
		k.logger.InfoContext(ctx, "gate reloaded from the database at a recovery marker", "code", ev.Code, "rebuild", ev.Rebuild)
	}
	return nil
}

// noteReloaded remembers that the gate of code was reloaded at the marker
// of the rebuild with epoch.
func (k *kafkaFlash) noteReloaded(code, epoch string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	for c, epochs := range k.reloadedAt {
		for e, at := range epochs {
			if now.Sub(at) > markerPause {
				delete(epochs, e)
			}
		}
		if len(epochs) == 0 {
			delete(k.reloadedAt, c)
		}
	}
	if k.reloadedAt[code] == nil {
		k.reloadedAt[code] = map[string]time.Time{}
	}
	k.reloadedAt[code][epoch] = now
}

// dropReloaded takes the markers this process has reloaded the gate at out
// of the gate's pending markers before another reload, whose load.lua then
// lifts the pause if no other marker is pending. A marker reloaded at is
// never pending again, but a Redis failover to a replica that lagged brings
// back the pending entry (and the pause) the reload removed: without this
// the sale stayed paused, and expired reservations held, until markerPause
// (explorer seed 13: a rebuild, then a failover to a lagging replica). The
// consumer that reloaded at the marker is usually the one that reaches the
// next; one that did not (a rebalance between the two) still waits out the
// bound.
func (k *kafkaFlash) dropReloaded(ctx context.Context, code string) {
	k.mu.Lock()
	epochs := make([]string, 0, len(k.reloadedAt[code]))
	for e := range k.reloadedAt[code] {
		epochs = append(epochs, e)
	}
	k.mu.Unlock()
	for _, e := range epochs {
		if err := k.gate.MarkerDropped(ctx, code, e); err != nil {
			k.logger.WarnContext(ctx, "a rebuild marker reloaded at is still pending at the gate; it lapses within its bound", "code", code, "err", err)
			return
		}
	}
}

// loadGate reads a voucher's snapshot, every order with its state and
// times, and installs it with the voucher's terms (mode as Gate.Recover).
func (k *kafkaFlash) loadGate(ctx context.Context, v Voucher, mode, epoch string) (bool, error) {
	snap, err := k.events.GateSnapshotAll(ctx, v.Code)
	if err != nil {
		return false, err
	}
	snap.ExpireAt = gateExpireAt(v, k.ttl)
	if epoch == "" {
		if epoch, err = newEpoch(); err != nil {
			return false, err
		}
	}
	terms := GateTerms{
		Epoch: epoch, StartsAt: v.StartsAt, EndsAt: v.EndsAt, DatabaseNow: snap.TakenAt,
		MinOrderAmount: v.MinOrderAmount, TTL: k.ttl, Lease: k.lease,
	}
	installed, err := k.gate.Recover(ctx, snap, terms, mode)
	if err != nil {
		return false, unavailable(err)
	}
	return installed, nil
}

// load installs a new voucher's gate at once: no event can exist for it
// yet. Every other load goes through the consumer's marker.
func (k *kafkaFlash) load(ctx context.Context, v Voucher) error {
	_, err := k.loadGate(ctx, v, "load", "")
	return err
}

// markerPause bounds the pause of a rebuild whose marker is on the broker:
// the consumer's reload at the marker lifts it, this only if the marker is
// never reached.
const markerPause = 10 * time.Minute

// rebuild has the consumer rebuild a paused gate at a marker in the
// voucher's partition, after every event before it, and waits for it: the
// new gate's epoch shows it is done. A retried load with the same epoch
// changes nothing, so a reply lost and sent again cannot overwrite the
// admissions made since.
func (k *kafkaFlash) rebuild(ctx context.Context, code string) error {
	epoch, err := newEpoch()
	if err != nil {
		return err
	}
	// The gate is paused: it decides nothing new, and no admission is
	// finalized (admission.lua). A decision made just before the pause may
	// still be on its way to the broker; its publish ends within the
	// publish timeout, so the marker published after it lies behind the
	// decision's event and the reload holds it (a confirm answered 200 whose
	// event came after the marker would leave the gate live while the
	// database says CONFIRMED).
	stop := k.gate.KeepPaused(ctx, code, pauseHold)
	select {
	case <-time.After(k.publishTimeout):
	case <-ctx.Done():
		stop()
		return unavailable(ctx.Err())
	}
	// A pause that lapsed in the wait (Redis unreachable for the renewals)
	// let the gate decide meanwhile: a marker now would reload it without
	// those decisions.
	if held, err := k.gate.HoldPause(ctx, code, pauseHold); err != nil || !held {
		stop()
		return Errorf(Unavailable, "the pause of %s lapsed before its rebuild; rebuild again", code)
	}
	// Other rebuilds' markers may be on the broker already, ahead of the
	// consumer: the reload at the first of them must not lift the pause
	// while this one is still to come (explorer seed 58: three rebuilds at
	// once, and an order admitted after the first reload lay behind the
	// other markers, which forgot it after its 201).
	if err := k.gate.MarkerPending(ctx, code, epoch, markerPause); err != nil {
		stop()
		return unavailable(err)
	}
	err = k.publishRecovery(ctx, code, true, epoch, "")
	stop()
	if err != nil {
		if !errors.Is(err, ErrPublishUnknown) {
			// Surely not on the broker: it holds no pause (one that may be
			// there holds it until the reload at it, or markerPause).
			if derr := k.gate.MarkerDropped(context.WithoutCancel(ctx), code, epoch); derr != nil {
				k.logger.WarnContext(ctx, "a rebuild's unpublished marker still holds the pause until it lapses", "code", code, "err", derr)
			}
		}
		return unavailable(err) // the pause lapses within pauseHold
	}
	// The marker is on the broker: the pause lasts until the consumer's
	// reload at it lifts it (the gate's own bound), whether or not this
	// process lives to see it.
	if _, err := k.gate.HoldPause(ctx, code, markerPause); err != nil {
		k.logger.WarnContext(ctx, "a rebuild's pause not extended until its marker; it lapses within seconds", "code", code, "err", err)
	}
	for {
		snap, ok, err := k.gate.Snapshot(ctx, code)
		if err == nil && ok && snap.Epoch == epoch {
			k.logger.InfoContext(ctx, "gate rebuilt from the database", "code", code, "remaining", snap.Remaining)
			return nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return Errorf(Unavailable, "the rebuild of %s is queued behind the events in flight; it completes without you", code)
		}
	}
}

// settle waits until the events already published have been applied.
func (k *kafkaFlash) settle(ctx context.Context) error {
	if k.pending == nil {
		return nil // nothing to wait with (KafkaPath.Pending unset)
	}
	return k.pending.Settle(ctx)
}

// reconcileOrders repairs the orders the gate holds and the database does
// not once the events in flight are applied: a pending admission past its
// lease is voided (its owner died or never learnt its publish's outcome; a
// late event of it is skipped), and a live one (its success was answered)
// has its events published again from the gate's record, so an event the
// broker lost is made good. One still missing a pass later is alerted and
// logged at ERROR: never given back silently. A lost use (a dead letter)
// raises the alert every pass.
func (k *kafkaFlash) reconcileOrders(ctx context.Context, gateSnap GateSnapshot, d *DriftReport, previous DriftReport, settled bool) []string {
	code := d.VoucherCode
	out := k.republishOrders(ctx, code, gateSnap, d.OrdersOnlyInGate, previous, settled)
	lost := 0
	for _, o := range gateSnap.Orders {
		if o.Lost && !o.Void {
			lost++
		}
	}
	if lost > 0 {
		k.logger.ErrorContext(ctx, "uses lost: the database refused events of admissions the gate holds (dead letters)", "code", code, "lost", lost)
		d.Alert = true
	}
	return out
}

func (k *kafkaFlash) republishOrders(ctx context.Context, code string, gateSnap GateSnapshot, onlyInGate []string, previous DriftReport, settled bool) []string {
	if !settled {
		return nil
	}
	v, err := k.meta.get(ctx, code, k.store.Voucher)
	if err != nil {
		return nil
	}
	orders := make(map[string]GateOrder, len(gateSnap.Orders))
	for _, o := range gateSnap.Orders {
		orders[o.OrderID] = o
	}
	epoch := gateSnap.Epoch
	voided, republished, missing, givenBack := 0, 0, 0, 0
	for _, id := range onlyInGate {
		o := orders[id]
		if o.Pending {
			if a, _, err := k.gate.Settle(ctx, code, SettleVoid, o, epoch, v.OrderDiscount(o)); err == nil && a == SettleOK {
				voided++
			}
			continue
		}
		if o.Releasing || o.Confirmed {
			// Released (or, confirmed here, rolled back) in the database,
			// its use still held here: the give-back after the database's
			// change never ran (a crash between the two, or Redis away
			// longer than its retries). The events in flight are applied,
			// so nothing else will give it.
			res, err := k.store.Reservation(ctx, id)
			if err == nil && (o.Releasing && res.Status == StatusReleased || o.Confirmed && res.Status == StatusRolledBack) {
				k.useBack(ctx, code, id, res.DiscountAmount)
				givenBack++
				continue
			}
		}
		if slices.Contains(previous.OrdersOnlyInGate, id) {
			missing++
		}
		res := k.reservationOf(v, o, StatusReserved)
		ev := NewEvent(EventReserved, res, res.CreatedAt)
		ev.Epoch = epoch
		if err := k.publish(ctx, ev); err != nil {
			continue
		}
		if o.Confirmed {
			_ = k.publish(ctx, NewEvent(EventConfirmed, k.reservationOf(v, o, StatusConfirmed), clockNow()))
		}
		republished++
	}
	var out []string
	if givenBack > 0 {
		out = append(out, fmt.Sprintf("gave back the use of %d order(s) released or rolled back in the database and still held at the gate", givenBack))
	}
	if voided > 0 {
		out = append(out, fmt.Sprintf("voided %d admission(s) past their lease (never answered as a success)", voided))
	}
	if republished > 0 {
		out = append(out, fmt.Sprintf("published the events of %d answered reservation(s) the database lacks again", republished))
	}
	if missing > 0 {
		k.logger.ErrorContext(ctx, "answered reservations still missing from the database a pass after their events were published again", "code", code, "orders", missing)
	}
	return out
}

// newEpoch is a fresh random id for a gate load or a marker.
func newEpoch() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// fault runs the test's hook at a step; nil in production (one comparison).
func (k *kafkaFlash) fault(ctx context.Context, step FaultStep, orderID string) error {
	if k.faults == nil {
		return nil
	}
	return k.faults(ctx, step, orderID)
}

// accepts every voucher: admit.lua keeps the budget with the stock, the
// settle and apply scripts give it back or take it with the use, and every
// load sets it from the database's snapshot.
func (k *kafkaFlash) accepts(NewVoucher) error { return nil }

func (k *kafkaFlash) deadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	return k.events.DeadLetters(ctx, limit)
}
