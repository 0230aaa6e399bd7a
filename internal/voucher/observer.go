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
	// RollbackDone records a rollback's outcome: RollbackGivenBack,
	// RollbackUnchanged (rolled back before), or the error code.
	RollbackDone(outcome string)
	// DriftChecked records a reconciliation result.
	DriftChecked(d DriftReport)
}

// The outcomes of a rollback that succeeded, for RollbackDone.
const (
	RollbackGivenBack = "ok"        // CONFIRMED -> ROLLED_BACK now
	RollbackUnchanged = "unchanged" // rolled back before: nothing given back
)

// PathGateMemory is a flash reserve answered from the sold-out snapshot in
// memory, without Redis (a metrics label, never written to the database).
const PathGateMemory Path = "gate-memory"

type nopObserver struct{}

func (nopObserver) ReserveDone(Path, ErrorCode, time.Duration) {}
func (nopObserver) GateCall(string, error, time.Duration)      {}
func (nopObserver) DatabaseWrite(string)                       {}
func (nopObserver) ReservationsExpired(int)                    {}
func (nopObserver) RollbackDone(string)                        {}
func (nopObserver) DriftChecked(DriftReport)                   {}

// observedGate times every gate call for the observer.
type observedGate struct {
	Gate
	obs Observer
}

func (g observedGate) Reserve(ctx context.Context, code string, perUserLimit int, discount int64, r ReserveRequest) (GateVerdict, error) {
	start := time.Now()
	v, err := g.Gate.Reserve(ctx, code, perUserLimit, discount, r)
	g.obs.GateCall("reserve", err, time.Since(start))
	return v, err
}

func (g observedGate) Release(ctx context.Context, code, orderID string, discount int64) (bool, error) {
	start := time.Now()
	ok, err := g.Gate.Release(ctx, code, orderID, discount)
	g.obs.GateCall("release", err, time.Since(start))
	return ok, err
}

func (g observedGate) Forget(ctx context.Context, code, orderID string, discount int64) (bool, error) {
	start := time.Now()
	ok, err := g.Gate.Forget(ctx, code, orderID, discount)
	g.obs.GateCall("forget", err, time.Since(start))
	return ok, err
}

func (g observedGate) Drop(ctx context.Context, code, orderID string, discount int64) (bool, error) {
	start := time.Now()
	ok, err := g.Gate.Drop(ctx, code, orderID, discount)
	g.obs.GateCall("drop", err, time.Since(start))
	return ok, err
}

func (g observedGate) DropCode(ctx context.Context, code, orderID string, discount int64) (bool, error) {
	start := time.Now()
	ok, err := g.Gate.DropCode(ctx, code, orderID, discount)
	g.obs.GateCall("drop", err, time.Since(start))
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

func (g observedGate) Availability(ctx context.Context, code, campaignCode string, customerID int64, periods ...GatePeriod) (Availability, bool, error) {
	start := time.Now()
	a, ok, err := g.Gate.Availability(ctx, code, campaignCode, customerID, periods...)
	g.obs.GateCall("availability", err, time.Since(start))
	return a, ok, err
}

func (g observedGate) Remaining(ctx context.Context, code string) (int, bool, error) {
	start := time.Now()
	n, ok, err := g.Gate.Remaining(ctx, code)
	g.obs.GateCall("remaining", err, time.Since(start))
	return n, ok, err
}

func (g observedGate) Lower(ctx context.Context, code string, n int, version string) (int, bool, error) {
	start := time.Now()
	left, lowered, err := g.Gate.Lower(ctx, code, n, version)
	g.obs.GateCall("lower", err, time.Since(start))
	return left, lowered, err
}

// The gate calls of the Kafka write path, timed like the others.

func (g observedGate) Admit(ctx context.Context, code string, r ReserveRequest, discount int64) (Admission, error) {
	start := time.Now()
	a, err := g.Gate.Admit(ctx, code, r, discount)
	g.obs.GateCall("admit", err, time.Since(start))
	return a, err
}

func (g observedGate) Settle(ctx context.Context, code string, op SettleOp, o GateOrder, epoch string, discount int64) (SettleAnswer, GateOrder, error) {
	start := time.Now()
	a, after, err := g.Gate.Settle(ctx, code, op, o, epoch, discount)
	g.obs.GateCall("settle-"+string(op), err, time.Since(start))
	return a, after, err
}

func (g observedGate) ReserveTimed(ctx context.Context, code string, perUserLimit int, discount int64, r ReserveRequest, createdAt, expiresAt time.Time) (GateVerdict, error) {
	start := time.Now()
	v, err := g.Gate.ReserveTimed(ctx, code, perUserLimit, discount, r, createdAt, expiresAt)
	g.obs.GateCall("reserve", err, time.Since(start))
	return v, err
}

func (g observedGate) Order(ctx context.Context, code, orderID string) (GateOrder, bool, error) {
	start := time.Now()
	o, ok, err := g.Gate.Order(ctx, code, orderID)
	g.obs.GateCall("order", err, time.Since(start))
	return o, ok, err
}

func (g observedGate) Confirm(ctx context.Context, code, orderID string) (GateDecision, GateOrder, error) {
	start := time.Now()
	d, o, err := g.Gate.Confirm(ctx, code, orderID)
	g.obs.GateCall("confirm", err, time.Since(start))
	return d, o, err
}

func (g observedGate) MarkReleased(ctx context.Context, code, orderID string, expireOnly bool) (GateDecision, GateOrder, error) {
	start := time.Now()
	d, o, err := g.Gate.MarkReleased(ctx, code, orderID, expireOnly)
	op := "mark-released"
	if expireOnly {
		op = "mark-expired"
	}
	g.obs.GateCall(op, err, time.Since(start))
	return d, o, err
}

func (g observedGate) ClaimOrder(ctx context.Context, orderID, code string) (string, string, error) {
	start := time.Now()
	owner, server, err := g.Gate.ClaimOrder(ctx, orderID, code)
	g.obs.GateCall("claim", err, time.Since(start))
	return owner, server, err
}

func (g observedGate) UnclaimOrder(ctx context.Context, orderID, code string) error {
	start := time.Now()
	err := g.Gate.UnclaimOrder(ctx, orderID, code)
	g.obs.GateCall("unclaim", err, time.Since(start))
	return err
}

func (g observedGate) OrderOwner(ctx context.Context, orderID string) (string, bool, string, error) {
	start := time.Now()
	owner, ok, server, err := g.Gate.OrderOwner(ctx, orderID)
	g.obs.GateCall("claim-read", err, time.Since(start))
	return owner, ok, server, err
}
