// Package postgres is the voucher store over PostgreSQL: the sqlc queries of
// sql/ in transactions, with database errors mapped to the domain's codes.
package postgres

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"voucherd/internal/coalesce"
	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

// Store implements voucher.Store.
type Store struct {
	pool *pgxpool.Pool
	q    *db.Queries
	// reserveSlots bounds each voucher's reserve transactions in flight
	// (code -> chan struct{}). They all end on the voucher's one row: past a
	// few at once they only queue on its lock and build multixacts from the
	// foreign keys' key-share locks (docs/benchmarks.md: a sale's winners
	// 642/s with 16 at once, 1,617/s with 4).
	reserveSlots sync.Map
	// winnerQueues holds each flash voucher's admitted reserves waiting to
	// be written in a batch (batch.go).
	winnerQueues *coalesce.PerKey[*pendingWinner]
	// lookups holds the reads of Reservation waiting for a query (lookup.go).
	lookups       *coalesce.Coalescer[*pendingLookup]
	lookupQueries atomic.Int64 // queries it sent, for tests
}

// ReserveConcurrency is how many reserve transactions of one voucher run at
// once in one process.
const ReserveConcurrency = 4

var _ voucher.Store = (*Store)(nil)

// New returns a store over the pool.
func New(pool *pgxpool.Pool) *Store {
	s := &Store{pool: pool, q: db.New(pool)}
	s.lookups = coalesce.New(lookupWorkers, maxLookupBatch, s.lookup)
	s.winnerQueues = coalesce.NewPerKey(winnerWriters, MaxWinnerBatch, func(_ string, batch []*pendingWinner) {
		s.writeBatch(batch, batchSplits)
	})
	return s
}

// Pool is the connection pool, for health checks.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// withTx runs fn in one transaction, committed when fn returns nil.
func (s *Store) withTx(ctx context.Context, opts pgx.TxOptions, fn func(q *db.Queries) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error {
		return fn(s.q.WithTx(tx))
	})
}

// CreateVoucher inserts a voucher. Errors: VOUCHER_EXISTS.
func (s *Store) CreateVoucher(ctx context.Context, n voucher.NewVoucher) (voucher.Voucher, error) {
	total, perUser, err := limits32(n)
	if err != nil {
		return voucher.Voucher{}, err
	}
	rc := columnsOf(n.Restrictions)
	row, err := s.q.VoucherInsert(ctx, db.VoucherInsertParams{
		Code:                n.Code,
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
		return voucher.Voucher{}, voucher.Errorf(voucher.VoucherExists, "voucher %s already exists", n.Code)
	}
	if err != nil {
		return voucher.Voucher{}, mapError(err)
	}
	return toVoucher(row), nil
}

// Voucher reads a voucher. Errors: NOT_FOUND.
// A campaign code is shown as its own voucher: its limit and counts, its
// campaign's terms, CampaignID set.
func (s *Store) Voucher(ctx context.Context, code string) (voucher.Voucher, error) {
	row, err := s.q.VoucherGetByCode(ctx, code)
	if err == nil {
		return toVoucher(row), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return voucher.Voucher{}, mapError(err)
	}
	v, _, cc, err := codeVoucher(ctx, s.q, code)
	if err != nil {
		return voucher.Voucher{}, mapError(err)
	}
	if cc == nil {
		return v, nil // a voucher created meanwhile
	}
	return cc.asCode(v), nil
}

// Availability reads a voucher with the database's clock and the customer's
// uses in one read-only snapshot, for a check. Errors: NOT_FOUND.
func (s *Store) Availability(ctx context.Context, code string, customerID int64) (voucher.Voucher, time.Time, voucher.Availability, error) {
	var v voucher.Voucher
	var now time.Time
	var a voucher.Availability
	err := s.withTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(q *db.Queries) error {
		var cc *campaignCode
		var err error
		v, now, cc, err = codeVoucher(ctx, q, code)
		if err != nil {
			return err
		}
		if err := cc.reservable(); err != nil {
			return err
		}
		uses, err := q.VoucherCustomerGetUses(ctx, db.VoucherCustomerGetUsesParams{VoucherCode: v.Code, CustomerID: customerID})
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		a = voucher.Availability{Remaining: v.Remaining(), CustomerUses: int(uses)}
		if a.PeriodUses, err = periodUses(ctx, q, v.Code, v, customerID, now); err != nil {
			return err
		}
		if cc != nil {
			// The code's uses left, within the campaign's.
			a.Remaining = min(a.Remaining, cc.useLimit-cc.used)
			v = cc.asCode(v)
		}
		if v.BudgetAmount != nil {
			left := *v.BudgetAmount - v.BudgetUsed
			a.BudgetLeft = &left
		}
		room := voucher.MoneyRoom(v.BudgetUsed)
		a.Room = &room
		return nil
	})
	if err != nil {
		return voucher.Voucher{}, time.Time{}, voucher.Availability{}, mapError(err)
	}
	return v, now, a, nil
}

