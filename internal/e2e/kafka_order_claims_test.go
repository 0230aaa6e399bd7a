package e2e

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/gate"
	"voucherd/internal/postgres"
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
		eventually(t, "an answer other than UNAVAILABLE (the gate is rebuilt)", func() (bool, string) {
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
	eventually(t, "an answer other than UNAVAILABLE once X's event is applied", func() (bool, string) {
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
	eventually(t, "the released use sold again", func() (bool, string) {
		r := api.reserve(t, code, 2, uniqueOrder(), 100)
		return r.Error == "", r.Error
	})
	assertNoDeadLetters(t, db, code)
}
