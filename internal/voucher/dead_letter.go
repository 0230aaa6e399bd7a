package voucher

import (
	"context"
	"fmt"
)

// DeadLetterClosed: the dead letter was applied again or discarded already.
const DeadLetterClosed ErrorCode = "DEAD_LETTER_CLOSED"

// The audit actions of an operator's work on dead letters.
const (
	AuditDeadLetterApplied   = "dead-letter-applied"
	AuditDeadLetterRefused   = "dead-letter-refused" // applied again, refused again
	AuditDeadLetterDiscarded = "dead-letter-discarded"
)

// The resolutions of a closed dead letter.
const (
	DeadLetterApplied   = "applied"
	DeadLetterDiscarded = "discarded"
)

// OpenDeadLetterLimit is how many open dead letters the page lists.
const OpenDeadLetterLimit = 200

// DeadLetterStore is what an operator's work on dead letters needs. Each
// change is one transaction with its audit event.
type DeadLetterStore interface {
	// OpenDeadLetters lists dead letters nobody applied again or
	// discarded, newest first.
	OpenDeadLetters(ctx context.Context, limit int) ([]DeadLetter, error)
	// DeadLetter reads one: NOT_FOUND.
	DeadLetter(ctx context.Context, id int64) (DeadLetter, error)
	// CloseDeadLetter closes an open dead letter as applied or discarded:
	// DEAD_LETTER_CLOSED (closed already), NOT_FOUND.
	CloseDeadLetter(ctx context.Context, id int64, resolution string, audit AuditEvent) (DeadLetter, error)
	// RefuseDeadLetterAgain keeps an open dead letter with a new reason:
	// DEAD_LETTER_CLOSED, NOT_FOUND.
	RefuseDeadLetterAgain(ctx context.Context, id int64, reason string, audit AuditEvent) (DeadLetter, error)
}

// DeadLetterOutcome is what applying a dead letter again did.
type DeadLetterOutcome struct {
	DeadLetter
	// Applied: the event is in the database and the dead letter closed;
	// otherwise it stays open with the new reason.
	Applied bool
}

// Closed reports whether an operator applied the dead letter again or
// discarded it.
func (d DeadLetter) Closed() bool { return d.Resolution != "" }

// OpenDeadLetters lists the dead letters waiting for an operator.
// Errors: FORBIDDEN.
func (b *Backoffice) OpenDeadLetters(ctx context.Context) ([]DeadLetter, error) {
	if err := authorize(ctx, OpOperate); err != nil {
		return nil, err
	}
	return b.store.OpenDeadLetters(ctx, OpenDeadLetterLimit)
}

// DeadLetter returns one dead letter. Errors: FORBIDDEN, NOT_FOUND.
func (b *Backoffice) DeadLetter(ctx context.Context, id int64) (DeadLetter, error) {
	if err := authorize(ctx, OpOperate); err != nil {
		return DeadLetter{}, err
	}
	return b.store.DeadLetter(ctx, id)
}

// ApplyDeadLetter applies a dead-lettered event again through the
// consumer's applier (EventApplier.ApplyAgain: the gate's check, the
// database's rules, an idempotent write, so never a second use). Written:
// the dead letter is closed. Refused: it stays open with the new reason.
// Either is audited with who did it. Errors: FORBIDDEN, NOT_FOUND,
// DEAD_LETTER_CLOSED, UNAVAILABLE (nothing decided; also a server not on
// the Kafka write path, which has no applier).
func (b *Backoffice) ApplyDeadLetter(ctx context.Context, id int64) (DeadLetterOutcome, error) {
	dl, err := b.DeadLetter(ctx, id)
	if err != nil {
		return DeadLetterOutcome{}, err
	}
	if dl.Closed() {
		return DeadLetterOutcome{}, closedError(dl)
	}
	applier := b.svc.EventApplier()
	if applier == nil {
		return DeadLetterOutcome{}, Errorf(Unavailable, "this server does not run the Kafka write path (FLASH_WRITE_PATH=kafka), whose applier applies events")
	}
	refusal, err := applier.ApplyAgain(ctx, []byte(dl.Payload))
	if err != nil {
		return DeadLetterOutcome{}, err
	}
	if refusal != "" {
		dl, err = b.store.RefuseDeadLetterAgain(ctx, id, refusal,
			auditOf(ctx, dl.VoucherCode, AuditDeadLetterRefused, describeDeadLetter(dl)+": applied again, refused again: "+refusal))
		return DeadLetterOutcome{DeadLetter: dl}, err
	}
	dl, err = b.store.CloseDeadLetter(ctx, id, DeadLetterApplied,
		auditOf(ctx, dl.VoucherCode, AuditDeadLetterApplied, describeDeadLetter(dl)+": applied again, now in the database"))
	return DeadLetterOutcome{DeadLetter: dl, Applied: err == nil}, err
}

// DiscardDeadLetter closes a dead letter without applying it: nothing is
// written, the gate is left as it is (a refused reservation's use stays
// taken there until a rebuild). Audited with who did it.
// Errors: FORBIDDEN, NOT_FOUND, DEAD_LETTER_CLOSED.
func (b *Backoffice) DiscardDeadLetter(ctx context.Context, id int64) (DeadLetter, error) {
	dl, err := b.DeadLetter(ctx, id)
	if err != nil {
		return DeadLetter{}, err
	}
	if dl.Closed() {
		return DeadLetter{}, closedError(dl)
	}
	return b.store.CloseDeadLetter(ctx, id, DeadLetterDiscarded,
		auditOf(ctx, dl.VoucherCode, AuditDeadLetterDiscarded, describeDeadLetter(dl)+": discarded, never applied; last reason: "+dl.Reason))
}

func closedError(dl DeadLetter) error {
	return Errorf(DeadLetterClosed, "dead letter #%d was %s already by %s", dl.ID, dl.Resolution, dl.ResolvedBy)
}

// describeDeadLetter names a dead letter's event for the audit log.
func describeDeadLetter(dl DeadLetter) string {
	what := fmt.Sprintf("dead letter #%d (%s", dl.ID, dl.Kind)
	if dl.OrderID != "" {
		what += " of order " + dl.OrderID
	}
	if dl.VoucherCode != "" {
		what += " on " + dl.VoucherCode
	}
	return what + ")"
}

// AppliesEvents reports whether this server runs the Kafka write path's
// applier, without which no dead letter can be applied again.
func (b *Backoffice) AppliesEvents() bool { return b.svc.EventApplier() != nil }
