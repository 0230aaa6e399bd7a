package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

// The database side of the Kafka write path: the consumer's transactions
// (one per event) and the expiry sweep's steps in kafka mode.

var _ voucher.EventStore = (*Store)(nil)

// ApplyEvent applies one gate decision in one transaction and returns the
// reservation's status after it. The order's row is made first if it is
// missing (every event carries the whole reservation), counting a use for
// the customer and the voucher only when a row was inserted; then confirmed
// and released move it from RESERVED, whatever the clock (the gate decided
// in time). Applying an event again changes nothing. Refusals
// (*voucher.EventRefusedError): a CHECK fired (the gate admitted more than
// the database allows), the orderId belongs to another voucher, customer or
// amount, or the row's state contradicts the event.
func (s *Store) ApplyEvent(ctx context.Context, ev voucher.Event) (voucher.Status, error) {
	var status voucher.Status
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		var err error
		status, err = applyReserved(ctx, q, ev)
		if err != nil {
			return err
		}
		if ev.Kind == voucher.EventReserved || status == target(ev.Kind) {
			return nil // reserved, or applied before: nothing to change
		}
		if status == voucher.StatusRolledBack {
			// Its confirm was applied before the rollback (this one is a
			// replay, or published again by the sweep or reconciliation),
			// or the gate answered a release of the order it holds released
			// since the rollback's give-back: the use is back already.
			return nil
		}
		if status != voucher.StatusReserved {
			return &voucher.EventRefusedError{Reason: fmt.Sprintf("%s, but the reservation is %s", ev.Kind, status)}
		}
		decided := ev.DecidedAt
		switch ev.Kind {
		case voucher.EventConfirmed:
			row, err := q.VoucherRedemptionConfirmDecided(ctx, db.VoucherRedemptionConfirmDecidedParams{OrderID: ev.OrderID, DecidedAt: &decided})
			if err != nil {
				return err
			}
			if err := q.VoucherUseConfirm(ctx, row.VoucherCode); err != nil {
				return err
			}
			status = voucher.StatusConfirmed
			return q.ReservationEventInsertMany(ctx, event(row, "confirmed", voucher.PathKafka))
		case voucher.EventReleased:
			row, err := q.VoucherRedemptionReleaseDecided(ctx, db.VoucherRedemptionReleaseDecidedParams{OrderID: ev.OrderID, DecidedAt: &decided})
			if err != nil {
				return err
			}
			status = voucher.StatusReleased
			return giveBack(ctx, q, row, "released", voucher.PathKafka)
		}
		return &voucher.EventRefusedError{Reason: fmt.Sprintf("unknown event kind %q", ev.Kind)}
	})
	if err != nil {
		return "", refusedOrTransient(err)
	}
	return status, nil
}

// ApplyReservedBatch applies reserved events of one voucher in one
// transaction: a row, a customer use and a voucher use for each order the
// database does not hold yet, and one update of the voucher's row for them
// all. applied[i] is false for an event whose order was held already: the
// caller applies it with ApplyEvent (which changes nothing or refuses it).
// Any error rolls the whole batch back; the caller then applies the events
// one by one, so a refused one is told apart from the others.
func (s *Store) ApplyReservedBatch(ctx context.Context, evs []voucher.Event) ([]bool, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	for _, ev := range evs {
		if ev.Kind != voucher.EventReserved {
			return nil, fmt.Errorf("postgres: a batch holds only reserved events (%s)", ev)
		}
	}
	var made map[string]bool
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) (err error) {
		made, err = recordUses(ctx, q, evs[0].Code, evs)
		return err
	})
	if err != nil {
		return nil, refusedOrTransient(err)
	}
	applied := make([]bool, len(evs))
	for i, e := range evs {
		// A duplicate orderId in the batch: the first one made the row.
		if made[e.OrderID] {
			applied[i] = true
			delete(made, e.OrderID)
		}
	}
	return applied, nil
}

func target(k voucher.EventKind) voucher.Status {
	switch k {
	case voucher.EventConfirmed:
		return voucher.StatusConfirmed
	case voucher.EventReleased:
		return voucher.StatusReleased
	}
	return voucher.StatusReserved
}

