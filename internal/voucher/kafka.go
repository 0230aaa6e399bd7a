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
}

// KafkaPath is what the service needs for FLASH_WRITE_PATH=kafka. Deps.Pending
// must be set too: warm-up and rebuild wait for the events in flight.
type KafkaPath struct {
	Publisher EventPublisher
	Store     EventStore
	// PublishTimeout bounds how long a request waits for the broker's
	// acknowledgement; default 3s.
	PublishTimeout time.Duration
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
	recovering map[string]bool
}

func newKafkaState(k *KafkaPath) *kafkaState {
	if k == nil {
		return nil
	}
	return &kafkaState{KafkaPath: *k, recovering: map[string]bool{}}
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
)

// reserveFlashKafka is reserveFlash for the Kafka write path: the gate takes
// the use and remembers the order with its times, and the reserved event
// carries it to the database.
func (s *Service) reserveFlashKafka(ctx context.Context, v Voucher, r ReserveRequest, path *Path) (Reservation, error) {
	now := time.Now()
	if err := v.CheckEligible(now, r.OrderAmount); err != nil {
		return Reservation{}, err
	}
	if verdict, ok := s.soldOut.verdict(v.Code, r); ok {
		*path = PathGateMemory
		return s.afterGateKafka(ctx, v, r, verdict, Reservation{})
	}
	*path = PathKafka
	// Milliseconds: what the gate and the event hold, so the answer, a
	// retry's answer and the database row show the same times.
	created := now.Truncate(time.Millisecond)
	held := Reservation{
		OrderID: r.OrderID, VoucherCode: v.Code, CustomerID: r.CustomerID, OrderAmount: r.OrderAmount,
		DiscountAmount: v.DiscountAmount, Status: StatusReserved, CreatedAt: created, ExpiresAt: created.Add(s.ttl),
	}
	verdict, err := s.gate.ReserveTimed(ctx, v.Code, v.PerUserLimit, r, held.CreatedAt, held.ExpiresAt)
	if err != nil {
		return Reservation{}, unavailable(err)
	}
	switch verdict {
	case GateNotLoaded:
		s.recoverGate(v.Code)
		return Reservation{}, Errorf(Unavailable, "the sale is starting; retry with the same orderId")
	case GatePaused:
		return Reservation{}, Errorf(Unavailable, "voucher %s is being rebuilt; retry with the same orderId", v.Code)
	case GateOutOfStock:
		s.noteSoldOut(ctx, v.Code)
	}
	return s.afterGateKafka(ctx, v, r, verdict, held)
}

// afterGateKafka turns the gate's verdict into the answer without waiting for
// the database.
func (s *Service) afterGateKafka(ctx context.Context, v Voucher, r ReserveRequest, verdict GateVerdict, held Reservation) (Reservation, error) {
	switch verdict {
	case GateAdmitted:
		return s.admitKafka(ctx, v, r, held)
	case GateDuplicate:
		return s.duplicateKafka(ctx, v, r)
	case GateReleased:
		return Reservation{}, Errorf(ReservationReleased, "the reservation for order %s was released", r.OrderID)
	case GateOrderConflict:
		return Reservation{}, Errorf(OrderConflict, "order %s was already used with another customer or amount", r.OrderID)
	}
	return s.afterGate(ctx, v, r, verdict) // ALREADY_USED, OUT_OF_STOCK: no database either
}

// admitKafka publishes the reserved event of an order the gate admitted.
func (s *Service) admitKafka(ctx context.Context, v Voucher, r ReserveRequest, held Reservation) (Reservation, error) {
	// The gate's keys are per voucher: the orderId may have been reserved on
	// another voucher, its event still in flight. The claim sees that.
	owner, err := s.gate.ClaimOrder(ctx, r.OrderID, v.Code)
	if err != nil {
		s.forget(ctx, v.Code, r.OrderID)
		return Reservation{}, unavailable(err)
	}
	if owner != v.Code {
		s.forget(ctx, v.Code, r.OrderID)
		return Reservation{}, Errorf(OrderConflict, "order %s was already used with another voucher", r.OrderID)
	}
	// The orderId may be in the database already although the gate did not
	// know it: released (a reloaded gate keeps only live orders), used on
	// another voucher longer ago than a claim lasts, or written after the
	// snapshot the gate was loaded from. One primary-key read per winner
	// sees that.
	earlier, err := s.store.Reservation(ctx, r.OrderID)
	switch {
	case err == nil:
		res, rerr := r.Retry(earlier)
		if rerr != nil {
			s.forget(ctx, v.Code, r.OrderID)
			if earlier.VoucherCode != v.Code {
				s.unclaim(ctx, r.OrderID, v.Code)
			}
			return Reservation{}, rerr
		}
		// A live row of this voucher the gate did not count: this use backs
		// it, as in the sync path. (The gate keeps this request's times for
		// the order; they differ from the row's only in this rare case.)
		return res, nil
	case ErrorCodeOf(err) != NotFound:
		s.forget(ctx, v.Code, r.OrderID)
		s.unclaim(ctx, r.OrderID, v.Code)
		return Reservation{}, unavailable(err)
	}
	if err := s.publish(ctx, NewEvent(EventReserved, held, held.CreatedAt)); err != nil {
		if errors.Is(err, ErrPublishUnknown) {
			// It may still be written: the use stays held. A retry finds
			// the order (DUPLICATE) and publishes again; if it never reaches
			// the database, reconciliation returns the use an interval later.
			s.logger.WarnContext(ctx, "reserved event outcome unknown; the use stays held", "code", v.Code, "order", r.OrderID, "err", err)
			return Reservation{}, unavailable(err)
		}
		// Surely not written: nothing holds the use.
		s.forget(ctx, v.Code, r.OrderID)
		s.unclaim(ctx, r.OrderID, v.Code)
		return Reservation{}, unavailable(err)
	}
	return held, nil
}

