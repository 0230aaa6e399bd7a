package voucher

// The Kafka write path of flash vouchers (FLASH_WRITE_PATH=kafka).
//
// In sync mode a flash winner is written to the database in its request, so
// the database stays the decision point after the gate. Here the database
// learns of a flash reservation only when the consumer applies its event, so
// every decision about a flash reservation is taken atomically at the gate,
// which remembers each order's state (live, confirmed, releasing, released)
// and times, and the events carry the decisions to the database:
//
//   - reserve: the gate admits (one use taken), the reserved event is
//     published, and the answer (built from what the service computed) is
//     given only once the broker acknowledged it (acks=all). A publish that
//     surely failed gives the use back (Forget) and answers UNAVAILABLE; one
//     whose outcome is unknown keeps the use held, like the sync path's
//     unknown database write: a retry publishes again, and reconciliation
//     returns the use if the order never reaches the database.
//   - confirm, release and expiry decide at the gate (confirm.lua,
//     mark_released.lua), then publish. A release keeps its use counted at
//     the gate until the database has released the row: the consumer (or the
//     expiry sweep) then gives it back with release.lua. Giving it back at
//     once would let another order take the use while the database still
//     counted it; that order's event, applied before the release in a
//     sold-out voucher, would be refused after its success was returned.
//   - events are self-sufficient (every field of the reservation) and
//     idempotent (orderId + kind), all of one voucher on one partition in
//     the order they were acknowledged: a confirm or release sent right after
//     a reserve is applied after it, and even a lost reserved event is made
//     good by the confirmed or released event that follows it.
//
// While a reserved event is in flight, the gate answers confirm and release
// (and an identical retry of the reserve) without the database; the
// `reservation` query and the voucher's counters follow the database and may
// trail by the consumer's delay, as the contract allows.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// EventKind is what an event of the Kafka write path tells the database.
type EventKind string

// The events, one per decision of the gate.
const (
	EventReserved  EventKind = "reserved"
	EventConfirmed EventKind = "confirmed"
	EventReleased  EventKind = "released"
	// EventRecover is a marker, not a decision: the consumer reloads the
	// voucher's gate from the database when it reaches it.
	EventRecover EventKind = "recover"
)

// Event is one decision of the gate about a flash reservation, on its way to
// the database. It carries the whole reservation, so applying it never needs
// an earlier event.
type Event struct {
	// ID is orderId:kind: publishing a decision again (a retry) sends the
	// same event, and applying it twice changes nothing.
	ID             string
	Kind           EventKind
	OrderID        string
	Code           string
	CustomerID     int64
	OrderAmount    int64
	DiscountAmount int64
	CreatedAt      time.Time
	ExpiresAt      time.Time
	// DecidedAt is when the gate decided (confirmedAt or releasedAt).
	DecidedAt time.Time
	// Epoch is the gate load a reserved event's admission was made in (for
	// a rebuild's marker: the epoch it installs); CreatedAt is its token.
	Epoch string
	// Rebuild marks an operator's rebuild marker (EventRecover).
	Rebuild bool
}

// NewEvent returns the event of kind for a reservation.
func NewEvent(kind EventKind, res Reservation, decidedAt time.Time) Event {
	return Event{
		ID: res.OrderID + ":" + string(kind), Kind: kind,
		OrderID: res.OrderID, Code: res.VoucherCode, CustomerID: res.CustomerID,
		OrderAmount: res.OrderAmount, DiscountAmount: res.DiscountAmount,
		CreatedAt: res.CreatedAt, ExpiresAt: res.ExpiresAt, DecidedAt: decidedAt,
	}
}

// EventPublisher sends events to the broker.
type EventPublisher interface {
	// Publish returns nil once the broker acknowledged the event (acks=all).
	// An error wrapping ErrPublishUnknown means it may still be written;
	// any other error means it surely was not.
	Publish(ctx context.Context, ev Event) error
}

// ErrPublishUnknown is a publish whose outcome is unknown: the event may
// still reach the broker.
var ErrPublishUnknown = errors.New("the event may or may not have been written")

// EventRefusedError is an event the database refuses (a CHECK or a
// reservation's state says the gate was wrong): it goes to the dead letters.
type EventRefusedError struct{ Reason string }

func (e *EventRefusedError) Error() string { return "event refused: " + e.Reason }

// DueReservation is a RESERVED reservation past its deadline.
type DueReservation struct {
	Reservation
	Flash bool
}

// DeadLetter is an event the consumer could not apply, kept for operators.
type DeadLetter struct {
	ID          int64
	EventID     string
	Topic       string
	Partition   int32
	Offset      int64
	VoucherCode string
	OrderID     string
	Kind        string
	Reason      string
	Payload     string
	CreatedAt   time.Time
	// Event is the refused event when it could be read (not stored).
	Event *Event
}