// applyReserved makes the order's row if it is missing, counting a use (a
// batch of one for recordUses), and returns its status, the row locked. The
// lock order is reserve's: order, customer, voucher.
func applyReserved(ctx context.Context, q *db.Queries, ev voucher.Event) (voucher.Status, error) {
	made, err := recordUses(ctx, q, ev.Code, []voucher.Event{ev})
	if errors.Is(err, errSumTooLarge) || errors.Is(err, errPeriodOver) {
		return "", &voucher.EventRefusedError{Reason: err.Error()}
	}
	if err != nil {
		return "", err
	}
	if made[ev.OrderID] {
		return voucher.StatusReserved, nil
	}
	// The row exists (this event or an earlier one was applied).
	row, err := q.VoucherRedemptionGetForUpdate(ctx, ev.OrderID)
	if err != nil {
		return "", err
	}
	if row.VoucherCode != ev.Code || row.CustomerID != ev.CustomerID || row.OrderAmount != ev.OrderAmount {
		return "", &voucher.EventRefusedError{Reason: fmt.Sprintf("order %s is held by voucher %s, customer %d, amount %d",
			ev.OrderID, row.VoucherCode, row.CustomerID, row.OrderAmount)}
	}
	return voucher.Status(row.Status), nil
}

// refusedOrTransient turns a violated constraint (SQLSTATE class 23) or a
// value the database cannot hold (class 22, data exception: an amount out
// of bigint's range) into a refusal: applied again, the event would fail
// again. Anything else may succeed on another try.
func refusedOrTransient(err error) error {
	var refused *voucher.EventRefusedError
	if errors.As(err, &refused) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "23") || strings.HasPrefix(pgErr.Code, "22")) {
		return &voucher.EventRefusedError{Reason: fmt.Sprintf("the database refused it: %s (SQLSTATE %s, constraint %s)", pgErr.Message, pgErr.Code, pgErr.ConstraintName)}
	}
	return fmt.Errorf("postgres: %w", err)
}

// DueReservations lists up to limit RESERVED reservations past their
// deadline by the database's clock, oldest deadline first.
//
// The reservations the database decides alone (ordinary vouchers', flash
// campaigns') come first, up to limit, then up to limit of those a flash
// gate decides: a gate that cannot decide now (paused, not due on its
// clock, an admission pending) leaves its rows due, and oldest first they
// would fill every pass's list and stop every other voucher's expiry.
func (s *Store) DueReservations(ctx context.Context, limit int) ([]voucher.DueReservation, error) {
	var out []voucher.DueReservation
	for _, gateDecides := range []bool{false, true} {
		rows, err := s.q.VoucherRedemptionListDueWithFlash(ctx, db.VoucherRedemptionListDueWithFlashParams{GateDecides: gateDecides, N: limit32(limit)})
		if err != nil {
			return nil, mapError(err)
		}
		for _, r := range rows {
			// A flash campaign's reservation is the database's to expire, as
			// on the sync path (its gate only hears of the use given back).
			out = append(out, voucher.DueReservation{Reservation: toReservation(r.VoucherRedemption), Flash: gateDecides})
		}
	}
	return out, nil
}

// ExpireReservation releases one reservation if it is still RESERVED and
// past its deadline, giving its use back; expired is false when it was not.
func (s *Store) ExpireReservation(ctx context.Context, orderID string) (voucher.Reservation, bool, error) {
	var res voucher.Reservation
	var expired bool
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		row, err := q.VoucherRedemptionExpire(ctx, orderID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // confirmed or released meanwhile, or not due by the database's clock
		}
		if err != nil {
			return err
		}
		res, expired = toReservation(row), true
		return giveBack(ctx, q, row, "expired", voucher.PathExpiry)
	})
	if err != nil {
		return voucher.Reservation{}, false, mapError(err)
	}
	return res, expired, nil
}

// SaveDeadLetter keeps a dead letter, once per topic position and event.
func (s *Store) SaveDeadLetter(ctx context.Context, dl voucher.DeadLetter) error {
	err := s.q.DeadLetterInsert(ctx, db.DeadLetterInsertParams{
		EventID: dl.EventID, Topic: dl.Topic, Partition: dl.Partition, Offset: dl.Offset,
		VoucherCode: dl.VoucherCode, OrderID: dl.OrderID, Kind: dl.Kind,
		Reason: dl.Reason, Payload: strings.ToValidUTF8(strings.ReplaceAll(dl.Payload, "\x00", ""), "?"),
	})
	return mapError(err)
}

// DeadLetters lists the latest dead letters, newest first.
func (s *Store) DeadLetters(ctx context.Context, limit int) ([]voucher.DeadLetter, error) {
	rows, err := s.q.DeadLetterListLatest(ctx, limit32(limit))
	return toDeadLetters(rows), mapError(err)
}

