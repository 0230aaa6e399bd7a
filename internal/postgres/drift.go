package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

// SaveDriftReport stores one reconciliation result.
func (s *Store) SaveDriftReport(ctx context.Context, d voucher.DriftReport) (voucher.DriftReport, error) {
	// The gate's counter is whatever Redis holds (a tampered gate may hold
	// anything): figures that do not fit the columns are refused, not wrapped.
	var gate *int32
	if d.GateRemaining != nil {
		g, err := count32("gateRemaining", *d.GateRemaining)
		if err != nil {
			return voucher.DriftReport{}, err
		}
		gate = &g
	}
	var figures [3]int32
	for i, f := range [...]struct {
		name string
		n    int
	}{{"databaseRemaining", d.DatabaseRemaining}, {"inFlight", d.InFlight}, {"drift", d.Drift}} {
		n, err := count32(f.name, f.n)
		if err != nil {
			return voucher.DriftReport{}, err
		}
		figures[i] = n
	}
	row, err := s.q.DriftReportInsert(ctx, db.DriftReportInsertParams{
		VoucherCode:       d.VoucherCode,
		DatabaseRemaining: figures[0],
		GateRemaining:     gate,
		InFlight:          figures[1],
		Drift:             figures[2],
		OrdersOnlyInGate:  nonNil(d.OrdersOnlyInGate),
		OrdersOnlyInDb:    nonNil(d.OrdersOnlyInStore),
		Repaired:          d.Repaired,
		Alert:             d.Alert,
		CodesDiffering:    nonNil(d.CodesDiffering),
		PeriodsDiffering:  nonNil(d.PeriodsDiffering),
	})
	if err != nil {
		return voucher.DriftReport{}, mapError(err)
	}
	return toDriftReport(row), nil
}

// LatestDriftReports returns the latest report of every reconciled voucher.
func (s *Store) LatestDriftReports(ctx context.Context) ([]voucher.DriftReport, error) {
	rows, err := s.q.DriftReportListLatest(ctx)
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.DriftReport, len(rows))
	for i, r := range rows {
		out[i] = toDriftReport(r)
	}
	return out, nil
}

// LatestDriftReport returns a voucher's latest report. Errors: NOT_FOUND.
func (s *Store) LatestDriftReport(ctx context.Context, code string) (voucher.DriftReport, error) {
	row, err := s.q.DriftReportGetLatest(ctx, code)
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.DriftReport{}, voucher.Errorf(voucher.NotFound, "voucher %s was never reconciled", code)
	}
	if err != nil {
		return voucher.DriftReport{}, mapError(err)
	}
	return toDriftReport(row), nil
}

// TakeLease takes the named job's lease for ttl; false when another holder
// has it, so many instances run a periodic job once per period.
func (s *Store) TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	_, err := s.q.JobLeaseTake(ctx, db.JobLeaseTakeParams{Name: name, Holder: holder, TtlSeconds: ttl.Seconds()})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, mapError(err)
	}
	return true, nil
}

func toDriftReport(r db.DriftReport) voucher.DriftReport {
	d := voucher.DriftReport{
		VoucherCode:       r.VoucherCode,
		DatabaseRemaining: int(r.DatabaseRemaining),
		InFlight:          int(r.InFlight),
		Drift:             int(r.Drift),
		OrdersOnlyInGate:  r.OrdersOnlyInGate,
		OrdersOnlyInStore: r.OrdersOnlyInDb,
		Repaired:          r.Repaired,
		Alert:             r.Alert,
		CheckedAt:         r.CheckedAt,
		CodesDiffering:    r.CodesDiffering,
		PeriodsDiffering:  r.PeriodsDiffering,
	}
	if r.GateRemaining != nil {
		g := int(*r.GateRemaining)
		d.GateRemaining = &g
	}
	return d
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