// Vouchers lists vouchers newest first. Errors: INVALID_INPUT (after).
func (s *Store) Vouchers(ctx context.Context, first int, after string) (voucher.Page, error) {
	var rows []db.Voucher
	var err error
	limit := limit32(first + 1) // one more tells whether there is a next page
	if after == "" {
		rows, err = s.q.VoucherListFirst(ctx, limit)
	} else {
		createdAt, code, cerr := decodeCursor(after)
		if cerr != nil {
			return voucher.Page{}, voucher.Invalid("after", "after is not a cursor this server gave")
		}
		rows, err = s.q.VoucherListAfter(ctx, db.VoucherListAfterParams{Limit: limit, AfterCreatedAt: createdAt, AfterCode: code})
	}
	if err != nil {
		return voucher.Page{}, mapError(err)
	}
	page := voucher.Page{HasNext: len(rows) > first}
	if page.HasNext {
		rows = rows[:first]
	}
	for _, r := range rows {
		page.Vouchers = append(page.Vouchers, toVoucher(r))
		page.Cursors = append(page.Cursors, encodeCursor(r.CreatedAt, r.Code))
	}
	if n := len(page.Cursors); n > 0 {
		page.EndCursor = page.Cursors[n-1]
	}
	return page, nil
}

// FlashVouchers lists every flash voucher.
func (s *Store) FlashVouchers(ctx context.Context) ([]voucher.Voucher, error) {
	rows, err := s.q.VoucherListFlash(ctx)
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.Voucher, len(rows))
	for i, r := range rows {
		out[i] = toVoucher(r)
	}
	return out, nil
}

// Reserve applies the contract's reserve rules in one transaction. The
// orderId is claimed first (a concurrent identical request waits on its
// unique key, then finds it), then the customer's bound, then the voucher's
// conditional update: the same lock order as release and expiry, so they
// cannot deadlock.
func (s *Store) Reserve(ctx context.Context, r voucher.ReserveRequest, ttl time.Duration, path voucher.Path) (voucher.Reservation, bool, error) {
	slots, ok := s.reserveSlots.Load(r.Code)
	if !ok {
		// A campaign code takes its campaign's slots, keyed by the
		// campaign's row: the code itself is never a key.
		slots, _ = s.reserveSlots.LoadOrStore(s.slotKey(ctx, r.Code), make(chan struct{}, ReserveConcurrency))
	}
	select {
	case slots.(chan struct{}) <- struct{}{}:
		defer func() { <-slots.(chan struct{}) }()
	case <-ctx.Done():
		return voucher.Reservation{}, false, errBusy(ctx.Err())
	}
	for attempt := 0; ; attempt++ {
		res, created, err := s.reserveOnce(ctx, r, ttl, path)
		if !errors.Is(err, errOrderTaken) || attempt == 3 {
			return res, created, err
		}
		// Another request held the orderId and rolled back: try again.
	}
}

// errBusy answers a reserve whose caller gave up while it waited for the
// database (a write already begun may still commit; a retry with the same
// orderId finds it).
func errBusy(cause error) error {
	return &voucher.Error{Code: voucher.Unavailable, Message: "the database is busy; retry with the same orderId", Cause: cause}
}

// errOrderTaken: the orderId insert found a row, but it was gone by the time
// we read it (its transaction rolled back).
var errOrderTaken = errors.New("order id claimed by a concurrent transaction")