// duplicateKafka answers a reserve of an order the gate admitted before:
// from the database if it holds the row, else from the gate's record, after
// publishing its event again so the success returned is durable (the first
// request may have failed to publish).
func (s *Service) duplicateKafka(ctx context.Context, v Voucher, r ReserveRequest) (Reservation, error) {
	o, ok, err := s.gate.Order(ctx, v.Code, r.OrderID)
	if err != nil {
		return Reservation{}, unavailable(err)
	}
	if !ok {
		// Forgotten since (its publish failed): decided afresh on a retry.
		return Reservation{}, Errorf(Unavailable, "the reservation for order %s is being decided; retry with the same orderId", r.OrderID)
	}
	if o.CreatedAt.IsZero() {
		return s.afterGate(ctx, v, r, GateDuplicate) // a sync-mode order: the database answers
	}
	if o.Released || o.Releasing {
		return Reservation{}, Errorf(ReservationReleased, "the reservation for order %s was released", r.OrderID)
	}
	earlier, err := s.store.Reservation(ctx, r.OrderID)
	if err == nil {
		if _, err := r.Retry(earlier); err != nil {
			return Reservation{}, err
		}
	} else if ErrorCodeOf(err) != NotFound {
		return Reservation{}, unavailable(err)
	}
	kind, status := EventReserved, StatusReserved
	if o.Confirmed {
		kind, status = EventConfirmed, StatusConfirmed
	}
	return s.recordDecision(ctx, v, o, kind, status)
}

