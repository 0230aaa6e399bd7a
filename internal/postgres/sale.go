package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

// AddSaleCounts adds an instance's counts of reserve answers to sale_second
// in one statement (sql/queries/sale_second.sql).
func (s *Store) AddSaleCounts(ctx context.Context, counts []voucher.SaleCount) error {
	p := db.SaleSecondsAddParams{
		Codes:    make([]string, len(counts)),
		Seconds:  make([]time.Time, len(counts)),
		Outcomes: make([]string, len(counts)),
		Counts:   make([]int64, len(counts)),
	}
	for i, c := range counts {
		p.Codes[i], p.Seconds[i], p.Outcomes[i], p.Counts[i] = c.Code, c.Second, c.Outcome, c.Count
	}
	return mapError(s.q.SaleSecondsAdd(ctx, p))
}

// SaleFacts reads a voucher's counted answers, its reservations per second
// and its first use and sell-out, in one snapshot. Errors: NOT_FOUND.
func (s *Store) SaleFacts(ctx context.Context, code string) (voucher.SaleFacts, error) {
	var f voucher.SaleFacts
	err := s.withTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(q *db.Queries) error {
		if _, err := q.VoucherGetByCode(ctx, code); errors.Is(err, pgx.ErrNoRows) {
			return voucherNotFound(code)
		} else if err != nil {
			return err
		}
		counted, err := q.SaleSecondsOf(ctx, code)
		if err != nil {
			return err
		}
		f.Counted = make([]voucher.SaleCount, len(counted))
		for i, c := range counted {
			f.Counted[i] = voucher.SaleCount{Code: code, Second: c.Second.UTC(), Outcome: c.Outcome, Count: c.Count}
		}
		admitted, err := q.SaleAdmittedOf(ctx, code)
		if err != nil {
			return err
		}
		f.Admitted = make([]voucher.AdmittedCount, len(admitted))
		for i, a := range admitted {
			f.Admitted[i] = voucher.AdmittedCount{Second: a.Second.UTC(), Count: a.Count}
		}
		first, err := q.SaleFirstUseOf(ctx, code)
		if err != nil {
			return err
		}
		if len(first) > 0 {
			t := first[0].UTC()
			f.FirstUseAt = &t
		}
		soldOut, err := q.SaleSoldOutOf(ctx, code)
		if err != nil {
			return err
		}
		if len(soldOut) > 0 {
			t := soldOut[0].UTC()
			f.SoldOutAt = &t
		}
		return nil
	})
	return f, mapError(err)
}
