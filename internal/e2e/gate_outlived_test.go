package e2e

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/testenv"
)

// TestKafka_ConfirmAndReleaseAfterTheGateWentForGoodAreTheDatabases: a
// flash voucher's gate keys expire a week after its window and the last
// reservation's TTL. A confirm or release of one of its reservations after
// that is decided by the database, which holds every decision the gate
// made. Here the window is moved eight days into the past and the gate's
// keys deleted, as their expiry leaves them. Before, each call asked for
// the gate's recovery and answered UNAVAILABLE, for ever (issue 30, item 8).
func TestKafka_ConfirmAndReleaseAfterTheGateWentForGoodAreTheDatabases(t *testing.T) {
	t.Parallel()
	dbURL, db := ownDatabase(t)
	s := kafkaServer(t, map[string]string{"DATABASE_URL": dbURL})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 10}))
	toConfirm, toRelease := uniqueOrder(), uniqueOrder()
	for i, order := range []string{toConfirm, toRelease} {
		if r := api.reserve(t, code, int64(i+1), order, 100); r.Error != "" {
			t.Fatalf("reserve: %s", r.Error)
		}
	}
	waitCounters(t, s, code, 2, 2, 0)

	ctx := context.Background()
	if _, err := db.Exec(ctx, `UPDATE voucher SET starts_at = now() - interval '9 days', ends_at = now() - interval '8 days' WHERE code = $1`, code); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(mustRedisOptions(t))
	t.Cleanup(func() { _ = rdb.Close() })
	keys, err := rdb.Keys(ctx, "voucher:{"+code+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the gate's keys: %v %v", keys, err)
	}
	if err := rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}

	var got result
	testenv.Eventually(t, "the confirm decided (the voucher's cached terms lapse within seconds)", func() (bool, string) {
		got = api.confirm(t, code, toConfirm)
		return got.Error != "UNAVAILABLE", got.Error
	})
	if got.Error != "" || got.status() != "CONFIRMED" {
		t.Errorf("confirm after the gate went: %q %s, want CONFIRMED", got.Error, got.status())
	}
	if r := api.release(t, code, toRelease); r.Error != "" || r.status() != "RELEASED" {
		t.Errorf("release after the gate went: %q %s, want RELEASED", r.Error, r.status())
	}
	if r := api.release(t, code, toConfirm); r.Error != "ALREADY_CONFIRMED" {
		t.Errorf("release of the confirmed order: %q, want ALREADY_CONFIRMED", r.Error)
	}
	if r := api.reserve(t, code, 3, uniqueOrder(), 100); r.Error != "NOT_ELIGIBLE" {
		t.Errorf("a new reserve on the voucher ended eight days ago: %q, want NOT_ELIGIBLE", r.Error)
	}
	waitCounters(t, s, code, 1, 0, 1)
}