// EventStore is the database side of the Kafka write path.
type EventStore interface {
	// ApplyEvent applies one event in one transaction and returns the
	// reservation's status after it: *EventRefusedError when the database
	// refuses it; any other error is transient.
	ApplyEvent(ctx context.Context, ev Event) (Status, error)
	// ApplyReservedBatch applies reserved events of one voucher in one
	// transaction; applied[i] is false for an event whose order the
	// database held already (ApplyEvent it). Any error means nothing was
	// applied.
	ApplyReservedBatch(ctx context.Context, evs []Event) (applied []bool, err error)
	// DueReservations lists up to limit RESERVED reservations past their
	// deadline, oldest deadline first.
	DueReservations(ctx context.Context, limit int) ([]DueReservation, error)
	// ExpireReservation releases one reservation if it is still RESERVED and
	// past its deadline; expired is false when it was not.
	ExpireReservation(ctx context.Context, orderID string) (res Reservation, expired bool, err error)
	// SaveDeadLetter keeps a dead letter (once per topic position).
	SaveDeadLetter(ctx context.Context, dl DeadLetter) error
	// DeadLetters lists the latest dead letters, newest first.
	DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error)
	// GateSnapshotAll is Store.GateSnapshot with released orders too, and
	// the database's clock: NOT_FOUND.
	GateSnapshotAll(ctx context.Context, code string) (GateSnapshot, error)
}

// KafkaPath is what the service needs for FLASH_WRITE_PATH=kafka. Deps.Pending
// must be set too: warm-up and rebuild wait for the events in flight.
type KafkaPath struct {
	Publisher EventPublisher
	Store     EventStore
	// PublishTimeout bounds how long a request waits for the broker's
	// acknowledgement; default 3s.
	PublishTimeout time.Duration
	// Lease is how long an admission's owner has to settle it before a
	// retry may adopt it or reconciliation void it; default twice the
	// publish timeout plus 5s (a claim, a publish and a settle).
	Lease time.Duration
	// Faults, for tests only, is called at each FaultStep of a request or
	// of the consumer; an error stops it there as a crash would.
	Faults func(ctx context.Context, step FaultStep, orderID string) error
}

func (k *KafkaPath) lease() time.Duration {
	if k.Lease > 0 {
		return k.Lease
	}
	return 2*k.publishTimeout() + 5*time.Second
}

func (k *KafkaPath) publishTimeout() time.Duration {
	if k == nil || k.PublishTimeout <= 0 {
		return 3 * time.Second
	}
	return k.PublishTimeout
}

// kafkaState is the service's Kafka write path and its gate recoveries.
type kafkaState struct {
	KafkaPath
	mu         sync.Mutex
	recovering map[string]time.Time // when this process last asked for a voucher's recovery
}

func newKafkaState(k *KafkaPath) *kafkaState {
	if k == nil {
		return nil
	}
	return &kafkaState{KafkaPath: *k, recovering: map[string]time.Time{}}
}

// GateDecision is the gate's answer to a confirm, release or expiry in kafka
// mode (confirm.lua, mark_released.lua).
type GateDecision string

// The decisions.
const (
	DecisionPaused       GateDecision = "PAUSED"        // an operator is rebuilding the gate
	DecisionNotLoaded    GateDecision = "NOT_LOADED"    // the gate holds nothing for the voucher
	DecisionUnknown      GateDecision = "UNKNOWN"       // the gate does not know the order
	DecisionLegacy       GateDecision = "LEGACY"        // a sync-mode order: the database decides
	DecisionReleased     GateDecision = "RELEASED"      // released before
	DecisionConfirmed    GateDecision = "CONFIRMED"     // confirmed before
	DecisionExpired      GateDecision = "EXPIRED"       // confirm: live but past expiresAt
	DecisionNotDue       GateDecision = "NOT_DUE"       // expiry: live, not yet past expiresAt
	DecisionConfirmedNow GateDecision = "CONFIRMED_NOW" // confirm: confirmed by this call
	DecisionReleasedNow  GateDecision = "RELEASED_NOW"  // release or expiry: released by this call
	DecisionStale        GateDecision = "STALE"         // the gate is on another Redis server or lost data
	DecisionPending      GateDecision = "PENDING"       // the order's admission is not settled yet
)

