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

// TestKeyRing_AKeyIsFoundWhileChangesAreToldAllTheTime: changes told while
// a miss reads the keys (other servers making and revoking theirs) do not
// make the miss lose what it read: a key just made is found on its first
// use.
func TestKeyRing_AKeyIsFoundWhileChangesAreToldAllTheTime(t *testing.T) {
	s := New(testPool)
	ctx, cancel := context.WithCancel(context.Background())
	admin := voucher.WithCaller(ctx, voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	keys := voucher.NewApiKeys(s, nil)
	ring := voucher.NewKeyRing(s, nil, voucher.KeyRingConfig{MissInterval: time.Millisecond})
	stopped := ring.Start(ctx)
	telling := make(chan struct{})
	go func() {
		defer close(telling)
		for ctx.Err() == nil {
			ring.Changed()
			time.Sleep(50 * time.Microsecond)
		}
	}()
	defer func() { cancel(); <-telling; stopped() }()
	for i := range 20 {
		made, err := keys.Create(admin, voucher.NewApiKey{Name: unique("told"), Role: voucher.RoleStorefront})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ring.Check(ctx, made.Secret); !ok {
			t.Fatalf("key %d, made a moment ago, refused while changes are told", i)
		}
	}
}
