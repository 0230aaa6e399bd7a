package postgres

import (
	"context"
	"time"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

// The coalesced read of reservations by orderId. In Kafka mode every winner
// of a sale reads its orderId before publishing (internal/voucher: an order
// the gate did not know may be in the database); one primary-key query each
// was a transaction each, as many as the winners. The reads queued while a
// query runs go in the next one, so a stampede costs a few queries a
// millisecond, and a lone read is sent at once.

const (
	maxLookupBatch = 256
	lookupWorkers  = 2
	// lookupTimeout bounds one query; each caller keeps its own deadline.
	lookupTimeout = 5 * time.Second
)

type pendingLookup struct {
	ctx     context.Context
	orderID string
	done    chan lookupOutcome // buffered
}

type lookupOutcome struct {
	row   db.VoucherRedemption
	found bool
	err   error
}

// Reservation reads a reservation by orderId. Errors: NOT_FOUND.
func (s *Store) Reservation(ctx context.Context, orderID string) (voucher.Reservation, error) {
	p := &pendingLookup{ctx: ctx, orderID: orderID, done: make(chan lookupOutcome, 1)}
	s.lookups.Add(p)
	select {
	case out := <-p.done:
		switch {
		case out.err != nil:
			return voucher.Reservation{}, mapError(out.err)
		case !out.found:
			return voucher.Reservation{}, voucher.Errorf(voucher.NotFound, "no reservation for order %s", orderID)
		}
		return toReservation(out.row), nil
	case <-ctx.Done():
		return voucher.Reservation{}, mapError(ctx.Err())
	}
}

// lookup answers a batch with one query. A caller gone already is skipped;
// one that goes while the query runs does not cancel it for the others.
func (s *Store) lookup(batch []*pendingLookup) {
	live := batch[:0:0]
	ids := make([]string, 0, len(batch))
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.done <- lookupOutcome{err: err}
			continue
		}
		live = append(live, p)
		ids = append(ids, p.orderID)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), lookupTimeout)
	defer cancel()
	s.lookupQueries.Add(1)
	rows, err := s.q.VoucherRedemptionGetByOrderIDs(ctx, ids)
	byOrder := make(map[string]db.VoucherRedemption, len(rows))
	for _, r := range rows {
		byOrder[r.OrderID] = r
	}
	for _, p := range live {
		row, found := byOrder[p.orderID]
		p.done <- lookupOutcome{row: row, found: found, err: err}
	}
}