// reserveFlashKafka is reserveFlash for the Kafka write path. It reads and
// writes only the gate and the broker: the gate decides (admit.lua, on its
// own clock), the reserved event carries the decision, and the answer is a
// success only once the broker acknowledged the event and the gate settled
// the admission as live (or the consumer applied it first).
func (s *Service) reserveFlashKafka(ctx context.Context, v Voucher, r ReserveRequest, path *Path) (Reservation, error) {
	if verdict, ok := s.soldOut.verdict(v.Code, r); ok && (verdict == GateOutOfStock || verdict == GateAlreadyUsed) {
		*path = PathGateMemory
		return s.afterGate(ctx, v, r, verdict)
	}
	*path = PathKafka
	a, err := s.gate.Admit(ctx, v.Code, r)
	// An identical request whose first copy is still being settled waits
	// for its outcome (concurrent duplicates all succeed), polling the gate,
	// within the publish timeout and its own deadline.
	for wait, deadline := 2*time.Millisecond, time.Now().Add(s.kafka.publishTimeout()+time.Second); err == nil && a.Verdict == GatePending && time.Now().Before(deadline); {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return Reservation{}, unavailable(ctx.Err())
		}
		wait = min(2*wait, 50*time.Millisecond)
		a, err = s.gate.Admit(ctx, v.Code, r)
	}
	if err != nil {
		return Reservation{}, unavailable(err)
	}
	switch a.Verdict {
	case GateAdmitted, GateAdopted:
		return s.admitKafka(ctx, v, r, a)
	case GateDuplicate:
		return s.duplicateKafka(ctx, v, r, a)
	case GateNotLoaded, GateStale:
		s.requestRecovery(v.Code)
		return Reservation{}, Errorf(Unavailable, "the sale of %s is being prepared; retry with the same orderId", v.Code)
	case GatePaused:
		return Reservation{}, Errorf(Unavailable, "voucher %s is being rebuilt; retry with the same orderId", v.Code)
	case GatePending:
		return Reservation{}, Errorf(Unavailable, "the reservation for order %s is being decided; retry with the same orderId", r.OrderID)
	case GateLost:
		s.logger.ErrorContext(ctx, "a retry of an order whose event the database refused", "code", v.Code, "order", r.OrderID)
		return Reservation{}, Errorf(Unavailable, "the reservation for order %s could not be recorded; operators are alerted", r.OrderID)
	case GateNotEligible:
		return Reservation{}, Errorf(NotEligible, "voucher %s is not valid now or not for an order of %d", v.Code, r.OrderAmount)
	case GateReleased:
		return Reservation{}, Errorf(ReservationReleased, "the reservation for order %s was released", r.OrderID)
	case GateOrderConflict:
		return Reservation{}, Errorf(OrderConflict, "order %s was already used with another customer or amount", r.OrderID)
	case GateClaimedElsewhere:
		return Reservation{}, Errorf(OrderConflict, "order %s was already used with another voucher", r.OrderID)
	case GateOutOfStock:
		s.noteSoldOut(ctx, v.Code)
	}
	return s.afterGate(ctx, v, r, a.Verdict) // ALREADY_USED, OUT_OF_STOCK
}

// admitKafka carries an admission (or an adopted one) to the broker and
// settles it. Only this request may give its use back, and only while it is
// pending: Settle is a compare-and-set on the admission's token.
func (s *Service) admitKafka(ctx context.Context, v Voucher, r ReserveRequest, a Admission) (Reservation, error) {
	held := s.reservationOf(v, a.Order, StatusReserved)
	if err := s.fault(ctx, StepAdmitted, r.OrderID); err != nil {
		return Reservation{}, unavailable(err) // the owner "died": its admission stays pending
	}
	// The gate's keys are per voucher: the orderId may have been reserved on
	// another voucher. The claim sees that (every reservation claims it); on
	// a single Redis admit.lua made it already.
	if !a.Claimed {
		owner, err := s.gate.ClaimOrder(ctx, r.OrderID, v.Code)
		if err != nil {
			s.giveBack(ctx, v, a)
			return Reservation{}, unavailable(err)
		}
		if owner != v.Code {
			s.giveBack(ctx, v, a)
			return Reservation{}, Errorf(OrderConflict, "order %s was already used with another voucher", r.OrderID)
		}
	}
	if err := s.fault(ctx, StepClaimed, r.OrderID); err != nil {
		return Reservation{}, unavailable(err)
	}
	ev := NewEvent(EventReserved, held, held.CreatedAt)
	ev.Epoch = a.Epoch
	if err := s.publish(ctx, ev); err != nil {
		if errors.Is(err, ErrPublishUnknown) {
			// It may still be written: the admission stays pending. A retry
			// past its lease adopts it, or reconciliation voids it; a late
			// event of a voided admission is skipped by the consumer.
			s.logger.WarnContext(ctx, "reserved event outcome unknown; the admission stays pending", "code", v.Code, "order", r.OrderID, "err", err)
			return Reservation{}, unavailable(err)
		}
		// Surely not written: the use goes back, unless the consumer
		// applied the event anyway (then it stands, and so does the answer).
		if s.giveBack(ctx, v, a) {
			return held, nil
		}
		s.unclaim(ctx, r.OrderID, v.Code)
		return Reservation{}, unavailable(err)
	}
	if err := s.fault(ctx, StepPublished, r.OrderID); err != nil {
		return Reservation{}, unavailable(err)
	}
	answer, after, err := s.gate.Settle(ctx, v.Code, SettleFinalize, a.Order, a.Epoch)
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
		s.requestRecovery(v.Code)
	}
	// FAIL: a retry adopted the admission, or the gate was reloaded without
	// it and it is void now: not a success, and the consumer skips its event.
	return Reservation{}, Errorf(Unavailable, "the reservation for order %s is being decided; retry with the same orderId", r.OrderID)
}

// giveBack gives a pending admission's use back (compare-and-set on its
// token); it reports true when the admission turned out to be live (the
// consumer applied its event), so its success stands.
func (s *Service) giveBack(ctx context.Context, v Voucher, a Admission) (live bool) {
	answer, after, err := s.gate.Settle(context.WithoutCancel(ctx), v.Code, SettleForget, a.Order, a.Epoch)
	if err != nil {
		// Still pending: its lease runs out and reconciliation voids it.
		s.logger.WarnContext(ctx, "admission not given back; reconciliation voids it after its lease", "code", v.Code, "order", a.Order.OrderID, "err", err)
		return false
	}
	return answer == SettleFail && sameAdmission(after, a.Order) && !after.Pending && !after.Void && !after.Lost
}

func sameAdmission(a, b GateOrder) bool {
	return a.OrderID == b.OrderID && a.CreatedAt.Equal(b.CreatedAt)
}

