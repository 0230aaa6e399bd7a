package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

// The write of flash winners in batches. Every winner of a sale ends on the
// voucher's one row; written one transaction each they queue on its lock
// and the commits (docs/benchmarks.md: about 1,600 winners/s on this
// machine). Written together, the admitted reserves of a voucher that wait
// at the same moment cost one transaction and one update of that row.
// Nothing waits to fill a batch: a writer takes whatever queued while the
// previous batch was in flight, so a lone winner is written at once.

const (
	// MaxWinnerBatch bounds the reserves written in one transaction.
	MaxWinnerBatch = 128
	// winnerWriters is how many batches of one voucher are in flight at
	// once in one process: one claims its orders while the other commits.
	winnerWriters = 2
	// winnerBatchTimeout bounds one batch's transaction. The requests keep
	// their own deadlines; one that gives up first answers UNAVAILABLE, and
	// its retry finds the row if the batch committed.
	winnerBatchTimeout = WinnerWriteLimit
)

// WinnerWriteLimit is the longest a flash winner's write may take; an order
// the gate holds and the database lacks for longer than this was lost, not
// slow (reconciliation's leak age is longer).
const WinnerWriteLimit = 10 * time.Second

type pendingWinner struct {
	ctx context.Context
	// owner is the voucher row the batch writes on: the code's own, or a
	// campaign's (r.Code being one of its codes).
	owner string
	r     voucher.ReserveRequest
	ttl   time.Duration
	path  voucher.Path
	done  chan winnerOutcome // buffered: a writer never waits for the request
}

type winnerOutcome struct {
	res     voucher.Reservation
	created bool
	err     error
}

func (p *pendingWinner) answer(res voucher.Reservation, created bool, err error) {
	p.done <- winnerOutcome{res, created, err}
}

// ReserveAdmitted writes a reserve the gate admitted, in one transaction
// with the other admitted reserves of the voucher queued at the same moment,
// and answers after that transaction committed. What the batch cannot take
// goes to Reserve, one by one, so each gets exactly the answer Reserve
// gives: the orders it could not claim (held already, not eligible) after
// its commit; all of it when it cannot be written whole (a customer at the
// limit, fewer uses left than winners, any error: rolled back and split).
func (s *Store) ReserveAdmitted(ctx context.Context, r voucher.ReserveRequest, ttl time.Duration, path voucher.Path) (voucher.Reservation, bool, error) {
	return s.reserveAdmitted(ctx, r.Code, r, ttl, path)
}

// ReserveAdmittedCode is ReserveAdmitted for a code of the campaign whose
// voucher row is campaignGate: the campaign's winners of the moment, of
// any of its codes, are written in one transaction, which takes each
// code's uses (its CHECK the last line of defence) before the campaign's.
// A code that is not the campaign's, or of a campaign not READY, is left to
// Reserve, which answers it.
func (s *Store) ReserveAdmittedCode(ctx context.Context, campaignGate string, r voucher.ReserveRequest, ttl time.Duration, path voucher.Path) (voucher.Reservation, bool, error) {
	return s.reserveAdmitted(ctx, campaignGate, r, ttl, path)
}

func (s *Store) reserveAdmitted(ctx context.Context, owner string, r voucher.ReserveRequest, ttl time.Duration, path voucher.Path) (voucher.Reservation, bool, error) {
	p := &pendingWinner{ctx: ctx, owner: owner, r: r, ttl: ttl, path: path, done: make(chan winnerOutcome, 1)}
	s.winnerQueues.Add(owner, p)
	select {
	case out := <-p.done:
		return out.res, out.created, out.err
	case <-ctx.Done():
		return voucher.Reservation{}, false, errBusy(ctx.Err())
	}
}

// batchSplits is how many times a batch is split before the rest of it is
// written one by one: each split sets aside at least one reserve.
const batchSplits = 3

// errBatchSplit: some reserves of a batch cannot be written with the
// others; errBatchShort: the voucher cannot take them all.
var (
	errBatchSplit = errors.New("batch holds reserves that must be written alone")
	errBatchShort = errors.New("fewer uses left than reserves in the batch")
)