func (s *Store) reserveOnce(ctx context.Context, r voucher.ReserveRequest, ttl time.Duration, path voucher.Path) (voucher.Reservation, bool, error) {
	var res voucher.Reservation
	var created bool
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		v, now, cc, err := codeVoucher(ctx, q, r.Code)
		if err != nil {
			return err
		}
		// owner is the voucher row the use counts on: the code's own, or
		// its campaign's (whose per-customer counts span all its codes).
		owner := v.Code
		if cc != nil {
			v.Code = cc.code // the caller's code in every answer
		}

		if earlier, err := q.VoucherRedemptionGetByOrderID(ctx, r.OrderID); err == nil {
			res, err = r.RetryAt(toReservation(earlier), now)
			return err
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := cc.reservable(); err != nil {
			return err
		}
		if err := v.CheckEligible(now, r); err != nil {
			return err
		}

		// A batch of one for the writer of reserves the database decides.
		discount := v.DiscountOf(r)
		rows, err := takeUses(ctx, q, owner, cc != nil, v, ttl, path, []claim{{
			orderID: r.OrderID, customerID: r.CustomerID, amount: r.OrderAmount, discount: discount, code: r.Code, createdAt: r.PeriodAt,
		}})
		var refused *takeRefused
		switch {
		case errors.As(err, &refused) && refused.rule == byCustomer:
			return voucher.Errorf(voucher.AlreadyUsed, "customer %d already holds %d use(s) of voucher %s", r.CustomerID, v.PerUserLimit, r.Code)
		case errors.As(err, &refused) && refused.rule == byPeriod:
			return refused.refusal
		case errors.As(err, &refused) && refused.rule == byCode:
			return voucher.CodeUsedUp(cc.code)
		case errors.As(err, &refused):
			// Sold out, over budget, or the window closed since the
			// transaction began: the row as it is now says which.
			return useRefused(ctx, q, owner, v.Code, discount, now)
		case err != nil:
			return err
		}
		row, ok := rows[r.OrderID]
		if !ok {
			// A concurrent request claimed it first and has committed.
			return errConcurrentOrder
		}
		res, created = toReservation(row), true
		return nil
	})
	if errors.Is(err, errConcurrentOrder) {
		// The order was reserved by a concurrent identical (or conflicting)
		// request: answer as a retry.
		earlier, gerr := s.q.VoucherRedemptionGetByOrderID(ctx, r.OrderID)
		if errors.Is(gerr, pgx.ErrNoRows) {
			return voucher.Reservation{}, false, errOrderTaken
		}
		if gerr != nil {
			return voucher.Reservation{}, false, mapError(gerr)
		}
		res, err = r.Retry(toReservation(earlier))
		return res, false, err
	}
	if err != nil {
		return voucher.Reservation{}, false, mapError(err)
	}
	return res, created, nil
}

var errConcurrentOrder = errors.New("order id inserted by a concurrent transaction")

// useRefused says why the voucher's conditional update took no use, from
// the row as it is now and the transaction's clock (now, the update's):
// the window closed, changed since the voucher was read (NOT_ELIGIBLE, rule
// 3); the discount would take budgetUsed past voucher.MaxMoney
// (INVALID_INPUT) or the budget cannot cover it (BUDGET_EXHAUSTED); else
// sold out (OUT_OF_STOCK). The row is read after the update, so a release
// committed in between can show a use left: the update still found none,
// and only the window's closing makes a reserve NOT_ELIGIBLE (explorer
// seed 170: a reserve at the sold-out moment, a release committed just
// after, was answered NOT_ELIGIBLE for a voucher valid for days).
func useRefused(ctx context.Context, q *db.Queries, owner, code string, discount int64, now time.Time) error {
	row, err := q.VoucherGetByCode(ctx, owner)
	if err != nil {
		return err
	}
	v := toVoucher(row)
	v.Code = code // the caller's code in the answer
	if now.Before(v.StartsAt) || now.After(v.EndsAt) {
		return voucher.Errorf(voucher.NotEligible, "voucher %s is not valid now", code)
	}
	if v.Remaining() > 0 {
		if err := v.BudgetRefusal(v.BudgetUsed, discount); err != nil {
			return err
		}
	}
	return voucher.Errorf(voucher.OutOfStock, "voucher %s is sold out", code)
}

// Confirm makes a live reservation final. Errors: NOT_FOUND, RESERVATION_RELEASED.
func (s *Store) Confirm(ctx context.Context, code, orderID string, path voucher.Path) (voucher.Reservation, error) {
	var res voucher.Reservation
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		return s.confirmOnce(ctx, q, code, orderID, path, &res, true)
	})
	if err != nil {
		return voucher.Reservation{}, mapError(err)
	}
	return res, nil
}