// duplicateKafka answers a retry of an order the gate holds live or
// confirmed: its success stands (settled after the broker's acknowledgement,
// or applied), so the gate's record is the answer. The claim is made again:
// a first request whose reply was lost may have died before it.
func (s *Service) duplicateKafka(ctx context.Context, v Voucher, r ReserveRequest, a Admission) (Reservation, error) {
	if a.Order.CreatedAt.IsZero() {
		return s.afterGate(ctx, v, r, GateDuplicate) // a sync-mode order: the database answers
	}
	if owner, err := s.gate.ClaimOrder(ctx, r.OrderID, v.Code); err == nil && owner != v.Code {
		s.logger.ErrorContext(ctx, "an order live on two vouchers' gates", "code", v.Code, "other", owner, "order", r.OrderID)
	}
	status := StatusReserved
	if a.Order.Confirmed {
		status = StatusConfirmed
	}
	return s.reservationOf(v, a.Order, status), nil
}

// reservationOf is the reservation the gate's record of an order stands for.
func (s *Service) reservationOf(v Voucher, o GateOrder, status Status) Reservation {
	return Reservation{
		OrderID: o.OrderID, VoucherCode: v.Code, CustomerID: o.CustomerID, OrderAmount: o.OrderAmount,
		DiscountAmount: v.DiscountAmount, Status: status, CreatedAt: o.CreatedAt, ExpiresAt: o.ExpiresAt,
	}
}

// confirmKafka decides a confirm of a flash reservation at the gate; decided
// is false when the database decides it as in sync mode (not flash, a
// sync-mode order).
func (s *Service) confirmKafka(ctx context.Context, code, orderID string) (res Reservation, decided bool, err error) {
	v, ok, err := s.kafkaVoucher(ctx, code)
	if !ok {
		return Reservation{}, err != nil, err
	}
	now := time.Now()
	decision, o, err := s.gate.Confirm(ctx, code, orderID, now)
	if err != nil {
		return Reservation{}, true, unavailable(err)
	}
	if done, err := s.undecided(v, orderID, decision, o); done {
		return Reservation{}, err != nil, err
	}
	switch decision {
	case DecisionReleased:
		return Reservation{}, true, Errorf(ReservationReleased, "the reservation for order %s was released", orderID)
	case DecisionExpired:
		return Reservation{}, true, Errorf(ReservationReleased, "the reservation for order %s expired at %s", orderID, o.ExpiresAt.UTC().Format(time.RFC3339))
	case DecisionConfirmed, DecisionConfirmedNow:
		res, err := s.recordDecision(ctx, v, o, EventConfirmed, StatusConfirmed)
		return res, true, err
	}
	return Reservation{}, true, Errorf(Unavailable, "the gate gave no answer; retry")
}

// releaseKafka decides a release of a flash reservation at the gate; see
// confirmKafka.
func (s *Service) releaseKafka(ctx context.Context, code, orderID string) (res Reservation, decided bool, err error) {
	v, ok, err := s.kafkaVoucher(ctx, code)
	if !ok {
		return Reservation{}, err != nil, err
	}
	decision, o, err := s.gate.MarkReleased(ctx, code, orderID, time.Now(), false)
	if err != nil {
		return Reservation{}, true, unavailable(err)
	}
	if done, err := s.undecided(v, orderID, decision, o); done {
		return Reservation{}, err != nil, err
	}
	switch decision {
	case DecisionConfirmed:
		return Reservation{}, true, Errorf(AlreadyConfirmed, "the reservation for order %s is confirmed", orderID)
	case DecisionReleased, DecisionReleasedNow:
		res, err := s.recordDecision(ctx, v, o, EventReleased, StatusReleased)
		if err == nil {
			// The released event is acknowledged: any admission from now on
			// publishes after it, in the voucher's partition, so the
			// database releases this row before it applies that one. The
			// use may go back now (the consumer's give-back then finds it
			// back already).
			s.useBack(ctx, code, orderID)
		}
		return res, true, err
	}
	return Reservation{}, true, Errorf(Unavailable, "the gate gave no answer; retry")
}

// kafkaVoucher returns the voucher when its confirm or release is decided at
// the gate; ok is false (err nil) when the database decides it.
func (s *Service) kafkaVoucher(ctx context.Context, code string) (Voucher, bool, error) {
	if s.kafka == nil || s.gate == nil {
		return Voucher{}, false, nil
	}
	v, err := s.meta.get(ctx, code, s.store.Voucher)
	if err != nil {
		if ErrorCodeOf(err) == NotFound {
			return Voucher{}, false, nil // the database path answers NOT_FOUND
		}
		return Voucher{}, false, unavailable(err)
	}
	return v, v.Flash, nil
}

// undecided handles the decisions that leave the call to the database or
// refuse it: done is true when the caller stops, with err (nil err: the
// database decides).
func (s *Service) undecided(v Voucher, orderID string, decision GateDecision, o GateOrder) (done bool, err error) {
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
		// Its decisions in flight reach the database before it is loaded
		// again (the consumer reloads it at the recovery marker).
		s.requestRecovery(v.Code)
		return true, Errorf(Unavailable, "voucher %s is being recovered; retry", v.Code)
	}
	if o.CreatedAt.IsZero() {
		return true, nil // a sync-mode order released before: the database answers
	}
	return false, nil
}