// writeBatch writes batch in one transaction, or splits it: the reserves
// that kept it from committing are written one by one, and the others are
// tried again as one batch while splits remain. It returns once every
// reserve of the batch is answered, so a writer busy with a batch lets the
// next one gather.
func (s *Store) writeBatch(batch []*pendingWinner, splits int) {
	var together, alone []*pendingWinner
	seen := make(map[string]bool, len(batch))
	for _, p := range batch {
		switch {
		case p.ctx.Err() != nil:
			// Gone before its write began: nothing is written for it.
			p.answer(voucher.Reservation{}, false, errBusy(p.ctx.Err()))
		case seen[p.r.OrderID] || p.ttl != batch[0].ttl || p.path != batch[0].path:
			alone = append(alone, p)
		default:
			seen[p.r.OrderID] = true
			together = append(together, p)
		}
	}
	if len(together) == 1 {
		alone, together = append(alone, together[0]), nil
	}
	var next []*pendingWinner // tried again as one batch, before the ones alone
	if len(together) > 0 {
		rows, suspects, err := s.reserveBatch(together)
		switch {
		case err == nil:
			for _, p := range together {
				if row, ok := rows[p.r.OrderID]; ok {
					p.answer(toReservation(row), true, nil)
				} else {
					// Not claimed by the batch: held already (a concurrent
					// retry) or not eligible. Reserve gives its answer.
					alone = append(alone, p)
				}
			}
		case errors.Is(err, errBatchSplit) && splits > 0:
			rest := make([]*pendingWinner, 0, len(together))
			for i, p := range together {
				if suspects[i] {
					alone = append(alone, p)
				} else {
					rest = append(rest, p)
				}
			}
			next = rest
		case errors.Is(err, errBatchShort) && splits > 0:
			// The first ones get the uses left, in one batch; the others
			// are decided one by one (OUT_OF_STOCK unless uses come back).
			// (Enough left now: another batch gave uses back or rolled
			// back meanwhile; try them all again.)
			left := min(s.usesLeft(together[0].ctx, together[0].owner), len(together))
			if left > 0 {
				alone = append(alone, together[left:]...)
				next = together[:left]
			} else {
				alone = append(alone, together...)
			}
		default:
			alone = append(alone, together...)
		}
	}
	if len(next) > 0 {
		s.writeBatch(next, splits-1)
	}
	// One by one, concurrently (Reserve bounds how many run at once).
	var wg sync.WaitGroup
	for _, p := range alone {
		wg.Go(func() { p.answer(s.Reserve(p.ctx, p.r, p.ttl, p.path)) })
	}
	wg.Wait()
}

// reserveBatch is the batch's transaction: takeUses over the batch. It
// writes the reserves whose orders it could claim and returns their rows;
// the others (held already, or not eligible) are for Reserve, after the
// commit. On errBatchSplit, suspects[i] says which reserves kept it from
// committing; errBatchShort: the voucher's row cannot take them all.
func (s *Store) reserveBatch(batch []*pendingWinner) (map[string]db.VoucherRedemption, []bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), winnerBatchTimeout)
	defer cancel()
	owner, ttl, path := batch[0].owner, batch[0].ttl, batch[0].path

	var rows map[string]db.VoucherRedemption
	var suspects []bool
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		// The terms, read without a lock (they do not change once a
		// voucher has started), reckon each order's discount.
		row, err := q.VoucherGetByCode(ctx, owner)
		if errors.Is(err, pgx.ErrNoRows) {
			return voucherNotFound(owner)
		}
		if err != nil {
			return err
		}
		v := toVoucher(row)
		claims := make([]claim, len(batch))
		for i, p := range batch {
			claims[i] = claim{
				orderID: p.r.OrderID, customerID: p.r.CustomerID, amount: p.r.OrderAmount,
				discount: v.DiscountOf(p.r), code: p.r.Code, createdAt: p.r.PeriodAt,
			}
		}
		rows, err = takeUses(ctx, q, owner, voucher.IsCampaignGate(owner), v, ttl, path, claims)
		var refused *takeRefused
		if errors.As(err, &refused) {
			if refused.rule == byVoucher {
				return errBatchShort
			}
			suspects = refused.suspects
			return errBatchSplit
		}
		return err
	})
	return rows, suspects, err
}

// usesLeft is how many uses the voucher has left now; 0 when unknown.
func (s *Store) usesLeft(ctx context.Context, code string) int {
	v, err := s.Voucher(ctx, code)
	if err != nil {
		return 0
	}
	return v.TotalLimit - v.UsedCount
}