// confirmOnce is one try of Confirm in its transaction. A reserve of the
// same order committing meanwhile is invisible to the UPDATE (its row was
// not committed when the UPDATE began) and visible to the read after it:
// a row read RESERVED is tried again (retry), and only a second miss is
// answered as expired. The explorer found the race: a confirm sent with
// its reserve was refused RESERVATION_RELEASED, and the order then held.
func (s *Store) confirmOnce(ctx context.Context, q *db.Queries, code, orderID string, path voucher.Path, res *voucher.Reservation, retry bool) error {
	{
		row, err := q.VoucherRedemptionConfirm(ctx, db.VoucherRedemptionConfirmParams{OrderID: orderID, Code: code})
		if err == nil {
			if row.CampaignCode != nil {
				if err := q.CampaignCodeUseConfirm(ctx, *row.CampaignCode); err != nil {
					return err
				}
			}
			if err := q.VoucherUseConfirm(ctx, row.VoucherCode); err != nil {
				return err
			}
			*res = toReservation(row)
			return q.ReservationEventInsertMany(ctx, event(row, "confirmed", path))
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		current, err := orderOnVoucher(ctx, q, code, orderID)
		if err != nil {
			return err
		}
		switch voucher.Status(current.Status) {
		case voucher.StatusConfirmed:
			*res = toReservation(current)
			return nil
		case voucher.StatusReleased:
			return voucher.Errorf(voucher.ReservationReleased, "the reservation for order %s was released", orderID)
		case voucher.StatusRolledBack:
			// Confirmed once, its use given back since: it cannot be
			// confirmed again, as a released one cannot.
			return voucher.Errorf(voucher.ReservationReleased, "the reservation for order %s was rolled back", orderID)
		}
		if retry {
			// Committed since the UPDATE began, or past expiresAt: the
			// second try tells which.
			return s.confirmOnce(ctx, q, code, orderID, path, res, false)
		}
		// Still RESERVED but past expiresAt: the sweep has not run yet.
		return voucher.Errorf(voucher.ReservationReleased, "the reservation for order %s expired at %s", orderID, current.ExpiresAt.UTC().Format(time.RFC3339))
	}
}

// orderOnVoucher reads an order's row as confirm and release see it after
// their UPDATE missed: NOT_FOUND when there is none for that code.
func orderOnVoucher(ctx context.Context, q *db.Queries, code, orderID string) (db.VoucherRedemption, error) {
	current, err := q.VoucherRedemptionGetByOrderID(ctx, orderID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && toReservation(current).VoucherCode != code) {
		return current, reservationNotFound(code, orderID)
	}
	return current, err
}

// Release gives a held use back; a rolled-back one is answered unchanged.
// Errors: NOT_FOUND, ALREADY_CONFIRMED.
func (s *Store) Release(ctx context.Context, code, orderID string, path voucher.Path) (voucher.Reservation, bool, error) {
	var res voucher.Reservation
	var released bool
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		// Two tries: a reserve of the order committing meanwhile is
		// invisible to the first UPDATE and visible to the read after it
		// (as in confirmOnce); a row read RESERVED is released by the
		// second, never answered as "released before".
		for try := 0; ; try++ {
			row, err := q.VoucherRedemptionRelease(ctx, db.VoucherRedemptionReleaseParams{OrderID: orderID, Code: code})
			if err == nil {
				res, released = toReservation(row), true
				return giveBack(ctx, q, row, "released", path)
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			current, err := orderOnVoucher(ctx, q, code, orderID)
			if err != nil {
				return err
			}
			switch voucher.Status(current.Status) {
			case voucher.StatusConfirmed:
				return voucher.Errorf(voucher.AlreadyConfirmed, "the reservation for order %s is confirmed", orderID)
			case voucher.StatusReleased, voucher.StatusRolledBack:
				// Released before, or its use given back by a rollback:
				// unchanged, nothing is given back twice (a kafka-mode gate
				// answers a rolled-back order's release so too).
				res = toReservation(current)
				return nil
			}
			if try > 0 {
				return voucher.Errorf(voucher.Unavailable, "the release of order %s could not take its row; retry", orderID)
			}
		}
	})
	if err != nil {
		return voucher.Reservation{}, false, mapError(err)
	}
	return res, released, nil
}