// recordDecision publishes a decision of the gate and answers it once the
// broker acknowledged it (again, for a retry: applying it twice changes
// nothing). The gate's record is the answer; no database read.
func (s *Service) recordDecision(ctx context.Context, v Voucher, o GateOrder, kind EventKind, status Status) (Reservation, error) {
	res := s.reservationOf(v, o, status)
	if err := s.publish(ctx, NewEvent(kind, res, time.Now())); err != nil {
		// The gate has decided; the event did not (surely) get through. A
		// retry publishes it again; the expiry sweep does for a confirm.
		s.logger.WarnContext(ctx, "decision not published", "kind", kind, "code", v.Code, "order", o.OrderID, "err", err)
		return Reservation{}, Errorf(Unavailable, "the %s of order %s is decided but not yet recorded; retry", kind, o.OrderID)
	}
	return res, nil
}

// publish sends one event, waiting at most the publish timeout.
func (s *Service) publish(ctx context.Context, ev Event) error {
	ctx, cancel := context.WithTimeout(ctx, s.kafka.publishTimeout())
	defer cancel()
	return s.kafka.Publisher.Publish(ctx, ev)
}

// unclaim drops a claim on an orderId this request made for nothing. A
// claim left behind only makes a reuse of the orderId on another voucher
// ORDER_CONFLICT, which the contract allows for an orderId once reserved.
func (s *Service) unclaim(ctx context.Context, orderID, code string) {
	if err := s.gate.UnclaimOrder(context.WithoutCancel(ctx), orderID, code); err != nil {
		s.logger.WarnContext(ctx, "order claim not dropped", "code", code, "order", orderID, "err", err)
	}
}

// claimedElsewhere, in kafka mode, refuses a reserve on an ordinary voucher
// of an orderId a flash voucher claimed (its event may not have reached the
// database yet). Best effort: without Redis the database decides alone.
func (s *Service) claimedElsewhere(ctx context.Context, r ReserveRequest) error {
	if s.kafka == nil || s.gate == nil {
		return nil
	}
	owner, ok, err := s.gate.OrderOwner(ctx, r.OrderID)
	if err == nil && ok && owner != r.Code {
		return Errorf(OrderConflict, "order %s was already used with another voucher", r.OrderID)
	}
	return nil
}

// claimOrdinary records, in kafka mode, the claim of an order reserved on an
// ordinary voucher, so a flash voucher's gate (which does not read the
// database) refuses the orderId with ORDER_CONFLICT. Best effort: while
// Redis is down no flash reserve is admitted either.
func (s *Service) claimOrdinary(ctx context.Context, r ReserveRequest) {
	if s.kafka == nil || s.gate == nil {
		return
	}
	if _, err := s.gate.ClaimOrder(ctx, r.OrderID, r.Code); err != nil {
		s.logger.WarnContext(ctx, "order claim of an ordinary voucher not recorded", "code", r.Code, "order", r.OrderID, "err", err)
	}
}

// forget gives back the use of a sync-mode order the database refused.
func (s *Service) forget(ctx context.Context, code, orderID string) {
	if _, err := s.gate.Forget(ctx, code, orderID); err != nil {
		s.logger.ErrorContext(ctx, "gate use not given back; reconciliation will find it", "code", code, "order", orderID, "err", err)
	}
}

// ApplyEvent writes one event of the Kafka write path to the database (the
// consumer calls it), then lets the gate give back a use the database has
// released. A reserved event is written only if the gate says it stands
// (apply_check.lua); a recovery marker reloads the voucher's gate.
// Errors: *EventRefusedError when the database refuses the event; anything
// else is transient (apply it again).
func (s *Service) ApplyEvent(ctx context.Context, ev Event) error {
	if s.kafka == nil {
		return errors.New("voucher: the Kafka write path is not configured")
	}
	switch ev.Kind {
	case EventRecover:
		return s.recoverAtMarker(ctx, ev)
	case EventReserved:
		if s.gate != nil {
			verdicts, err := s.gate.ApplyCheck(ctx, ev.Code, []Event{ev})
			if err != nil {
				return err
			}
			switch verdicts[0] {
			case ApplySkip:
				// Its admission was voided or adopted: never answered as a
				// success, nothing to write.
				s.logger.InfoContext(ctx, "reserved event skipped: the gate voided or re-issued its admission", "code", ev.Code, "order", ev.OrderID)
				return nil
			case ApplyUnchecked:
				s.requestRecovery(ev.Code)
			}
		}
		if err := s.fault(ctx, StepApply, ev.OrderID); err != nil {
			return err
		}
	}
	s.obs.DatabaseWrite(writeOp(ev.Kind))
	status, err := s.kafka.Store.ApplyEvent(ctx, ev)
	if err != nil {
		return err
	}
	if ev.Kind == EventReleased && status == StatusReleased && s.gate != nil {
		if _, err := s.gate.Release(ctx, ev.Code, ev.OrderID); err != nil {
			// Undersell for a while: reconciliation returns the use.
			s.logger.WarnContext(ctx, "released use not given back to the gate; reconciliation will", "code", ev.Code, "order", ev.OrderID, "err", err)
		}
	}
	return nil
}

