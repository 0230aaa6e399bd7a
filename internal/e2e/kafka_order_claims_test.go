package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/gate"
	"voucherd/internal/postgres"
	"voucherd/internal/testenv"
	"voucherd/internal/testredis"
	"voucherd/internal/voucher"
)

// TestKafka_AnOrderIDHeldOnAnotherVoucherIsAConflictAfterRedisLostItsData:
// orders reserved on an ordinary voucher, then Redis loses its data (and
// with it the orderIds' claims); the same orderIds on a flash voucher in
// kafka mode are ORDER_CONFLICT, not 201s that the database then refuses
// (dead letters): a new winner's orderId is checked against the database,
// which keeps every reservation for ever (issue 30, item 2; before, 20 of
// 20 were answered 201 and dead-lettered).
func TestKafka_AnOrderIDHeldOnAnotherVoucherIsAConflictAfterRedisLostItsData(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	dbURL, db := ownDatabase(t)
	s := kafkaServer(t, map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": dbURL})
	api := restAPI{s}
	ordinary := createVoucher(t, s, voucherSpec{TotalLimit: 100})
	flashCode := createVoucher(t, s, flash(voucherSpec{TotalLimit: 100}))
	const n = 20
	orders := make([]string, n)
	for i := range orders {
		orders[i] = uniqueOrder()
		if r := api.reserve(t, ordinary, int64(i+1), orders[i], 100); r.Error != "" {
			t.Fatalf("reserve %d on the ordinary voucher: %s", i, r.Error)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for i, order := range orders {
		var got result
		testenv.Eventually(t, "an answer other than UNAVAILABLE (the gate is rebuilt)", func() (bool, string) {
			got = api.reserve(t, flashCode, int64(i+1), order, 100)
			return got.Error != "UNAVAILABLE", got.Error
		})
		if got.Error != "ORDER_CONFLICT" {
			t.Errorf("order %d, held on the ordinary voucher, reserved on the flash voucher: %q, want ORDER_CONFLICT", i, got.Error)
		}
	}
	// Nothing of it was sold or sent to the dead letters.
	waitCounters(t, s, flashCode, 0, 0, 0)
	assertNoDeadLetters(t, db, flashCode)
	if r := api.reserve(t, flashCode, 1000, uniqueOrder(), 100); r.Error != "" {
		t.Errorf("a new order on the flash voucher: %q, want a success", r.Error)
	}
}

// TestKafka_AnOrderInFlightWhenRedisRestartedEmptyIsAConflictOnAnotherVoucher:
// a flash winner X is answered 201 and its event is on its way (the consumer
// holds it before its write); Redis restarts without its data, X's claim
// with it. The same orderId on an ordinary voucher must not be a second 201
// (before the claim fence it was: no claim, no row, so it was written, and
// X's event was dead-lettered after its success was answered; explorer seeds
// 37, 126, 168). While X's event is held the answer is UNAVAILABLE; once it
// is applied, ORDER_CONFLICT.
func TestKafka_AnOrderInFlightWhenRedisRestartedEmptyIsAConflictOnAnotherVoucher(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	dbURL, db := ownDatabase(t)
	order := uniqueOrder()
	f := newFaultPoint(voucher.StepApply, order)
	s := faultServer(t, f, map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": dbURL})
	api := restAPI{s}
	ordinary := createVoucher(t, s, voucherSpec{TotalLimit: 100})
	flashCode := createVoucher(t, s, flash(voucherSpec{TotalLimit: 100}))
	if r := api.reserve(t, flashCode, 1, order, 100); r.Error != "" {
		t.Fatalf("reserve on the flash voucher: %s", r.Error)
	}
	f.wait(t) // the consumer holds X's event before writing it
	rs.Restart(t)

	if r := api.reserve(t, ordinary, 1, order, 100); r.Error != "UNAVAILABLE" {
		t.Errorf("X on the ordinary voucher while its flash event is in flight: %q, want UNAVAILABLE (not a second success)", r.Error)
	}
	f.resume <- nil
	var got result
	testenv.Eventually(t, "an answer other than UNAVAILABLE once X's event is applied", func() (bool, string) {
		got = api.reserve(t, ordinary, 1, order, 100)
		return got.Error != "UNAVAILABLE", got.Error
	})
	if got.Error != "ORDER_CONFLICT" {
		t.Errorf("X on the ordinary voucher after its flash event was applied: %q, want ORDER_CONFLICT", got.Error)
	}
	var code, status string
	if err := db.QueryRow(context.Background(), `SELECT voucher_code, status FROM voucher_redemption WHERE order_id = $1`, order).Scan(&code, &status); err != nil {
		t.Fatal(err)
	}
	if code != flashCode || status != "RESERVED" {
		t.Errorf("X in the database: %s %s, want %s RESERVED (its answered success)", code, status, flashCode)
	}
	assertNoDeadLetters(t, db, flashCode)
	waitCounters(t, s, ordinary, 0, 0, 0)
	// A new orderId is sold on both at once again: the fence costs one
	// settle per Redis server, not one per reserve.
	if r := api.reserve(t, ordinary, 2, uniqueOrder(), 100); r.Error != "" {
		t.Errorf("a new order on the ordinary voucher: %q, want a success", r.Error)
	}
}

// TestKafka_AnOrderInFlightWhenRedisRestartedEmptyIsNeverRefusedOnAnotherVoucher:
// X is answered 201 on a flash voucher and its event is held back; Redis
// restarts empty, so X's claim is gone and the server is new. X sent to
// another flash voucher, sold out, is refused by its gate (OUT_OF_STOCK),
// and neither the database (X's event not applied) nor a claim says X is
// held: the refusal must wait for the events in flight (the claim fence)
// and be UNAVAILABLE meanwhile, then ORDER_CONFLICT; never OUT_OF_STOCK
// (explorer seed 7, after a failover to a replica that lagged).
func TestKafka_AnOrderInFlightWhenRedisRestartedEmptyIsNeverRefusedOnAnotherVoucher(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	dbURL, db := ownDatabase(t)
	order := uniqueOrder()
	f := newFaultPoint(voucher.StepApply, order)
	s := faultServer(t, f, map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": dbURL})
	api := restAPI{s}
	soldOut := createVoucher(t, s, flash(voucherSpec{TotalLimit: 1}))
	if r := api.reserve(t, soldOut, 2, uniqueOrder(), 100); r.Error != "" {
		t.Fatalf("the sold-out voucher's one use: %s", r.Error)
	}
	waitCounters(t, s, soldOut, 1, 1, 0)
	flashCode := createVoucher(t, s, flash(voucherSpec{TotalLimit: 100}))
	if r := api.reserve(t, flashCode, 1, order, 100); r.Error != "" {
		t.Fatalf("reserve on the flash voucher: %s", r.Error)
	}
	f.wait(t) // the consumer holds X's event before writing it
	rs.Restart(t)
	// The sold-out voucher's gate loaded again on the new server, from the
	// database, as the consumer does at a recovery marker in that voucher's
	// partition (here the consumer waits at X's event in its own).
	ctx := context.Background()
	snap, err := postgres.New(db).GateSnapshotAll(ctx, soldOut)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	snap.ExpireAt = now.Add(time.Hour)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if ok, err := gate.New(rdb).Recover(ctx, snap, voucher.GateTerms{Epoch: "e-" + order, StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour),
		DatabaseNow: snap.TakenAt, TTL: 15 * time.Minute, Lease: 5 * time.Second}, "recover"); err != nil || !ok {
		t.Fatalf("the sold-out voucher's gate loaded again: %v %v", ok, err)
	}

	// Its gate refuses X (sold out), and rule 2 cannot be settled while X's
	// event is held: neither the database nor a claim on this new server
	// knows X.
	// Asked again for 6 s, past the gate's reload and a publish timeout of
	// the fence's wait: UNAVAILABLE every time.
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r := api.reserve(t, soldOut, 1, order, 100)
		if r.Error != "UNAVAILABLE" {
			t.Fatalf("X on the sold-out voucher while its flash event is in flight: %q, want UNAVAILABLE (never a refusal of rules 3-5)", r.Error)
		}
	}
	f.resume <- nil
	var got result
	testenv.Eventually(t, "an answer other than UNAVAILABLE once X's event is applied", func() (bool, string) {
		got = api.reserve(t, soldOut, 1, order, 100)
		return got.Error != "UNAVAILABLE", got.Error
	})
	if got.Error != "ORDER_CONFLICT" {
		t.Errorf("X on the sold-out voucher after its flash event was applied: %q, want ORDER_CONFLICT", got.Error)
	}
}

// TestKafka_AReleaseWhoseGiveBackNeverRanIsGivenBackByReconciliation: the
// database released an order while the gate still holds it as releasing
// (the process died between the database's release and the gate's
// give-back); reconciliation gives the use back and the voucher sells it
// again. Before, the gate counted the order as in flight (drift 0) and
// published its reserved event again every pass, for ever.
func TestKafka_AReleaseWhoseGiveBackNeverRanIsGivenBackByReconciliation(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	dbURL, db := ownDatabase(t)
	s := kafkaServer(t, map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "300ms"})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 1}))
	order := uniqueOrder()
	if r := api.reserve(t, code, 1, order, 100); r.Error != "" {
		t.Fatalf("reserve: %s", r.Error)
	}
	waitCounters(t, s, code, 1, 1, 0)
	// The expiry sweep's two steps, of which the process did only the
	// first two: the gate marks the order releasing, the database releases
	// it; the gate's give-back never runs.
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if d, _, err := gate.New(rdb).MarkReleased(ctx, code, order, false); err != nil || d != voucher.DecisionReleasedNow {
		t.Fatalf("mark releasing: %v %v", d, err)
	}
	if _, released, err := postgres.New(db).Release(ctx, code, order, voucher.PathKafka); err != nil || !released {
		t.Fatalf("release in the database: %v %v", released, err)
	}
	testenv.Eventually(t, "the released use sold again", func() (bool, string) {
		r := api.reserve(t, code, 2, uniqueOrder(), 100)
		return r.Error == "", r.Error
	})
	assertNoDeadLetters(t, db, code)
}
