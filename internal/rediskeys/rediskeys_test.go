package rediskeys_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"voucherd/internal/gate"
	"voucherd/internal/rediskeys"
	"voucherd/internal/testenv"
)

func client(t *testing.T) rediskeys.Limiter {
	t.Helper()
	rdb, err := gate.NewClient(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rediskeys.NewLimiter(rdb)
}

func uniqueKey() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "test:" + hex.EncodeToString(b)
}

// TestLimiter_TwoClientsShareOneBudget: two limiters on their own Redis
// connections (two servers) allow a key its burst once between them, then
// say how long until the next.
func TestLimiter_TwoClientsShareOneBudget(t *testing.T) {
	a, b := client(t), client(t)
	ctx := context.Background()
	key := uniqueKey()
	allowed := 0
	var wait time.Duration
	for i := range 20 {
		l := []rediskeys.Limiter{a, b}[i%2]
		d, err := l.Allow(ctx, key, 1, 4)
		if err != nil {
			t.Fatal(err)
		}
		if d == 0 {
			allowed++
		} else {
			wait = d
		}
	}
	// 1 a second: the burst of 4, and at most one more refilled meanwhile.
	if allowed < 4 || allowed > 5 || wait <= 0 || wait > time.Second {
		t.Errorf("%d of 20 allowed, last wait %v; want 4 (or 5) and a wait of at most 1s", allowed, wait)
	}
}

// TestChanges_APublishedChangeReachesEveryListener: every listener is told
// when its subscription starts and when a change is published.
func TestChanges_APublishedChangeReachesEveryListener(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var told [2]chan struct{}
	for i := range told {
		rdb, err := gate.NewClient(testenv.RedisURL())
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		told[i] = make(chan struct{}, 64)
		ch := told[i]
		go rediskeys.NewChanges(rdb).Listen(ctx, func() { ch <- struct{}{} })
	}
	for i := range told {
		select {
		case <-told[i]: // subscribed
		case <-time.After(10 * time.Second):
			t.Fatalf("listener %d was not told its subscription started", i)
		}
	}
	rdb, err := gate.NewClient(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := rediskeys.NewChanges(rdb).Publish(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range told {
		select {
		case <-told[i]:
		case <-time.After(10 * time.Second):
			t.Fatalf("listener %d was not told of the change", i)
		}
	}
}