// ApplyReservedBatch applies reserved events of one voucher in one
// transaction (the consumer's batch); see EventStore.ApplyReservedBatch.
// The gate is asked first which of them stand; a skipped one counts as
// applied (there is nothing to write).
func (s *Service) ApplyReservedBatch(ctx context.Context, evs []Event) ([]bool, error) {
	if s.kafka == nil {
		return nil, errors.New("voucher: the Kafka write path is not configured")
	}
	applied := make([]bool, len(evs))
	standing, at := evs, []int(nil)
	if s.gate != nil && len(evs) > 0 {
		verdicts, err := s.gate.ApplyCheck(ctx, evs[0].Code, evs)
		if err != nil {
			return nil, err
		}
		standing = nil
		for i, v := range verdicts {
			switch v {
			case ApplySkip:
				applied[i] = true
				s.logger.InfoContext(ctx, "reserved event skipped: the gate voided or re-issued its admission", "code", evs[i].Code, "order", evs[i].OrderID)
				continue
			case ApplyUnchecked:
				if i == 0 {
					s.requestRecovery(evs[0].Code)
				}
			}
			standing = append(standing, evs[i])
			at = append(at, i)
		}
	} else {
		for i := range evs {
			at = append(at, i)
		}
	}
	if len(standing) == 0 {
		return applied, nil
	}
	if err := s.fault(ctx, StepApply, standing[0].OrderID); err != nil {
		return nil, err
	}
	written, err := s.kafka.Store.ApplyReservedBatch(ctx, standing)
	if err != nil {
		return nil, err
	}
	for j, ok := range written {
		applied[at[j]] = ok
		if ok {
			s.obs.DatabaseWrite("reserve")
		}
	}
	return applied, nil
}

// writeOp names an event's database write as the other paths do.
func writeOp(k EventKind) string {
	switch k {
	case EventReserved:
		return "reserve"
	case EventConfirmed:
		return "confirm"
	}
	return "release"
}

// SaveDeadLetter keeps an event the consumer could not apply. A refused
// reserved event marks its admission lost at the gate: its use stays taken
// (the gate was too high if the database refused it), so neither a retry nor
// reconciliation hands that use out again, and reconciliation keeps alerting.
func (s *Service) SaveDeadLetter(ctx context.Context, dl DeadLetter) error {
	if s.kafka == nil {
		return errors.New("voucher: the Kafka write path is not configured")
	}
	if err := s.kafka.Store.SaveDeadLetter(ctx, dl); err != nil {
		return err
	}
	if ev := dl.Event; ev != nil && ev.Kind == EventReserved && s.gate != nil {
		o := GateOrder{OrderID: ev.OrderID, CustomerID: ev.CustomerID, OrderAmount: ev.OrderAmount, CreatedAt: ev.CreatedAt, ExpiresAt: ev.ExpiresAt}
		if _, _, err := s.gate.Settle(ctx, ev.Code, SettleLose, o, ev.Epoch); err != nil {
			s.logger.ErrorContext(ctx, "dead-lettered admission not marked lost at the gate", "code", ev.Code, "order", ev.OrderID, "err", err)
		}
	}
	return nil
}

// DeadLetters lists the latest events the database refused, newest first;
// none in sync mode. Errors: FORBIDDEN.
func (s *Service) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	if err := authorize(ctx, OpOperate); err != nil {
		return nil, err
	}
	if s.kafka == nil {
		return nil, nil
	}
	return s.kafka.Store.DeadLetters(ctx, limit)
}

// expireDueKafka is ExpireDue for the Kafka write path: for a flash voucher
// the gate decides first, so an order confirmed at the gate (its event still
// on its way) is never expired, and a confirm racing the sweep either
// confirms or is refused, never both. The gate outlives every reservation
// of its voucher (ExpireAt is past endsAt + the TTL), so it decides after
// the sale too.
func (s *Service) expireDueKafka(ctx context.Context, limit int) (int, error) {
	due, err := s.kafka.Store.DueReservations(ctx, limit)
	if err != nil {
		return 0, err
	}
	n := 0
	defer func() { s.obs.ReservationsExpired(n) }()
	for _, d := range due {
		if d.Flash && s.gate != nil {
			decision, o, err := s.gate.MarkReleased(ctx, d.VoucherCode, d.OrderID, time.Now(), true)
			if err != nil {
				s.logger.WarnContext(ctx, "expiry: gate did not answer; next pass", "code", d.VoucherCode, "order", d.OrderID, "err", err)
				continue
			}
			switch decision {
			case DecisionPaused, DecisionNotDue, DecisionPending:
				continue
			case DecisionNotLoaded, DecisionStale:
				if s.gateOutlived(ctx, d.VoucherCode) {
					break // the gate is gone for good: only the database knows
				}
				s.requestRecovery(d.VoucherCode)
				continue // after the recovery, which applies the decisions in flight first
			case DecisionConfirmed:
				if !o.CreatedAt.IsZero() {
					// Confirmed at the gate; its event is late or was not
					// published: send it (again) rather than expire.
					if err := s.publish(ctx, NewEvent(EventConfirmed, d.Reservation, time.Now())); err != nil {
						s.logger.WarnContext(ctx, "expiry: confirmed event not published; next pass", "code", d.VoucherCode, "order", d.OrderID, "err", err)
					}
					continue
				}
			}
			// RELEASED_NOW, RELEASED (its event late or lost), UNKNOWN,
			// LEGACY: the database releases the row.
		}
		if err := s.fault(ctx, StepSweep, d.OrderID); err != nil {
			return n, err
		}
		res, expired, err := s.kafka.Store.ExpireReservation(ctx, d.OrderID)
		if err != nil {
			return n, err
		}
		if expired {
			n++
		} else {
			res = d.Reservation
		}
		// Whether this sweep or the consumer released the row, the database
		// no longer counts the use: the gate may give it back (once).
		s.releaseGate(ctx, res)
	}
	return n, nil
}