// Rollback gives a confirmed use back (CONFIRMED -> ROLLED_BACK) with its
// audit row and event, in one transaction: the use to the voucher and the
// campaign code, the customer's count, the discount to the budget. rolledBack
// is false when it was rolled back before (nothing is given back twice).
// audit's VoucherCode is set here to the row's voucher (a campaign code's
// campaign row). Errors: NOT_FOUND, NOT_CONFIRMED, RESERVATION_RELEASED.
func (s *Store) Rollback(ctx context.Context, code, orderID, reason string, audit voucher.AuditEvent) (voucher.Reservation, bool, error) {
	var res voucher.Reservation
	var rolledBack bool
	var why *string
	if reason != "" {
		why = &reason
	}
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		row, err := q.VoucherRedemptionRollBack(ctx, db.VoucherRedemptionRollBackParams{OrderID: orderID, Code: code, Reason: why})
		if errors.Is(err, pgx.ErrNoRows) {
			// No retry as in confirmOnce: a row inserted since the UPDATE
			// began is RESERVED, which a rollback refuses either way.
			current, err := orderOnVoucher(ctx, q, code, orderID)
			if err != nil {
				return err
			}
			switch voucher.Status(current.Status) {
			case voucher.StatusRolledBack:
				res = toReservation(current) // rolled back before: unchanged
				return nil
			case voucher.StatusReleased:
				return voucher.Errorf(voucher.ReservationReleased, "the reservation for order %s was released", orderID)
			}
			// RESERVED past its expiresAt is released, sweep or not, as a
			// confirm answers it (explorer seed 67: a confirm refused
			// RESERVATION_RELEASED, then a rollback said NOT_CONFIRMED).
			now, err := q.VoucherClock(ctx)
			if err != nil {
				return err
			}
			if voucher.Status(current.Status) == voucher.StatusReserved && !current.ExpiresAt.After(now) {
				return voucher.Errorf(voucher.ReservationReleased, "the reservation for order %s expired at %s", orderID, current.ExpiresAt.UTC().Format(time.RFC3339))
			}
			return voucher.Errorf(voucher.NotConfirmed, "the reservation for order %s is not confirmed; release it instead", orderID)
		}
		if err != nil {
			return err
		}
		res, rolledBack = toReservation(row), true
		if err := giveBack(ctx, q, row, "rolled_back", voucher.PathDatabase); err != nil {
			return err
		}
		audit.VoucherCode = row.VoucherCode
		return q.VoucherAuditInsert(ctx, auditParams(audit))
	})
	if err != nil {
		return voucher.Reservation{}, false, mapError(err)
	}
	return res, rolledBack, nil
}

// giveBack returns a released use to the customer, the campaign code (if
// any) and the voucher: giveBackUses of one row.
func giveBack(ctx context.Context, q *db.Queries, row db.VoucherRedemption, kind string, path voucher.Path) error {
	return giveBackUses(ctx, q, []db.VoucherRedemption{row}, kind, path)
}

