package voucher

// The types of the Kafka write path of flash vouchers
// (FLASH_WRITE_PATH=kafka): its events, what it needs from the broker and
// the database, and the gate's decisions. How it works: flash_kafka.go; the
// consumer's side: kafka_apply.go.

import (
	"context"
	"errors"
	"fmt"
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
	// Position is the reservation's place the gate gave at its admission
	// (Reservation.Position); 0 in an event published before the gate
	// kept them: the database numbers it then.
	Position int
	// Epoch is the gate load a reserved event's admission was made in (for
	// a rebuild's marker: the epoch it installs); CreatedAt is its token.
	Epoch string
	// Rebuild marks an operator's rebuild marker (EventRecover).
	Rebuild bool
	// Incident is a recovery marker's (not a rebuild's): the id of the
	// Redis server that served the voucher when the marker was asked for.
	// The consumer reloads the gate at the marker only while that server
	// still serves it: after another restart or failover, the events
	// behind this marker were decided on a gate the reload would not hold,
	// and the new incident's own markers lie behind them. "": any server.
	Incident string
}

// NewEvent returns the event of kind for a reservation.
func NewEvent(kind EventKind, res Reservation, decidedAt time.Time) Event {
	return Event{
		ID: res.OrderID + ":" + string(kind), Kind: kind,
		OrderID: res.OrderID, Code: res.VoucherCode, CustomerID: res.CustomerID,
		OrderAmount: res.OrderAmount, DiscountAmount: res.DiscountAmount,
		CreatedAt: res.CreatedAt, ExpiresAt: res.ExpiresAt, DecidedAt: decidedAt,
		Position: res.Position,
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

// DueReservation is a RESERVED reservation past its deadline; Flash when
// a flash voucher's gate decides its expiry first (not a flash campaign's
// code: the database decides those, as on the sync path).
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
	// Resolution is applied or discarded once an operator closed it
	// (ResolvedBy, at ResolvedAt); Retries counts refused "apply again"s.
	Resolution string
	ResolvedBy string
	ResolvedAt *time.Time
	Retries    int
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

// KafkaPath is what the service needs for FLASH_WRITE_PATH=kafka.
type KafkaPath struct {
	Publisher EventPublisher
	Store     EventStore
	// Pending waits for the events in flight: reconciliation settles them
	// before it compares the gate with the database.
	Pending PendingWrites
	// PublishTimeout bounds how long a request waits for the broker's
	// acknowledgement; default 3s.
	PublishTimeout time.Duration
	// Lease is how long an admission's owner has to settle it before a
	// retry may adopt it or reconciliation void it; default twice the
	// publish timeout plus 5s (a claim, a publish and a settle).
	Lease time.Duration
	// Decode reads an event as the consumer reads a record's value
	// (events.Decode), for a dead letter an operator applies again.
	Decode func([]byte) (Event, error)
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
	if k.PublishTimeout <= 0 {
		return 3 * time.Second
	}
	return k.PublishTimeout
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

// FaultStep names a step of a kafka-mode request or of the consumer, where a
// test can stop it (KafkaPath.Faults).
type FaultStep string

// The steps.
const (
	StepAdmitted  FaultStep = "admitted"  // the gate admitted; nothing claimed or published yet
	StepClaimed   FaultStep = "claimed"   // the orderId is claimed; the event not yet published
	StepDecided   FaultStep = "decided"   // the gate decided a confirm or release; its event not yet published
	StepPublished FaultStep = "published" // the broker acknowledged; the admission not yet settled, the decision not yet asked again
	StepReceived  FaultStep = "received"  // the consumer has a confirmed or released event; the gate not yet asked
	StepApply     FaultStep = "apply"     // the consumer checked the gate; the database not yet written
	StepSweep     FaultStep = "sweep"     // the expiry sweep decided at the gate; the row not yet released
)

// String names an event for logs.
func (e Event) String() string {
	return fmt.Sprintf("%s %s of %s", e.Kind, e.OrderID, e.Code)
}