// gateOutlived reports whether a voucher's gate has expired for good (past
// its ExpireAt): its reservations' decisions are all the database's then.
func (s *Service) gateOutlived(ctx context.Context, code string) bool {
	v, err := s.meta.get(ctx, code, s.store.Voucher)
	return err == nil && time.Now().After(gateExpireAt(v, s.ttl))
}

// gateExpireAt is when a voucher's gate may go: a week past the end of its
// window and the last reservation's TTL, so it decides every confirm,
// release and expiry of its reservations.
func gateExpireAt(v Voucher, ttl time.Duration) time.Time {
	return v.EndsAt.Add(ttl + 7*24*time.Hour)
}

// warmGatesKafka asks the consumer to load every voucher whose gate is not
// healthy (not loaded, or on another Redis server than it was loaded on, or
// marked as having lost data). The load happens at a recovery marker in the
// voucher's partition, after every event published before it, so the
// snapshot it loads holds every decision the old gate answered; admissions
// still on their way are settled against the new gate (apply_check.lua).
func (s *Service) warmGatesKafka(ctx context.Context, vouchers []Voucher) error {
	if s.gate == nil {
		return nil
	}
	for _, v := range vouchers {
		ok, err := s.gate.Healthy(ctx, v.Code)
		if err != nil {
			return unavailable(err)
		}
		if !ok {
			if err := s.publishRecovery(ctx, v.Code, false, ""); err != nil {
				return unavailable(err)
			}
		}
	}
	return nil
}

// warmGateKafka is WarmGate for the Kafka write path (warmGatesKafka).
func (s *Service) warmGateKafka(ctx context.Context, code string) error {
	if s.gate == nil {
		return nil
	}
	v, err := s.store.Voucher(ctx, code)
	if err != nil {
		return err
	}
	return s.warmGatesKafka(ctx, []Voucher{v})
}

// requestRecovery publishes a recovery marker for a voucher in the
// background, at most once a second per voucher in this process, so
// requests answer UNAVAILABLE at once instead of waiting for it.
func (s *Service) requestRecovery(code string) {
	k := s.kafka
	k.mu.Lock()
	if time.Since(k.recovering[code]) < time.Second {
		k.mu.Unlock()
		return
	}
	k.recovering[code] = time.Now()
	k.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*k.publishTimeout())
		defer cancel()
		if err := s.publishRecovery(ctx, code, false, ""); err != nil {
			s.logger.WarnContext(ctx, "recovery marker not published; the next request asks again", "code", code, "err", err)
		}
	}()
}

// publishRecovery publishes a recovery marker: the consumer reloads the
// voucher's gate when it reaches it (rebuild: over whatever it holds, with
// the given epoch; else only if the gate is not healthy).
func (s *Service) publishRecovery(ctx context.Context, code string, rebuild bool, epoch string) error {
	id, err := newEpoch()
	if err != nil {
		return err
	}
	return s.publish(ctx, Event{ID: "recover:" + code + ":" + id, Kind: EventRecover, Code: code, Rebuild: rebuild, Epoch: epoch, DecidedAt: time.Now()})
}

// recoverAtMarker reloads a voucher's gate from the database at a recovery
// marker. Every event before the marker in the voucher's partition has been
// applied (unchecked, if the gate could not judge it), so the snapshot holds
// every decision the old gate answered.
func (s *Service) recoverAtMarker(ctx context.Context, ev Event) error {
	if s.gate == nil {
		return nil
	}
	if !ev.Rebuild {
		ok, err := s.gate.Healthy(ctx, ev.Code)
		if err != nil || ok {
			return err
		}
	}
	v, err := s.store.Voucher(ctx, ev.Code)
	if ErrorCodeOf(err) == NotFound || (err == nil && !v.Flash) {
		return nil
	}
	if err != nil {
		return err
	}
	mode, epoch := "recover", ev.Epoch
	if ev.Rebuild {
		mode = "replace"
	}
	installed, err := s.loadKafkaGate(ctx, v, mode, epoch)
	if err != nil {
		return err
	}
	if installed {
		s.logger.InfoContext(ctx, "gate reloaded from the database at a recovery marker", "code", ev.Code, "rebuild", ev.Rebuild)
	}
	return nil
}

