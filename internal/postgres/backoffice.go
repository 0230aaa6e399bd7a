package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

var _ voucher.BackofficeStore = (*Store)(nil)

// SearchVouchers lists vouchers newest first by a filter.
func (s *Store) SearchVouchers(ctx context.Context, f voucher.VoucherFilter) ([]voucher.Voucher, error) {
	rows, err := s.q.VoucherSearch(ctx, db.VoucherSearchParams{
		Search:     likeEscape(strings.ToLower(f.Search)),
		State:      string(f.State),
		FlashOnly:  f.FlashOnly,
		Sort:       string(f.Sort),
		Descending: f.Descending,
		SkipRows:   limit32(f.Offset),
		MaxRows:    limit32(f.Limit),
	})
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.Voucher, len(rows))
	for i, r := range rows {
		out[i] = toVoucher(r)
	}
	return out, nil
}

// CountVouchers counts the vouchers a filter matches, whatever its page.
func (s *Store) CountVouchers(ctx context.Context, f voucher.VoucherFilter) (int, error) {
	n, err := s.q.VoucherSearchCount(ctx, db.VoucherSearchCountParams{
		Search:    likeEscape(strings.ToLower(f.Search)),
		State:     string(f.State),
		FlashOnly: f.FlashOnly,
	})
	if err != nil {
		return 0, mapError(err)
	}
	return int(n), nil // a row count (bigint): int is 64 bits on every platform this builds for
}

// likeEscape makes s match itself in a LIKE pattern (backslash is the
// default escape character).
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// UpdateVoucher replaces the terms of a voucher that has not started, with
// its audit row, in one transaction. Errors: NOT_FOUND, VOUCHER_STARTED,
// VOUCHER_EXISTS.
func (s *Store) UpdateVoucher(ctx context.Context, code string, n voucher.NewVoucher, audit voucher.AuditEvent) (voucher.Voucher, error) {
	total, perUser, err := limits32(n)
	if err != nil {
		return voucher.Voucher{}, err
	}
	var out voucher.Voucher
	rc := columnsOf(n.Restrictions)
	err = s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		row, err := q.VoucherUpdateBeforeStart(ctx, db.VoucherUpdateBeforeStartParams{
			Code:                code,
			NewCode:             n.Code,
			DiscountType:        string(n.DiscountType),
			DiscountAmount:      n.DiscountAmount,
			DiscountPercent:     percent32(n.DiscountPercent),
			MaxDiscountAmount:   n.MaxDiscountAmount,
			Currency:            n.Currency,
			BudgetAmount:        n.BudgetAmount,
			MinOrderAmount:      n.MinOrderAmount,
			TotalLimit:          total,
			PerUserLimit:        perUser,
			StartsAt:            n.StartsAt,
			EndsAt:              n.EndsAt,
			Flash:               n.Flash,
			TimeZone:            rc.timeZone,
			PeriodLimits:        rc.limits,
			EligibleSegments:    rc.segments,
			AppliesToSkus:       rc.skus,
			AppliesToCategories: rc.cats,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			if _, gerr := q.VoucherGetByCode(ctx, code); errors.Is(gerr, pgx.ErrNoRows) {
				return voucherNotFound(code)
			}
			return voucher.Errorf(voucher.VoucherStarted, "voucher %s has started; it can only be ended now", code)
		}
		if isUniqueViolation(err, "voucher_pkey") {
			return voucher.Errorf(voucher.VoucherExists, "voucher %s already exists", n.Code)
		}
		if err != nil {
			return err
		}
		out = toVoucher(row)
		return q.VoucherAuditInsert(ctx, auditParams(audit))
	})
	if err != nil {
		return voucher.Voucher{}, mapError(err)
	}
	return out, nil
}

