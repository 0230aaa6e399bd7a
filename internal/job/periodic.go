// Package job runs the service's background work: expiring reservations,
// warming flash gates and reconciling them with the database. Each job is
// safe with many instances running it at once.
package job

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"
)

// Periodic calls runOnce every Interval, each pass under its own timeout,
// until Stop.
type Periodic struct {
	Name     string
	Interval time.Duration
	Timeout  time.Duration // per pass; default Interval
	RunOnce  func(ctx context.Context) error
	// Last makes Stop run RunOnce once more after the loop has ended, under
	// its own timeout: for work a stopping instance must not leave undone.
	Last   bool
	Logger *slog.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start runs a first pass at once, then one every Interval, in the background.
func (p *Periodic) Start(ctx context.Context) {
	ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	logger := cmp.Or(p.Logger, slog.Default()).With("job", p.Name)
	timeout := cmp.Or(p.Timeout, p.Interval)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ticker := time.NewTicker(p.Interval)
		defer ticker.Stop()
		for {
			passCtx, cancel := context.WithTimeout(ctx, timeout)
			if err := p.RunOnce(passCtx); err != nil && ctx.Err() == nil {
				logger.ErrorContext(ctx, "job pass failed", "err", err)
			}
			cancel()
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
}

// Stop ends the job and waits for a pass in progress to finish; with Last,
// it then runs one more.
func (p *Periodic) Stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	p.wg.Wait()
	if p.Last {
		ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(p.Timeout, p.Interval))
		defer cancel()
		if err := p.RunOnce(ctx); err != nil {
			cmp.Or(p.Logger, slog.Default()).With("job", p.Name).Error("job's last pass failed", "err", err)
		}
	}
}