// loadKafkaGate reads a voucher's snapshot, every order with its state and
// times, and installs it with the voucher's terms (mode as Gate.Recover).
func (s *Service) loadKafkaGate(ctx context.Context, v Voucher, mode, epoch string) (bool, error) {
	snap, err := s.kafka.Store.GateSnapshotAll(ctx, v.Code)
	if err != nil {
		return false, err
	}
	snap.ExpireAt = gateExpireAt(v, s.ttl)
	if epoch == "" {
		if epoch, err = newEpoch(); err != nil {
			return false, err
		}
	}
	terms := GateTerms{
		Epoch: epoch, StartsAt: v.StartsAt, EndsAt: v.EndsAt, DatabaseNow: snap.TakenAt,
		MinOrderAmount: v.MinOrderAmount, TTL: s.ttl, Lease: s.kafka.lease(),
	}
	installed, err := s.gate.Recover(ctx, snap, terms, mode)
	if err != nil {
		return false, unavailable(err)
	}
	return installed, nil
}

// newEpoch is a fresh random id for a gate load or a marker.
func newEpoch() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// gateSnapshot reads what a voucher's gate must hold from the database, in
// sync mode: orders go to the gate without state or times, as reserve.lua
// writes them there.
func (s *Service) gateSnapshot(ctx context.Context, code string) (GateSnapshot, error) {
	snap, err := s.store.GateSnapshot(ctx, code)
	if err != nil {
		return snap, err
	}
	for i := range snap.Orders {
		o := &snap.Orders[i]
		o.Confirmed, o.CreatedAt, o.ExpiresAt = false, time.Time{}, time.Time{}
	}
	return snap, nil
}

// FaultStep names a step of a kafka-mode request or of the consumer, where a
// test can stop it (KafkaPath.Faults).
type FaultStep string

// The steps.
const (
	StepAdmitted  FaultStep = "admitted"  // the gate admitted; nothing claimed or published yet
	StepClaimed   FaultStep = "claimed"   // the orderId is claimed; the event not yet published
	StepPublished FaultStep = "published" // the broker acknowledged; the admission not yet settled
	StepApply     FaultStep = "apply"     // the consumer checked the gate; the database not yet written
	StepSweep     FaultStep = "sweep"     // the expiry sweep decided at the gate; the row not yet released
)

// fault runs the test's hook at a step; nil in production (one comparison).
func (s *Service) fault(ctx context.Context, step FaultStep, orderID string) error {
	if s.kafka == nil || s.kafka.Faults == nil {
		return nil
	}
	return s.kafka.Faults(ctx, step, orderID)
}

// The gate calls of the Kafka write path, timed like the others.

func (g observedGate) Admit(ctx context.Context, code string, r ReserveRequest) (Admission, error) {
	start := time.Now()
	a, err := g.Gate.Admit(ctx, code, r)
	g.obs.GateCall("admit", err, time.Since(start))
	return a, err
}

func (g observedGate) Settle(ctx context.Context, code string, op SettleOp, o GateOrder, epoch string) (SettleAnswer, GateOrder, error) {
	start := time.Now()
	a, after, err := g.Gate.Settle(ctx, code, op, o, epoch)
	g.obs.GateCall("settle-"+string(op), err, time.Since(start))
	return a, after, err
}

func (g observedGate) ReserveTimed(ctx context.Context, code string, perUserLimit int, r ReserveRequest, createdAt, expiresAt time.Time) (GateVerdict, error) {
	start := time.Now()
	v, err := g.Gate.ReserveTimed(ctx, code, perUserLimit, r, createdAt, expiresAt)
	g.obs.GateCall("reserve", err, time.Since(start))
	return v, err
}

func (g observedGate) Order(ctx context.Context, code, orderID string) (GateOrder, bool, error) {
	start := time.Now()
	o, ok, err := g.Gate.Order(ctx, code, orderID)
	g.obs.GateCall("order", err, time.Since(start))
	return o, ok, err
}

func (g observedGate) Confirm(ctx context.Context, code, orderID string, now time.Time) (GateDecision, GateOrder, error) {
	start := time.Now()
	d, o, err := g.Gate.Confirm(ctx, code, orderID, now)
	g.obs.GateCall("confirm", err, time.Since(start))
	return d, o, err
}

func (g observedGate) MarkReleased(ctx context.Context, code, orderID string, now time.Time, expireOnly bool) (GateDecision, GateOrder, error) {
	start := time.Now()
	d, o, err := g.Gate.MarkReleased(ctx, code, orderID, now, expireOnly)
	op := "mark-released"
	if expireOnly {
		op = "mark-expired"
	}
	g.obs.GateCall(op, err, time.Since(start))
	return d, o, err
}

func (g observedGate) ClaimOrder(ctx context.Context, orderID, code string) (string, error) {
	start := time.Now()
	owner, err := g.Gate.ClaimOrder(ctx, orderID, code)
	g.obs.GateCall("claim", err, time.Since(start))
	return owner, err
}

func (g observedGate) UnclaimOrder(ctx context.Context, orderID, code string) error {
	start := time.Now()
	err := g.Gate.UnclaimOrder(ctx, orderID, code)
	g.obs.GateCall("unclaim", err, time.Since(start))
	return err
}

func (g observedGate) OrderOwner(ctx context.Context, orderID string) (string, bool, error) {
	start := time.Now()
	owner, ok, err := g.Gate.OrderOwner(ctx, orderID)
	g.obs.GateCall("claim-read", err, time.Since(start))
	return owner, ok, err
}

// String names an event for logs.
func (e Event) String() string {
	return fmt.Sprintf("%s %s of %s", e.Kind, e.OrderID, e.Code)
}