// EndVoucher closes a live voucher's window now, with its audit row, in one
// transaction. Errors: NOT_FOUND, VOUCHER_NOT_LIVE.
func (s *Store) EndVoucher(ctx context.Context, code string, audit voucher.AuditEvent) (voucher.Voucher, error) {
	var out voucher.Voucher
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		row, err := q.VoucherEndNow(ctx, code)
		if errors.Is(err, pgx.ErrNoRows) {
			if _, gerr := q.VoucherGetByCode(ctx, code); errors.Is(gerr, pgx.ErrNoRows) {
				return voucherNotFound(code)
			}
			return voucher.Errorf(voucher.VoucherNotLive, "voucher %s is not live: it has not started or has ended", code)
		}
		if err != nil {
			return err
		}
		out = toVoucher(row)
		return q.VoucherAuditInsert(ctx, auditParams(audit))
	})
	if err != nil {
		return voucher.Voucher{}, mapError(err)
	}
	return out, nil
}

// ExtendVoucher sets a voucher's total and end in one conditional UPDATE
// (VoucherExtend: the rules are its condition, not a read before it) and
// records the audit event made from the values before and after, in one
// transaction. A refusal reads the voucher only to say which rule it broke.
// Errors: NOT_FOUND, VOUCHER_NOT_LIVE, INVALID_INPUT (totalLimit, endsAt).
func (s *Store) ExtendVoucher(ctx context.Context, code string, totalLimit int, endsAt time.Time, audit func(before, after voucher.Voucher) voucher.AuditEvent) (voucher.Voucher, voucher.Voucher, error) {
	total, err := count32("totalLimit", totalLimit)
	if err != nil {
		return voucher.Voucher{}, voucher.Voucher{}, err
	}
	var before, after voucher.Voucher
	err = s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		old, err := q.VoucherExtend(ctx, db.VoucherExtendParams{Code: code, TotalLimit: total, EndsAt: endsAt})
		if errors.Is(err, pgx.ErrNoRows) {
			row, gerr := q.VoucherGetByCode(ctx, code)
			if errors.Is(gerr, pgx.ErrNoRows) {
				return voucherNotFound(code)
			}
			if gerr != nil {
				return gerr
			}
			now, cerr := q.VoucherClock(ctx)
			if cerr != nil {
				return cerr
			}
			if refusal := voucher.CheckExtension(toVoucher(row), totalLimit, endsAt, now); refusal != nil {
				return refusal
			}
			// Refused, yet every rule holds now: the voucher changed in
			// between (its uses released). Nothing was written.
			return voucher.Errorf(voucher.Unavailable, "voucher %s changed while it was extended; try again", code)
		}
		if err != nil {
			return err
		}
		row, err := q.VoucherGetByCode(ctx, code)
		if err != nil {
			return err
		}
		after = toVoucher(row)
		before = after
		before.TotalLimit, before.EndsAt = int(old.OldTotalLimit), old.OldEndsAt
		return q.VoucherAuditInsert(ctx, auditParams(audit(before, after)))
	})
	if err != nil {
		return voucher.Voucher{}, voucher.Voucher{}, mapError(err)
	}
	return before, after, nil
}

// AddAuditEvent records one change of a voucher.
func (s *Store) AddAuditEvent(ctx context.Context, e voucher.AuditEvent) error {
	return mapError(s.q.VoucherAuditInsert(ctx, auditParams(e)))
}

// AuditEvents returns a voucher's latest audit events, newest first.
func (s *Store) AuditEvents(ctx context.Context, code string, limit int) ([]voucher.AuditEvent, error) {
	rows, err := s.q.VoucherAuditListByVoucher(ctx, db.VoucherAuditListByVoucherParams{VoucherCode: &code, Limit: limit32(limit)})
	if err != nil {
		return nil, mapError(err)
	}
	return auditEvents(rows), nil
}

// OperationAudit returns the latest repairs recorded (gate rebuilds and
// reconciliations by hand), newest first.
func (s *Store) OperationAudit(ctx context.Context, limit int) ([]voucher.AuditEvent, error) {
	rows, err := s.q.VoucherAuditListOperations(ctx, limit32(limit))
	if err != nil {
		return nil, mapError(err)
	}
	return auditEvents(rows), nil
}