// giveBackUses is the one writer of uses given back: it gives the uses of
// rows (released, expired or rolled back in this transaction; a
// ROLLED_BACK row's use was confirmed, the others' reserved) back to their
// customers, the periods of their created_at, campaign codes and vouchers
// with their discounts, and records an event of kind for each, in the lock
// order of every writer (redemptions, customers, periods, events, codes,
// vouchers last, each set sorted).
func giveBackUses(ctx context.Context, q *db.Queries, rows []db.VoucherRedemption, kind string, path voucher.Path) error {
	type holder struct {
		code     string
		customer int64
	}
	type uses struct{ released, rolledBack int32 }
	type codeUses struct{ all, rolledBack int32 }
	customers := map[holder]int32{}
	vouchers := map[string]uses{}
	codes := map[string]codeUses{}  // campaign codes' uses given back
	discounts := map[string]int64{} // each voucher's discounts given back, to its budget
	events := db.ReservationEventInsertManyParams{Kind: kind, Path: string(path)}
	var periods db.VoucherPeriodUsesGiveBackParams
	for _, r := range rows {
		customers[holder{r.VoucherCode, r.CustomerID}]++
		u := vouchers[r.VoucherCode]
		if voucher.Status(r.Status) == voucher.StatusRolledBack {
			u.rolledBack++
		} else {
			u.released++
		}
		vouchers[r.VoucherCode] = u
		if r.CampaignCode != nil {
			c := codes[*r.CampaignCode]
			c.all++
			if voucher.Status(r.Status) == voucher.StatusRolledBack {
				c.rolledBack++
			}
			codes[*r.CampaignCode] = c
		}
		discounts[r.VoucherCode] += r.DiscountAmount
		events.OrderIds = append(events.OrderIds, r.OrderID)
		events.Codes = append(events.Codes, r.VoucherCode)
		events.CustomerIds = append(events.CustomerIds, r.CustomerID)
		periods.Codes = append(periods.Codes, r.VoucherCode)
		periods.CustomerIds = append(periods.CustomerIds, r.CustomerID)
		periods.CreatedAts = append(periods.CreatedAts, r.CreatedAt)
	}
	held := slices.SortedFunc(maps.Keys(customers), func(a, b holder) int {
		return cmp.Or(strings.Compare(a.code, b.code), cmp.Compare(a.customer, b.customer))
	})
	var back db.VoucherCustomerUsesGiveBackParams
	for _, h := range held {
		back.Codes = append(back.Codes, h.code)
		back.CustomerIds = append(back.CustomerIds, h.customer)
		back.Uses = append(back.Uses, customers[h])
	}
	// An UPDATE ... FROM takes its rows in no promised order: several are
	// locked in order first. One needs no order.
	if len(held) > 1 {
		if err := q.VoucherCustomerLockMany(ctx, db.VoucherCustomerLockManyParams{Codes: back.Codes, CustomerIds: back.CustomerIds}); err != nil {
			return err
		}
	}
	if err := q.VoucherCustomerUsesGiveBack(ctx, back); err != nil {
		return err
	}
	// Each use to the period of its reservation's created_at (a voucher
	// without period limits has no rows there: nothing is touched).
	if err := q.VoucherPeriodUsesGiveBack(ctx, periods); err != nil {
		return err
	}
	if err := q.ReservationEventInsertMany(ctx, events); err != nil {
		return err
	}
	if len(codes) > 0 {
		var back db.CampaignCodeUsesGiveBackParams
		for _, code := range slices.Sorted(maps.Keys(codes)) {
			back.Codes = append(back.Codes, code)
			back.Uses = append(back.Uses, codes[code].all)
			back.RolledBack = append(back.RolledBack, codes[code].rolledBack)
		}
		if len(codes) > 1 {
			if _, err := q.CampaignCodeLockMany(ctx, back.Codes); err != nil {
				return err
			}
		}
		if err := q.CampaignCodeUsesGiveBack(ctx, back); err != nil {
			return err
		}
	}
	for _, code := range slices.Sorted(maps.Keys(vouchers)) {
		u := vouchers[code]
		if err := q.VoucherUsesGiveBack(ctx, db.VoucherUsesGiveBackParams{Code: code, Released: u.released, RolledBack: u.rolledBack, Discount: discounts[code]}); err != nil {
			return err
		}
	}
	return nil
}

// ExpireDue releases up to limit reservations past their deadline in one
// transaction and gives their uses back, in the lock order of every writer
// (redemptions, customers, events, vouchers last, each set sorted). Rows
// another instance's sweep, a confirm or a release holds are skipped, so any
// number of instances may sweep at once and each row is released once. One
// transaction a batch, not a row: the unconfirmed winners of a big sale are
// released within a pass, not over many minutes.
func (s *Store) ExpireDue(ctx context.Context, limit int) ([]voucher.Reservation, error) {
	var expired []voucher.Reservation
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		rows, err := q.VoucherRedemptionExpireDue(ctx, limit32(limit))
		if err != nil || len(rows) == 0 {
			return err
		}
		for _, r := range rows {
			expired = append(expired, toReservation(r))
		}
		return giveBackUses(ctx, q, rows, "expired", voucher.PathExpiry)
	})
	if err != nil {
		return nil, mapError(err)
	}
	return expired, nil
}

// GateSnapshot reads a flash voucher's remaining uses, customers' counts and
// live orders in one repeatable-read snapshot. Errors: NOT_FOUND.
func (s *Store) GateSnapshot(ctx context.Context, code string) (voucher.GateSnapshot, error) {
	return s.gateSnapshot(ctx, code, false)
}

// GateSnapshotAll is GateSnapshot with the released orders too, as a gate in
// kafka mode holds them. Errors: NOT_FOUND.
func (s *Store) GateSnapshotAll(ctx context.Context, code string) (voucher.GateSnapshot, error) {
	return s.gateSnapshot(ctx, code, true)
}

