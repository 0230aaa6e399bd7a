package voucher

import (
	"context"
	"time"
)

// Observer receives the figures operators watch; the metrics package
// implements it. Calls must be cheap: they sit on the hot path.
type Observer interface {
	// ReserveDone records a reserve's outcome ("" for success, else the
	// error code) on its path, and how long it took.
	ReserveDone(path Path, outcome ErrorCode, d time.Duration)
	// GateCall records one call of the Redis gate.
	GateCall(op string, err error, d time.Duration)
	// DatabaseWrite records one write transaction sent to the database.
	DatabaseWrite(op string)
	// ReservationsExpired records reservations released by expiry.
	ReservationsExpired(n int)
	// DriftChecked records a reconciliation result.
	DriftChecked(d DriftReport)
}

// PathGateMemory is a flash reserve answered from the sold-out snapshot in
// memory, without Redis (a metrics label, never written to the database).
const PathGateMemory Path = "gate-memory"

type nopObserver struct{}

func (nopObserver) ReserveDone(Path, ErrorCode, time.Duration) {}
func (nopObserver) GateCall(string, error, time.Duration)      {}
func (nopObserver) DatabaseWrite(string)                       {}
func (nopObserver) ReservationsExpired(int)                    {}
func (nopObserver) DriftChecked(DriftReport)                   {}

// observedGate times every gate call for the observer.
type observedGate struct {
	Gate
	obs Observer
}

func (g observedGate) Reserve(ctx context.Context, code string, perUserLimit int, r ReserveRequest) (GateVerdict, error) {
	start := time.Now()
	v, err := g.Gate.Reserve(ctx, code, perUserLimit, r)
	g.obs.GateCall("reserve", err, time.Since(start))
	return v, err
}

func (g observedGate) Release(ctx context.Context, code, orderID string) (bool, error) {
	start := time.Now()
	ok, err := g.Gate.Release(ctx, code, orderID)
	g.obs.GateCall("release", err, time.Since(start))
	return ok, err
}

func (g observedGate) Forget(ctx context.Context, code, orderID string) (bool, error) {
	start := time.Now()
	ok, err := g.Gate.Forget(ctx, code, orderID)
	g.obs.GateCall("forget", err, time.Since(start))
	return ok, err
}

func (g observedGate) Load(ctx context.Context, snap GateSnapshot) (bool, error) {
	start := time.Now()
	ok, err := g.Gate.Load(ctx, snap)
	g.obs.GateCall("load", err, time.Since(start))
	return ok, err
}

func (g observedGate) Snapshot(ctx context.Context, code string) (GateSnapshot, bool, error) {
	start := time.Now()
	snap, ok, err := g.Gate.Snapshot(ctx, code)
	g.obs.GateCall("snapshot", err, time.Since(start))
	return snap, ok, err
}

func (g observedGate) Remaining(ctx context.Context, code string) (int, bool, error) {
	start := time.Now()
	n, ok, err := g.Gate.Remaining(ctx, code)
	g.obs.GateCall("remaining", err, time.Since(start))
	return n, ok, err
}

func (g observedGate) Lower(ctx context.Context, code string, n int) (int, error) {
	start := time.Now()
	left, err := g.Gate.Lower(ctx, code, n)
	g.obs.GateCall("lower", err, time.Since(start))
	return left, err
}
