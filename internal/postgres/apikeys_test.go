package postgres

import (
	"context"
	"strconv"
	"testing"
	"time"

	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
)

// TestKeyRing_FindsAKeyMadeAfterItsLastReadAndDropsARevokedOneWhenTold: a
// ring over the store accepts a key another server made since the ring
// last read the keys (a miss reads them again, at most every
// MissInterval), keeps refusing a token it does not know, and refuses a
// revoked key once told of the change.
func TestKeyRing_FindsAKeyMadeAfterItsLastReadAndDropsARevokedOneWhenTold(t *testing.T) {
	s := New(testPool)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := voucher.WithCaller(ctx, voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	keys := voucher.NewApiKeys(s, nil)
	ring := voucher.NewKeyRing(s, nil, voucher.KeyRingConfig{})
	defer ring.Start(ctx)()
	defer cancel()

	made, err := keys.Create(admin, voucher.NewApiKey{Name: unique("ring"), Role: voucher.RoleStorefront})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := ring.Check(ctx, made.Secret)
	if !ok || c.Caller.Role != voucher.RoleStorefront || c.RetryAfter != 0 {
		t.Fatalf("a key made after the ring's read: %v %+v", ok, c)
	}
	if _, ok := ring.Check(ctx, made.Secret+"x"); ok {
		t.Error("a token one character longer than a key is accepted")
	}
	// Made right after that miss's read: the next miss waits for a read
	// that starts after it, and finds it.
	next, err := keys.Create(admin, voucher.NewApiKey{Name: unique("ring"), Role: voucher.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := ring.Check(ctx, next.Secret); !ok || c.Caller.Role != voucher.RoleAdmin {
		t.Fatalf("a key made within MissInterval of the last miss: %v %+v", ok, c)
	}
	if _, err := keys.Revoke(admin, strconv.FormatInt(made.Key.ID, 10)); err != nil {
		t.Fatal(err)
	}
	ring.Changed()
	testenv.EventuallyWithin(t, time.Second, "the revoked key refused once the ring is told", func() (bool, string) {
		_, ok := ring.Check(ctx, made.Secret)
		return !ok, "still accepted"
	})
}