func (s *Store) gateSnapshot(ctx context.Context, code string, withReleased bool) (voucher.GateSnapshot, error) {
	var snap voucher.GateSnapshot
	err := s.withTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(q *db.Queries) error {
		row, err := q.VoucherGetByCode(ctx, code)
		if errors.Is(err, pgx.ErrNoRows) {
			return voucherNotFound(code)
		}
		if err != nil {
			return err
		}
		v := toVoucher(row)
		snap = voucher.GateSnapshot{
			Code:         code,
			Remaining:    v.Remaining(),
			PerUserLimit: v.PerUserLimit,
			Customers:    map[int64]int{},
			ExpireAt:     voucher.GateExpireAt(v.EndsAt),
			Total:        v.TotalLimit,
			Admitted:     int(row.AdmittedCount),
		}
		if v.BudgetAmount != nil {
			left := *v.BudgetAmount - v.BudgetUsed
			snap.Budget = &left
		}
		room := voucher.MoneyRoom(v.BudgetUsed)
		snap.Room = &room
		customers, err := q.VoucherCustomerListHolding(ctx, code)
		if err != nil {
			return err
		}
		for _, c := range customers {
			snap.Customers[c.CustomerID] = int(c.UsedCount)
		}
		if voucher.IsCampaignGate(code) {
			if err := campaignGateSnapshot(ctx, q, &snap); err != nil {
				return err
			}
		}
		if snap.TakenAt, err = q.VoucherClock(ctx); err != nil {
			return err
		}
		// With their states and times, which a gate in kafka mode holds;
		// released ones too when asked (a kafka-mode gate answers them
		// without the database).
		var orders []db.VoucherRedemptionListLiveWithTimesRow
		if withReleased {
			all, err := q.VoucherRedemptionListAllWithTimes(ctx, code)
			if err != nil {
				return err
			}
			for _, o := range all {
				orders = append(orders, db.VoucherRedemptionListLiveWithTimesRow(o))
			}
		} else if orders, err = q.VoucherRedemptionListLiveWithTimes(ctx, code); err != nil {
			return err
		}
		for _, o := range orders {
			g := voucher.GateOrder{
				OrderID: o.OrderID, CustomerID: o.CustomerID, OrderAmount: o.OrderAmount,
				Confirmed: o.Status == string(voucher.StatusConfirmed), Released: !voucher.Status(o.Status).HoldsUse(),
				CreatedAt: o.CreatedAt, ExpiresAt: o.ExpiresAt, Position: int(o.Position),
			}
			// The discount the row holds, when its amount gives another
			// (appliesTo): the gate keeps it for the order's give-backs.
			if d := o.DiscountAmount; d != v.DiscountFor(o.OrderAmount) {
				g.Discount = &d
			}
			snap.Orders = append(snap.Orders, g)
		}
		// The period counts around the database's now, in the same
		// snapshot as the orders that hold them.
		if len(v.PeriodLimits) > 0 {
			rows, err := periodCountsAround(ctx, q, code, snap.TakenAt)
			if err != nil {
				return err
			}
			snap.Periods, snap.OrderPeriods = voucher.GatePeriodsOf(v, snap.TakenAt, rows, snap.Orders)
		}
		return nil
	})
	if err != nil {
		return voucher.GateSnapshot{}, mapError(err)
	}
	return snap, nil
}

func voucherNotFound(code string) error {
	return voucher.Errorf(voucher.NotFound, "no voucher with code %s", code)
}

func reservationNotFound(code, orderID string) error {
	return voucher.Errorf(voucher.NotFound, "no reservation for order %s on voucher %s", orderID, code)
}

func event(row db.VoucherRedemption, kind string, path voucher.Path) db.ReservationEventInsertManyParams {
	return db.ReservationEventInsertManyParams{
		OrderIds: []string{row.OrderID}, Codes: []string{row.VoucherCode}, CustomerIds: []int64{row.CustomerID}, Kind: kind, Path: string(path),
	}
}

// mapError keeps domain errors, turns a violated constraint into the refusal
// it stands for, and wraps anything else (to be logged, never shown).
func mapError(err error) error {
	if err == nil || voucher.IsRefusal(err) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.ConstraintName == "voucher_used_within_limit":
			return voucher.Errorf(voucher.OutOfStock, "the voucher is sold out")
		case pgErr.ConstraintName == "voucher_budget_within":
			return voucher.Errorf(voucher.BudgetExhausted, "the voucher's budget cannot cover the discount")
		case pgErr.ConstraintName == "voucher_customer_within_limit":
			return voucher.Errorf(voucher.AlreadyUsed, "the customer already holds the voucher's per-customer limit")
		case pgErr.Code == "23505" && pgErr.ConstraintName == "voucher_code_pkey":
			// The registry of codes: a campaign's code (or a voucher's) has it.
			return voucher.Errorf(voucher.VoucherExists, "the code is taken")
		case pgErr.ConstraintName == "voucher_code_used_within_limit":
			return voucher.CodeUsedUp("the code")
		case pgErr.Code == "23505" && strings.HasPrefix(pgErr.ConstraintName, "voucher_redemption"):
			return voucher.Errorf(voucher.OrderConflict, "the orderId was already used")
		}
	}
	if isUnavailable(err) {
		return &voucher.Error{Code: voucher.Unavailable, Message: "the database is unavailable; retry with the same orderId (a retry never takes a second use)", Cause: err}
	}
	return fmt.Errorf("postgres: %w", err)
}

