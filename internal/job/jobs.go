package job

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"voucherd/internal/voucher"
)

// expiryBatch bounds one sweep's batch; a pass repeats batches until done.
const expiryBatch = 500

// Expiry releases reservations past their deadline every interval. Each
// reservation's release is a conditional update, so any number of instances
// may sweep at once and each reservation is released once.
func Expiry(svc *voucher.Service, interval time.Duration, logger *slog.Logger) *Periodic {
	return &Periodic{
		Name:     "expiry",
		Interval: interval,
		Logger:   logger,
		RunOnce: func(ctx context.Context) error {
			for {
				n, err := svc.ExpireDue(ctx, expiryBatch)
				if n > 0 {
					logger.InfoContext(ctx, "expired reservations released", "count", n)
				}
				if err != nil || n < expiryBatch {
					return err
				}
			}
		},
	}
}

// Leases lets one instance of many run a job per period.
type Leases interface {
	TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
}

// Reconcile compares every flash gate with the database every interval. A
// lease in the database makes one instance per interval do it.
func Reconcile(svc *voucher.Service, leases Leases, holder string, interval time.Duration, logger *slog.Logger) *Periodic {
	return leased("reconcile", leases, holder, interval, logger, func(ctx context.Context) error {
		_, err := svc.Reconcile(ctx)
		return err
	})
}

// SampleCounters samples the counters of the open vouchers for the
// dashboard's chart every interval. A pass reads every open voucher and its
// last sample and writes the database's figures, whichever instance runs
// it, so a lease makes one instance per interval do it: run by every
// instance, each pass cost every instance's share of PostgreSQL (about
// 100 ms of its CPU per pass on a database of 5,000 open vouchers, every
// 5 s).
func SampleCounters(sample func(context.Context) (int, error), leases Leases, holder string, interval time.Duration, logger *slog.Logger) *Periodic {
	return leased("sample-counters", leases, holder, interval, logger, func(ctx context.Context) error {
		_, err := sample(ctx)
		return err
	})
}

// leased is the periodic job name whose pass runs only in the instance
// holding the lease of the same name, so that of many instances one does a
// pass per interval. The lease is slightly shorter than the interval: the
// holder's next pass finds it lapsed, and so would anyone else's.
func leased(name string, leases Leases, holder string, interval time.Duration, logger *slog.Logger, pass func(context.Context) error) *Periodic {
	return &Periodic{
		Name:     name,
		Interval: interval,
		Logger:   logger,
		RunOnce: func(ctx context.Context) error {
			ok, err := leases.TakeLease(ctx, name, holder, interval*9/10)
			if err != nil || !ok {
				return err
			}
			return pass(ctx)
		},
	}
}

// WarmUp loads the gates of flash vouchers that are live or start soon. The
// load is atomic and never touches a loaded gate, so instances may race.
func WarmUp(svc *voucher.Service, interval time.Duration, logger *slog.Logger) *Periodic {
	return &Periodic{
		Name:     "warm-up",
		Interval: interval,
		Logger:   logger,
		RunOnce:  svc.WarmGates,
	}
}

// SaleFlush adds the reserve answers this instance counted to the database
// every interval (a second), and once more when it stops, so that a
// restart loses none of voucher.sale's counts. A flush that fails keeps its
// counts for the next; while the database is down, the first failure and
// then every 60th is logged, not one a second.
func SaleFlush(svc *voucher.Service, interval time.Duration, logger *slog.Logger) *Periodic {
	failures := 0 // the job's goroutine, then Stop's last pass: never at once
	return &Periodic{
		Name:     "sale-flush",
		Interval: interval,
		Timeout:  5 * time.Second,
		RunOnce: func(ctx context.Context) error {
			err := svc.FlushSale(ctx)
			if err == nil {
				failures = 0
				return nil
			}
			if failures++; failures%60 != 1 {
				return nil
			}
			return fmt.Errorf("%w (%d flushes failed in a row; their counts are kept for the next)", err, failures)
		},
		Last:   true,
		Logger: logger,
	}
}