// confirmKafka decides a confirm of a flash reservation at the gate; decided
// is false when the database decides it as in sync mode (not flash, an order
// the gate does not know, a sync-mode order).
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
	if done, err := s.undecided(v, decision, o); done {
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

// releaseKafka decides a release of a flash reservation at the gate; decided
// is false when the database decides it as in sync mode.
func (s *Service) releaseKafka(ctx context.Context, code, orderID string) (res Reservation, decided bool, err error) {
	v, ok, err := s.kafkaVoucher(ctx, code)
	if !ok {
		return Reservation{}, err != nil, err
	}
	decision, o, err := s.gate.MarkReleased(ctx, code, orderID, time.Now(), false)
	if err != nil {
		return Reservation{}, true, unavailable(err)
	}
	if done, err := s.undecided(v, decision, o); done {
		return Reservation{}, err != nil, err
	}
	switch decision {
	case DecisionConfirmed:
		return Reservation{}, true, Errorf(AlreadyConfirmed, "the reservation for order %s is confirmed", orderID)
	case DecisionReleased, DecisionReleasedNow:
		res, err := s.recordDecision(ctx, v, o, EventReleased, StatusReleased)
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
func (s *Service) undecided(v Voucher, decision GateDecision, o GateOrder) (done bool, err error) {
	switch decision {
	case DecisionUnknown, DecisionLegacy:
		return true, nil
	case DecisionPaused:
		return true, Errorf(Unavailable, "voucher %s is being rebuilt; retry", v.Code)
	case DecisionNotLoaded:
		if time.Now().After(v.EndsAt) {
			return true, nil // the sale is over and its gate gone: only the database knows
		}
		// The gate lost its data: its decisions in flight reach the database
		// before it is loaded again (warmGateKafka); until then the database
		// alone could contradict them.
		s.recoverGate(v.Code)
		return true, Errorf(Unavailable, "voucher %s is being recovered; retry", v.Code)
	}
	if o.CreatedAt.IsZero() {
		return true, nil // a sync-mode order released before: the database answers
	}
	return false, nil
}

// recordDecision answers a decision of the gate and makes sure its event is
// published: from the database row once it shows the decision, else after
// publishing the event (again: a retry after a failed publish, or a decision
// whose event is still in flight; applying it twice changes nothing).
func (s *Service) recordDecision(ctx context.Context, v Voucher, o GateOrder, kind EventKind, status Status) (Reservation, error) {
	res := Reservation{
		OrderID: o.OrderID, VoucherCode: v.Code, CustomerID: o.CustomerID, OrderAmount: o.OrderAmount,
		DiscountAmount: v.DiscountAmount, Status: status, CreatedAt: o.CreatedAt, ExpiresAt: o.ExpiresAt,
	}
	if row, err := s.store.Reservation(ctx, o.OrderID); err == nil && row.VoucherCode == v.Code {
		if row.Status == status || (status == StatusReserved && row.Status == StatusConfirmed) {
			return row, nil
		}
		// The database trails the gate: its discount and times, the gate's status.
		row.Status = status
		res = row
	}
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
	if err := s.gate.UnclaimOrder(ctx, orderID, code); err != nil {
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

// forget gives back the use of an order whose event was surely not written.
func (s *Service) forget(ctx context.Context, code, orderID string) {
	if _, err := s.gate.Forget(ctx, code, orderID); err != nil {
		s.logger.ErrorContext(ctx, "gate use not given back; reconciliation will find it", "code", code, "order", orderID, "err", err)
	}
}

// ApplyEvent writes one event of the Kafka write path to the database (the
// consumer calls it), then lets the gate give back a use the database has
// released. Errors: *EventRefusedError when the database refuses the event;
// anything else is transient (apply it again).
func (s *Service) ApplyEvent(ctx context.Context, ev Event) error {
	if s.kafka == nil {
		return errors.New("voucher: the Kafka write path is not configured")
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
// Reserved events need nothing of the gate, which decided them.
func (s *Service) ApplyReservedBatch(ctx context.Context, evs []Event) ([]bool, error) {
	if s.kafka == nil {
		return nil, errors.New("voucher: the Kafka write path is not configured")
	}
	applied, err := s.kafka.Store.ApplyReservedBatch(ctx, evs)
	if err != nil {
		return nil, err
	}
	for _, ok := range applied {
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

// SaveDeadLetter keeps an event the consumer could not apply.
func (s *Service) SaveDeadLetter(ctx context.Context, dl DeadLetter) error {
	if s.kafka == nil {
		return errors.New("voucher: the Kafka write path is not configured")
	}
	return s.kafka.Store.SaveDeadLetter(ctx, dl)
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
// confirms or is refused, never both.
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
			case DecisionPaused, DecisionNotDue:
				continue
			case DecisionNotLoaded:
				if v, err := s.meta.get(ctx, d.VoucherCode, s.store.Voucher); err != nil || !time.Now().After(v.EndsAt) {
					s.recoverGate(d.VoucherCode)
					continue // after the recovery, which applies the decisions in flight first
				}
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

// warmGatesKafka loads the gates of vouchers whose gate holds nothing. A
// gate that lost its data (a Redis restart without persistence) may have
// admitted, confirmed or released orders whose events have not reached the
// database yet; a snapshot of the database taken now would lack them, and
// loading it would let the gate sell a use twice. So, for vouchers whose sale
// has started, it first waits out the publishes in flight (the publish
// timeout) and the consumer (Settle), once for all of them. Reserves of such
// a voucher answer UNAVAILABLE meanwhile.
func (s *Service) warmGatesKafka(ctx context.Context, vouchers []Voucher) error {
	if s.gate == nil {
		return nil
	}
	var missing []Voucher
	wait := false
	now := time.Now()
	for _, v := range vouchers {
		_, loaded, err := s.gate.Remaining(ctx, v.Code)
		if err != nil {
			return unavailable(err)
		}
		if !loaded {
			missing = append(missing, v)
			wait = wait || !now.Before(v.StartsAt)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if wait {
		select {
		case <-time.After(s.kafka.publishTimeout() + time.Second):
		case <-ctx.Done():
			return unavailable(ctx.Err())
		}
		if s.pending != nil {
			if err := s.pending.Settle(ctx); err != nil {
				return unavailable(err)
			}
		}
	}
	for _, v := range missing {
		if err := s.loadGate(ctx, v.Code); err != nil {
			return err
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

// recoverGate warms a voucher's gate in the background, once at a time per
// voucher in this process, so requests answer UNAVAILABLE at once instead of
// waiting out the recovery.
func (s *Service) recoverGate(code string) {
	k := s.kafka
	k.mu.Lock()
	if k.recovering[code] {
		k.mu.Unlock()
		return
	}
	k.recovering[code] = true
	k.mu.Unlock()
	go func() {
		defer func() {
			k.mu.Lock()
			delete(k.recovering, code)
			k.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.WarmGate(ctx, code); err != nil {
			s.logger.WarnContext(ctx, "gate recovery failed; the next request tries again", "code", code, "err", err)
		}
	}()
}

// gateSnapshot reads what a voucher's gate must hold from the database. In
// sync mode orders go to the gate without state or times, as reserve.lua
// writes them there, so an instance in kafka mode leaves them to the
// database (LEGACY) rather than trusting states the gate did not track.
func (s *Service) gateSnapshot(ctx context.Context, code string) (GateSnapshot, error) {
	snap, err := s.store.GateSnapshot(ctx, code)
	if err != nil || s.kafka != nil {
		return snap, err
	}
	for i := range snap.Orders {
		o := &snap.Orders[i]
		o.Confirmed, o.CreatedAt, o.ExpiresAt = false, time.Time{}, time.Time{}
	}
	return snap, nil
}

// The gate calls of the Kafka write path, timed like the others.

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