func auditEvents(rows []db.VoucherAudit) []voucher.AuditEvent {
	out := make([]voucher.AuditEvent, len(rows))
	for i, r := range rows {
		out[i] = voucher.AuditEvent{
			Actor: r.Actor, ActorRole: voucher.Role(r.ActorRole),
			Action: r.Action, Detail: r.Detail, At: r.OccurredAt,
		}
		if r.VoucherCode != nil {
			out[i].VoucherCode = *r.VoucherCode
		}
	}
	return out
}

// ReservationEvents returns a voucher's latest reservation events, newest first.
func (s *Store) ReservationEvents(ctx context.Context, code string, limit int) ([]voucher.ReservationEvent, error) {
	rows, err := s.q.ReservationEventListByVoucher(ctx, db.ReservationEventListByVoucherParams{VoucherCode: code, Limit: limit32(limit)})
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.ReservationEvent, len(rows))
	for i, r := range rows {
		out[i] = voucher.ReservationEvent{
			OrderID: r.OrderID, VoucherCode: r.VoucherCode, CustomerID: r.CustomerID,
			Kind: r.Kind, Path: voucher.Path(r.Path), At: r.OccurredAt,
		}
	}
	return out, nil
}

// RecentReservations returns a voucher's latest reservations, newest first.
func (s *Store) RecentReservations(ctx context.Context, code string, limit int) ([]voucher.Reservation, error) {
	rows, err := s.q.VoucherRedemptionListRecent(ctx, db.VoucherRedemptionListRecentParams{VoucherCode: code, Limit: limit32(limit)})
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.Reservation, len(rows))
	for i, r := range rows {
		out[i] = toReservation(r)
	}
	return out, nil
}

// RemainingSamples returns a voucher's latest samples, newest first.
func (s *Store) RemainingSamples(ctx context.Context, code string, limit int) ([]voucher.RemainingSample, error) {
	rows, err := s.q.VoucherSampleListRecent(ctx, db.VoucherSampleListRecentParams{VoucherCode: code, Limit: limit32(limit)})
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.RemainingSample, len(rows))
	for i, r := range rows {
		out[i] = voucher.RemainingSample{At: r.SampledAt, Remaining: int(r.Remaining), Reserved: int(r.Reserved), Confirmed: int(r.Confirmed)}
	}
	return out, nil
}

// SampleOpenVouchers samples the counters of vouchers in (or just past)
// their window whose counters changed; it returns how many it sampled.
func (s *Store) SampleOpenVouchers(ctx context.Context, grace time.Duration) (int, error) {
	n, err := s.q.VoucherSampleTakeOpen(ctx, grace.Seconds())
	if err != nil {
		return 0, mapError(err)
	}
	return int(n), nil // a row count (bigint): int is 64 bits on every platform this builds for
}

func auditParams(e voucher.AuditEvent) db.VoucherAuditInsertParams {
	var code *string // a reconciliation is of no one voucher
	if e.VoucherCode != "" {
		code = &e.VoucherCode
	}
	return db.VoucherAuditInsertParams{
		VoucherCode: code, Actor: e.Actor, ActorRole: string(e.ActorRole), Action: e.Action, Detail: e.Detail,
	}
}

func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

// ReservationPage returns a page of a voucher's reservations, newest first.
func (s *Store) ReservationPage(ctx context.Context, code string, f voucher.ReservationFilter) ([]voucher.Reservation, error) {
	p := db.VoucherRedemptionPageParams{
		VoucherCode: code, Status: string(f.Status), CustomerID: f.CustomerID, MaxRows: limit32(f.Limit),
	}
	if f.After != nil {
		p.After, p.AfterCreatedAt, p.AfterOrderID = true, f.After.CreatedAt, f.After.OrderID
	}
	rows, err := s.q.VoucherRedemptionPage(ctx, p)
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.Reservation, len(rows))
	for i, r := range rows {
		out[i] = toReservation(r)
	}
	return out, nil
}