// OpenDeadLetters lists the dead letters no operator closed, newest first.
func (s *Store) OpenDeadLetters(ctx context.Context, limit int) ([]voucher.DeadLetter, error) {
	rows, err := s.q.DeadLetterListOpen(ctx, limit32(limit))
	return toDeadLetters(rows), mapError(err)
}

// DeadLetter reads one dead letter. Errors: NOT_FOUND.
func (s *Store) DeadLetter(ctx context.Context, id int64) (voucher.DeadLetter, error) {
	row, err := s.q.DeadLetterGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.DeadLetter{}, voucher.Errorf(voucher.NotFound, "no dead letter #%d", id)
	}
	if err != nil {
		return voucher.DeadLetter{}, mapError(err)
	}
	return toDeadLetter(row), nil
}

// CloseDeadLetter closes an open dead letter and records the audit event
// in the same transaction; of two operators at once, one closes it.
// Errors: DEAD_LETTER_CLOSED, NOT_FOUND.
func (s *Store) CloseDeadLetter(ctx context.Context, id int64, resolution string, audit voucher.AuditEvent) (voucher.DeadLetter, error) {
	var row db.DeadLetter
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		var err error
		row, err = q.DeadLetterResolve(ctx, db.DeadLetterResolveParams{ID: id, Resolution: &resolution, ResolvedBy: audit.Actor})
		if errors.Is(err, pgx.ErrNoRows) {
			return deadLetterGone(ctx, q, id)
		}
		if err != nil {
			return err
		}
		return q.VoucherAuditInsertRepair(ctx, repairAudit(audit))
	})
	if err != nil {
		return voucher.DeadLetter{}, mapError(err)
	}
	return toDeadLetter(row), nil
}

// RefuseDeadLetterAgain keeps an open dead letter with its new reason and
// records the audit event. Errors: DEAD_LETTER_CLOSED, NOT_FOUND.
func (s *Store) RefuseDeadLetterAgain(ctx context.Context, id int64, reason string, audit voucher.AuditEvent) (voucher.DeadLetter, error) {
	var row db.DeadLetter
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		var err error
		row, err = q.DeadLetterRefusedAgain(ctx, db.DeadLetterRefusedAgainParams{ID: id, Reason: reason})
		if errors.Is(err, pgx.ErrNoRows) {
			return deadLetterGone(ctx, q, id)
		}
		if err != nil {
			return err
		}
		return q.VoucherAuditInsertRepair(ctx, repairAudit(audit))
	})
	if err != nil {
		return voucher.DeadLetter{}, mapError(err)
	}
	return toDeadLetter(row), nil
}

// deadLetterGone says why a dead letter could not be changed: closed by
// someone else meanwhile, or never there.
func deadLetterGone(ctx context.Context, q *db.Queries, id int64) error {
	row, err := q.DeadLetterGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.Errorf(voucher.NotFound, "no dead letter #%d", id)
	}
	if err != nil {
		return err
	}
	return voucher.Errorf(voucher.DeadLetterClosed, "dead letter #%d was %s already by %s", id, deref(row.Resolution), row.ResolvedBy)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func repairAudit(e voucher.AuditEvent) db.VoucherAuditInsertRepairParams {
	return db.VoucherAuditInsertRepairParams{
		VoucherCode: e.VoucherCode, Actor: e.Actor, ActorRole: string(e.ActorRole), Action: e.Action, Detail: e.Detail,
	}
}

func toDeadLetters(rows []db.DeadLetter) []voucher.DeadLetter {
	out := make([]voucher.DeadLetter, len(rows))
	for i, r := range rows {
		out[i] = toDeadLetter(r)
	}
	return out
}

func toDeadLetter(r db.DeadLetter) voucher.DeadLetter {
	return voucher.DeadLetter{
		ID: r.ID, EventID: r.EventID, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		VoucherCode: r.VoucherCode, OrderID: r.OrderID, Kind: r.Kind, Reason: r.Reason,
		Payload: r.Payload, CreatedAt: r.CreatedAt,
		Resolution: deref(r.Resolution), ResolvedBy: r.ResolvedBy, ResolvedAt: r.ResolvedAt, Retries: int(r.Retries),
	}
}

// DeadLetterCount counts the open dead letters, for the dashboard.
func (s *Store) DeadLetterCount(ctx context.Context) (int, error) {
	n, err := s.q.DeadLetterCountOpen(ctx)
	if err != nil {
		return 0, mapError(err)
	}
	return int(n), nil // a row count (bigint): int is 64 bits on every platform this builds for
}