// isUnavailable tells a database that is down, unreachable, overloaded or
// timing out, or a connection lost mid-request (the caller may retry; a
// write's outcome may be unknown), from a fault in the request.
func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return true
	}
	// The connection ended under the request: the server went away without
	// a word (a crash, a restart, a cut network) or pgx had closed it.
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"),          // insufficient resources (too many connections)
			pgErr.Code == "57P01",                        // admin_shutdown: terminated, or the server shuts down
			pgErr.Code == "57P02",                        // crash_shutdown: another backend crashed
			pgErr.Code == "57P03",                        // cannot_connect_now: starting up
			pgErr.Code == "57014",                        // query_canceled: a statement timeout or a cancel request
			pgErr.Code == "40001", pgErr.Code == "40P01": // serialization failure, deadlock
			return true
		}
	}
	return false
}

func toVoucher(r db.Voucher) voucher.Voucher {
	var percent int
	if r.DiscountPercent != nil {
		percent = int(*r.DiscountPercent)
	}
	return voucher.Voucher{
		Code:              r.Code,
		DiscountType:      voucher.DiscountType(r.DiscountType),
		DiscountAmount:    r.DiscountAmount,
		DiscountPercent:   percent,
		MaxDiscountAmount: r.MaxDiscountAmount,
		Currency:          r.Currency,
		BudgetAmount:      r.BudgetAmount,
		BudgetUsed:        r.BudgetUsed,
		MinOrderAmount:    r.MinOrderAmount,
		TotalLimit:        int(r.TotalLimit),
		PerUserLimit:      int(r.PerUserLimit),
		UsedCount:         int(r.UsedCount),
		ReservedCount:     int(r.ReservedCount),
		ConfirmedCount:    int(r.ConfirmedCount),
		RolledBackCount:   int(r.RolledBackCount),
		StartsAt:          r.StartsAt,
		EndsAt:            r.EndsAt,
		Flash:             r.Flash,
		CreatedAt:         r.CreatedAt,
		Restrictions:      restrictionsOf(r),
	}
}

// percent32 is a discountPercent for its int4 column: nil for none (0);
// Validate has bounded it to 1-100.
func percent32(p int) *int32 {
	if p == 0 {
		return nil
	}
	v := int32(min(max(p, 0), 100)) // #nosec G115 -- bounded to 0-100 on this line
	return &v
}

// toReservation names a campaign code's reservation by the code it was made
// with (its voucher_code is the campaign's row).
func toReservation(r db.VoucherRedemption) voucher.Reservation {
	code := r.VoucherCode
	if r.CampaignCode != nil {
		code = *r.CampaignCode
	}
	return voucher.Reservation{
		OrderID:        r.OrderID,
		VoucherCode:    code,
		CustomerID:     r.CustomerID,
		OrderAmount:    r.OrderAmount,
		DiscountAmount: r.DiscountAmount,
		Status:         voucher.Status(r.Status),
		CreatedAt:      r.CreatedAt,
		ExpiresAt:      r.ExpiresAt,
		ConfirmedAt:    r.ConfirmedAt,
		ReleasedAt:     r.ReleasedAt,
		RolledBackAt:   r.RolledBackAt,
		RollbackReason: deref(r.RollbackReason),
		Position:       int(r.Position),
	}
}

// A cursor is the position (created_at, code) of the last voucher of a page.
func encodeCursor(createdAt time.Time, code string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(createdAt.UTC().Format(time.RFC3339Nano) + "|" + code))
}

func decodeCursor(cursor string) (time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return time.Time{}, "", err
	}
	ts, code, ok := strings.Cut(string(raw), "|")
	if !ok {
		return time.Time{}, "", errors.New("malformed cursor")
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	return t, code, err
}
