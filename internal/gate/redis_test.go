package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/testredis"
	"voucherd/internal/voucher"
	"voucherd/lua"
)

// These tests flush, restart or stall Redis, so each runs its own server.

func TestGate_ScriptFlushFallsBackToEval(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	g, rdb := gateAt(t, srv.URL)
	ctx := context.Background()
	code := newCode(t)
	load(t, g, snapshot(code, 3, 1))
	reserve(t, g, 1, req(code, "o1", 1, 100), voucher.GateAdmitted)

	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	sha := redis.NewScript(lua.Reserve).Hash()
	if cached, _ := rdb.ScriptExists(ctx, sha).Result(); len(cached) != 1 || cached[0] {
		t.Fatalf("SCRIPT EXISTS after SCRIPT FLUSH = %v; want [false]", cached)
	}
	// Every script is gone; each call meets NOSCRIPT and sends the script again.
	reserve(t, g, 1, req(code, "o2", 2, 100), voucher.GateAdmitted)
	if cached, _ := rdb.ScriptExists(ctx, sha).Result(); len(cached) != 1 || !cached[0] {
		t.Errorf("SCRIPT EXISTS after a reserve = %v; want [true]", cached)
	}
	release(t, g, code, "o1", true)
	if n, _, err := g.Lower(ctx, code, 1, version(t, g, code)); err != nil || n != 1 {
		t.Errorf("Lower after SCRIPT FLUSH = %d, %v; want 1, nil", n, err)
	}
	if loaded, err := g.Load(ctx, snapshot(code, 3, 1)); err != nil || loaded {
		t.Errorf("Load after SCRIPT FLUSH = %v, %v; want false, nil", loaded, err)
	}
	if err := g.Replace(ctx, bigSnapshot(code, 2, 2500, "x")); err != nil {
		t.Errorf("Replace (staged) after SCRIPT FLUSH: %v", err)
	}
	if n := remaining(t, g, code); n != 2 {
		t.Errorf("remaining %d; want 2", n)
	}
}

func TestGate_FlushAllIsNotLoadedUntilLoadRestores(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	g, rdb := gateAt(t, srv.URL)
	ctx := context.Background()
	code := newCode(t)
	load(t, g, snapshot(code, 3, 1))
	reserve(t, g, 1, req(code, "o1", 1, 100), voucher.GateAdmitted)

	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	reserve(t, g, 1, req(code, "o2", 2, 100), voucher.GateNotLoaded)
	if _, ok, err := g.Remaining(ctx, code); err != nil || ok {
		t.Errorf("Remaining after FLUSHALL: ok %v, %v; want not loaded", ok, err)
	}

	// The warm-up loads the database's view, which knows o1.
	snap := snapshot(code, 2, 1)
	snap.Orders = []voucher.GateOrder{{OrderID: "o1", CustomerID: 1, OrderAmount: 100}}
	snap.Customers = map[int64]int{1: 1}
	load(t, g, snap)
	reserve(t, g, 1, req(code, "o1", 1, 100), voucher.GateDuplicate)
	reserve(t, g, 1, req(code, "o2", 2, 100), voucher.GateAdmitted)
	if n := remaining(t, g, code); n != 1 {
		t.Errorf("remaining %d; want 1", n)
	}
}

func TestGate_RestartedRedisIsNotLoadedUntilLoadRestores(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	g, _ := gateAt(t, srv.URL)
	code := newCode(t)
	load(t, g, snapshot(code, 3, 1))
	reserve(t, g, 1, req(code, "o1", 1, 100), voucher.GateAdmitted)

	srv.Restart(t)
	// The pooled connections died with the server; the client reconnects.
	reserve(t, g, 1, req(code, "o2", 2, 100), voucher.GateNotLoaded)
	load(t, g, snapshot(code, 2, 1))
	reserve(t, g, 1, req(code, "o2", 2, 100), voucher.GateAdmitted)
}

func TestGate_StalledRedisFailsFast(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	g, rdb := gateAt(t, srv.URL)
	ctx := context.Background()
	code := newCode(t)
	load(t, g, snapshot(code, 3, 1))
	// Redis stops answering anyone for a few seconds.
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", 4000, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := g.Reserve(ctx, code, 1, 0, req(code, "o1", 1, 100))
	if err == nil {
		t.Fatal("Reserve on a stalled Redis succeeded")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Reserve on a stalled Redis took %v before failing; want well under the stall", took)
	}
}

func TestGate_StoppedRedisFailsFast(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	g, _ := gateAt(t, srv.URL)
	code := newCode(t)
	srv.Stop()
	start := time.Now()
	if _, err := g.Reserve(context.Background(), code, 1, 0, req(code, "o1", 1, 100)); err == nil {
		t.Fatal("Reserve on a stopped Redis succeeded")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Reserve on a stopped Redis took %v before failing", took)
	}
}
